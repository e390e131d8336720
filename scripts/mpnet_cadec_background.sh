#!/usr/bin/env bash
# Start (or resume) the MPNet CADEC seeds in the background on this machine's CPU, detached from the
# shell: the corpus converted and the runs (checkpoints, model-best, model-last, log) under
# RUNS (default ~/w2ner-runs), outside the checkout, so a later session on the same machine finds
# them; each seed continues from its newest checkpoint, a seed whose project/results JSON exists is
# skipped (scripts/seeds.py). Refuses to start a second copy. Needs the README's setup (.venv) and
# `python -m spacy_w2ner fetch-encoder all-mpnet-base-v2`.
#   bash scripts/mpnet_cadec_background.sh; tail -f ~/w2ner-runs/seeds.log
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-$HOME/w2ner-runs}
if pgrep -f "seeds.py cadec-w2ner-mpnet" >/dev/null; then
    echo "the MPNet CADEC seeds are already running: $(pgrep -f 'seeds.py cadec-w2ner-mpnet' | head -1)" >&2
    exit 1
fi
. .venv/bin/activate
mkdir -p "$RUNS/cadec"
for split in train dev test; do
    [ -f "$RUNS/cadec/$split.spacy" ] || python -m spacy_w2ner convert w2ner-json \
        "../shared/corpora/cadec/w2ner-json/$split.json" "$RUNS/cadec"
done
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
setsid nohup python scripts/seeds.py cadec-w2ner-mpnet --seeds 1 2 3 --test "$RUNS/cadec/test.spacy" \
    --runs-dir "$RUNS" -- python -m spacy_w2ner train project/configs/w2ner_mpnet_gpu.cfg \
    --paths.train "$RUNS/cadec/train.spacy" --paths.dev "$RUNS/cadec/dev.spacy" \
    >>"$RUNS/seeds.log" 2>&1 < /dev/null &
echo "started (pid $!): tail -f $RUNS/seeds.log"
