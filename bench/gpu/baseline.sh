#!/usr/bin/env bash
# The spacy_w2ner package of another commit, for a device call that times it against this tree in
# one call (machines differ by up to 1.2x from loan to loan: bench/README.md, GPU):
#
#   bench/gpu/baseline.sh REF     (default HEAD)  ->  $BASELINE/{spacy_w2ner/,COMMIT}
#                                 ($BASELINE: .gpu-bundle/baseline unless set, as in run.sh)
#
# A device call carries .gpu-bundle/baseline (about 1 MB) and names "base" in a train-speed
# setting (TRAIN_SETTINGS="12:fp32:base 12:fp32"): that run imports this spacy_w2ner first
# (bench.py train --code-dir); the configs, data and bench code are this tree's.
set -euo pipefail
cd "$(dirname "$0")/../.."
REF=${1:-HEAD}
DEST=${BASELINE:-.gpu-bundle/baseline}
COMMIT=$(git rev-parse --verify "$REF^{commit}")
rm -rf "$DEST" && mkdir -p "$DEST"
git archive "$COMMIT" spacy_w2ner | tar -x -C "$DEST"
echo "$COMMIT $(git log -1 --format=%s "$COMMIT" | cut -c1-80)" > "$DEST/COMMIT"
echo "$DEST: spacy_w2ner of $(cat "$DEST/COMMIT")"
