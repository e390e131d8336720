"""GPU bench of w2ner: training and inference speed, peak GPU memory, GPU against CPU
predictions, a 50,000-token document. Runs on a CPU too (``--gpu-id -1``), end to end.

    python bench/gpu/bench.py make-encoder ENCODER_DIR --like MPNET_DIR [--layers 12 --width 768]
    python bench/gpu/bench.py train OUT_DIR --encoder ENCODER_DIR --train T.spacy --dev D.spacy \
        --steps 300 --warmup 30 --precision bf16 --gpu-id 0         # our train loop, timed per step
    python bench/gpu/bench.py infer MODEL TEST.spacy --gpu-id 0       # sentences/s, grid share
    python bench/gpu/bench.py long-doc MODEL --tokens 50000 --gpu-id 0
    python bench/gpu/bench.py compare MODEL DEV.spacy --gpu-id 0      # GPU vs CPU entities

Each command prints one JSON object and appends it to --results (JSON lines).
bench/gpu/run.sh chains them; bench/README.md has the figures.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CONFIGS = ROOT / "project" / "configs"
sys.path.insert(0, str(HERE))


# ---------------------------------------------------------------- environment
def use_device(gpu_id: int) -> str:
    """Put spaCy/Thinc (and torch) on the GPU, or stay on the CPU; return the device's name."""
    import spacy

    if gpu_id >= 0:
        spacy.require_gpu(gpu_id)
        import torch

        return torch.cuda.get_device_name(gpu_id)
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def versions() -> Dict[str, str]:
    from importlib.metadata import version

    import torch

    names = ("spacy", "thinc", "spacy-transformers", "transformers", "torch", "cupy-cuda13x", "numpy")
    found = {"python": platform.python_version(), "cuda": str(torch.version.cuda)}
    for name in names:
        try:
            found[name] = version(name)
        except Exception:
            pass
    return found


def emit(result: Dict, results_path: str) -> None:
    print(json.dumps(result, indent=1))
    if results_path:
        with open(results_path, "a", encoding="utf8") as file:
            file.write(json.dumps(result) + "\n")


def read_docs(path: str, vocab) -> List:
    from spacy.tokens import DocBin

    return list(DocBin().from_disk(path).get_docs(vocab))


def blank_copy(doc, vocab):
    from spacy.tokens import Doc

    return Doc(vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc])


# ---------------------------------------------------------------- encoder
def make_encoder(args) -> None:
    """An encoder with random weights shaped like the one in ``--like`` (speed needs no weights)."""
    from transformers import AutoConfig, AutoModel

    source = Path(args.like)
    target = Path(args.directory)
    target.mkdir(parents=True, exist_ok=True)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (source / name).exists():
            shutil.copy(source / name, target / name)
    config = AutoConfig.from_pretrained(source)
    if args.layers:
        config.num_hidden_layers = args.layers
    if args.width:
        config.hidden_size, config.num_attention_heads = args.width, max(1, args.width // 64)
        config.intermediate_size = 4 * args.width
    AutoModel.from_config(config).save_pretrained(target)
    print(f"{target}: random {config.model_type}, {config.num_hidden_layers} layers, width {config.hidden_size}")


# ---------------------------------------------------------------- training speed
PRECISIONS = {"fp32": (False, "float16"), "fp16": (True, "float16"), "bf16": (True, "bfloat16")}


def bench_config(args, stats_path: Path) -> Path:
    """The project config with the bench's batcher, steps, encoder and precision."""
    from spacy.util import load_config

    config = load_config(CONFIGS / args.config)
    training = config["training"]
    training["max_steps"] = args.steps
    training["max_epochs"] = 0
    # Evaluate at step 0 (warm-up) and at the end only, or every --eval-every steps (the loss's course).
    training["eval_frequency"] = args.eval_every or args.steps
    training["optimizer"]["learn_rate"]["total_steps"] = args.steps
    training["batcher"] = {
        "@batchers": "w2ner_bench.timed_batches.v1",
        "size": args.batch_size,
        "stats_path": str(stats_path),
        "grid_timers": bool(args.grid_timers),
        "profile_steps": args.profile_steps,
        "profile_path": str(Path(args.output).resolve() / "profile.txt"),
    }
    training["logger"]["progress_bar"] = False
    config["corpora"]["dev"]["limit"] = args.dev_limit
    mixed, dtype = PRECISIONS[args.precision]
    transformer = config["components"]["transformer"]["model"]
    transformer["name"] = str(Path(args.encoder).resolve())
    transformer["mixed_precision"] = mixed
    transformer["mixed_precision_dtype"] = dtype
    if args.last_layers is not None:
        transformer["last_layers"] = args.last_layers
    transformer["pack_spans"] = args.pack_spans == "auto"
    config["components"]["w2ner"]["model"]["mixed_precision"] = mixed
    if args.max_grid_padding != "config":  # spaCy's configs hold no inf: no limit is 1e9
        config["components"]["w2ner"]["model"]["max_grid_padding"] = min(float(args.max_grid_padding), 1e9)
    config["components"]["w2ner"]["model"]["mixed_precision_dtype"] = dtype
    path = Path(args.output) / "bench.cfg"
    path.parent.mkdir(parents=True, exist_ok=True)
    config.to_disk(path)
    return path


def train(args) -> None:
    """This release's training loop (``python -m spacy_w2ner train``) on the GPU for a fixed number
    of steps, each step timed; the log's loss at each evaluation."""
    from hooks import summarize

    output = Path(args.output).resolve()  # absolute: a baseline's run starts in its own directory
    # A bench run starts afresh: an earlier run's model (train would refuse it) and profile go.
    shutil.rmtree(output / "model", ignore_errors=True)
    (output / "profile.txt").unlink(missing_ok=True)
    stats_path = output / "step-stats.json"
    config_path = bench_config(args, stats_path)
    command = [
        sys.executable, "-m", "spacy_w2ner", "train", str(config_path),
        "--code", str(HERE / "hooks.py"),
        "--output", str(output / "model"),
        "--paths.train", str(Path(args.train).resolve()), "--paths.dev", str(Path(args.dev).resolve()),
        "--gpu-id", str(args.gpu_id),
        # No checkpoints (5 s each on the H100, at step 1 and at the end): device time is short.
        "--checkpoint-every", str(10**9),
    ]  # fmt: skip
    env, cwd = code_environment(args.code_dir)
    start = time.perf_counter()
    finished = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
    log = finished.stdout
    print(log)
    finished.check_returncode()
    wall = time.perf_counter() - start
    result = summarize(json.loads(stats_path.read_text()), args.warmup)
    result.update(
        bench="train",
        loop="python -m spacy_w2ner train",
        config=args.config,
        encoder=encoder_description(args.encoder),
        precision=args.precision,
        pack_spans=args.pack_spans,
        max_grid_padding=args.max_grid_padding,
        code=code_description(args.code_dir),
        grid_timers=bool(args.grid_timers),
        batch_size=args.batch_size,
        warmup_steps=args.warmup,
        losses_by_evaluation=logged_losses(log),
        wall_seconds_with_loading_and_evaluation=round(wall, 1),
        device=device_name(args.gpu_id),
        versions=versions(),
    )
    emit(result, args.results)


def code_environment(code_dir: str) -> Tuple[Dict[str, str], Optional[str]]:
    """The environment and directory of a training process: this one's, or, for ``code_dir`` (another
    commit's spacy_w2ner, bench/gpu/baseline.sh), that directory, first on the path too, so its
    package is imported before this tree's (``python -m`` puts the working directory first), checked."""
    env = dict(os.environ)
    if not code_dir:
        return env, None
    directory = Path(code_dir).resolve()
    if not (directory / "spacy_w2ner").is_dir():
        raise SystemExit(f"--code-dir {directory}: no spacy_w2ner package there (bench/gpu/baseline.sh REF makes one)")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(directory), env.get("PYTHONPATH")]))
    imported = subprocess.run([sys.executable, "-c", "import spacy_w2ner; print(spacy_w2ner.__file__)"], env=env,
                              cwd=directory, capture_output=True, text=True).stdout.strip()  # fmt: skip
    if not imported or not Path(imported).resolve().is_relative_to(directory):
        raise SystemExit(f"--code-dir {directory}: spacy_w2ner is imported from {imported or 'nowhere'}, not from there")
    return env, str(directory)


def code_description(code_dir: str) -> str:
    """Which spacy_w2ner a run trained with: this tree, or a baseline's commit (bench/gpu/baseline.sh)."""
    if not code_dir:
        return "this tree"
    commit = Path(code_dir) / "COMMIT"
    return f"baseline {commit.read_text().strip() if commit.exists() else code_dir}"


def logged_losses(log: str) -> List[Dict]:
    """The rows of spaCy's console logger: the step, each component's loss since the last row
    (in the header's order), the score."""
    header = next((line for line in log.splitlines() if line.lstrip().startswith("E ") and "LOSS" in line), "")
    n_losses = header.count("LOSS ")
    rows = []
    for line in log.splitlines():
        fields = line.split()
        if len(fields) > 2 + n_losses and fields[0].isdigit() and fields[1].isdigit():
            try:
                values = [float(v) for v in fields[2:]]
            except ValueError:
                continue
            rows.append({"step": int(fields[1]), "losses": values[:n_losses], "score": values[-1]})
    return rows


def encoder_description(path: str) -> str:
    config = json.loads((Path(path) / "config.json").read_text())
    return f"{Path(path).name}: {config['num_hidden_layers']} layers, width {config['hidden_size']}"


def device_name(gpu_id: int) -> str:
    if gpu_id < 0:
        return f"CPU ({os.cpu_count()} cores)"
    import torch

    return torch.cuda.get_device_name(gpu_id)


def grid_batches(args) -> None:
    """How many grid batches a training step of --batch-size sentences makes, and how many cells
    they pad, under each of --paddings (max_grid_padding: the CPU's 1.25, a GPU's inf): the
    batches of a shuffled epoch (Python's random with --seed, as spaCy shuffles), the config's
    max_grid_cells. Arithmetic only: the same on any machine."""
    import random

    from spacy.util import load_config
    from spacy.vocab import Vocab

    from spacy_w2ner.grid.segments import batch_by_cells, segment_docs

    model = load_config(CONFIGS / args.config)["components"]["w2ner"]["model"]
    docs = read_docs(args.data, Vocab())
    order = list(range(len(docs)))
    random.Random(args.seed).shuffle(order)
    steps = [order[i : i + args.batch_size] for i in range(0, len(order), args.batch_size)][: args.steps or None]
    result = {"bench": "grid-batches", "data": args.data, "config": args.config, "batch_size": args.batch_size,
              "steps": len(steps), "max_grid_cells": model["max_grid_cells"]}  # fmt: skip
    for padding in (float(value) for value in args.paddings.split()):
        counts, padded, real = [], 0, 0
        for step in steps:
            segments = segment_docs([docs[i] for i in step], model["max_window"], model["window_overlap"])
            batches = list(batch_by_cells(segments, model["max_grid_cells"], padding))
            counts.append(len(batches))
            padded += sum(len(batch) * max(s.length for s in batch) ** 2 for batch in batches)
            real += sum(s.length**2 for s in segments)
        result[f"max_grid_padding {padding}"] = {"grid_batches_per_step": round(sum(counts) / len(counts), 2), "most_in_a_step": max(counts),
                        "cells_padded_over_real": round(padded / real, 3)}  # fmt: skip
    emit(result, args.results)


def training_pipeline(config_name: str, encoder: str, train: str, edit: Callable[[Dict], None] = lambda config: None):
    """The project config ``config_name`` with ``encoder`` as its transformer (``edit`` changes the
    config further), built and initialized on ``train``'s first 200 sentences, seed 0: the
    pipeline, ``train``'s examples and the optimizer."""
    import spacy
    from spacy.training import Example

    spacy.util.fix_random_seed(0)
    config = spacy.util.load_config(CONFIGS / config_name)
    config["components"]["transformer"]["model"]["name"] = str(Path(encoder).resolve())
    edit(config)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    examples = [Example(blank_copy(doc, nlp.vocab), doc) for doc in read_docs(train, nlp.vocab)]
    return nlp, examples, nlp.initialize(lambda: examples[:200])


def step_ops(args) -> None:
    """Torch operators a training step dispatches, by max_grid_padding (each of --paddings), counted
    by torch's profiler over --steps steps of --batch-size CADEC sentences: on a GPU each is a
    kernel launch or more, and the host's time per operator is what bounds a GPU's step. The
    config's w2ner and grid network with --encoder (its layers only change the encoder's share)."""
    from torch.profiler import ProfilerActivity, profile

    use_device(args.gpu_id)
    result = {"bench": "step-ops", "config": args.config, "encoder": encoder_description(args.encoder),
              "batch_size": args.batch_size, "steps": args.steps, "device": device_name(args.gpu_id)}  # fmt: skip
    for padding in args.paddings.split():

        def edit(config, padding=float(padding)):
            config["components"]["w2ner"]["model"]["max_grid_padding"] = padding

        nlp, examples, optimizer = training_pipeline(args.config, args.encoder, args.data, edit)
        batches = [examples[i : i + args.batch_size] for i in range(0, (args.steps + 2) * args.batch_size, args.batch_size)]
        for batch in batches[:2]:  # warm-up
            nlp.update(batch, sgd=optimizer)
        grid_calls = []  # a forward hook alone: the grid timers' backward hooks add operators
        grid = nlp.get_pipe("w2ner").model.get_ref("grid_scorer").layers[0].shims[0]._model
        grid.register_forward_hook(lambda *_: grid_calls.append(1))
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for batch in batches[2:]:
                nlp.update(batch, sgd=optimizer)
        ops = [event for event in prof.key_averages() if event.key.startswith("aten::")]
        result[f"max_grid_padding {padding}"] = {
            "aten_ops_per_step": round(sum(event.count for event in ops) / args.steps, 1),
            "grid_batches_per_step": round(len(grid_calls) / args.steps, 2),
        }
    emit(result, args.results)


# ---------------------------------------------------------------- inference speed
# The infer bench keeps every setting's CUDA graphs side by side in one process (TF32 settings
# record their own): room for them all, where a pipeline's own limit is nn.cuda_graphs.MAX_GRAPHS.
BENCH_MAX_GRAPHS = 256


def infer(args) -> None:
    """Sentences/s of the whole pipeline and of the encoder alone on pre-tokenized docs, for each
    of ``--pass-padding``'s settings, taken in turn in each round (one process: a loan's slow
    process does not pass for a setting's cost); the best round of each. A setting ``cgN`` is
    pass padding N with the encoder's prediction passes replayed from CUDA graphs
    (``nn/cuda_graphs.py``), ``agN`` the same with the grid network's passes replayed too (all
    graphs); an ``o`` before a setting (``oag1.25``) overlaps w2ner's batches
    (``W2NER.overlap_batches``: a batch's scoring queued before the batch before it is decoded);
    a ``t`` before that (``tcginf``, ``toag1.25``) lets float32 matrix products use TF32
    (``torch.backends.cuda.matmul.allow_tf32``, for the whole process while that setting runs;
    the PyTorch of the paper's code did so by default on an RTX 3090). Each setting's entities
    are compared with the first setting's, its encoder vectors (the real word pieces of the first
    64 sentences) and its grids (every relation's probability on each cell of those sentences):
    the speed bench's model predicts no entity.

    After each round an ``infer-interim`` record gives every setting's whole-pipeline seconds so
    far: what is left should the step be cut off by its time limit.

    The timed runs carry no hooks: the grid network's share comes from one more run of each
    setting afterwards, with the grid timers (a synchronisation at each end of the grid network,
    and a hook on every module call: 6% of the encoder's host time, on a CPU), its passes
    replayed from graphs timed around each replay (``hooks.timed_replays``). ``--profile PREFIX``
    first runs the first setting and the fastest once more each under torch's profiler
    (``PREFIX-SETTING.txt``, and a summary in the setting's result: the device's busy time, kernel
    and graph launches, waits for the device, copies)."""
    import numpy
    import spacy
    import torch

    from hooks import STATS, install_grid_timers, peak_gpu_mb, profile_run, timed_replays
    from rules import parse_setting
    from spacy_w2ner import get_entities
    from spacy_w2ner.encoders.transformer import node_named
    from spacy_w2ner.model.predictions import grid_probabilities
    from spacy_w2ner.nn.cuda_graphs import GraphedGridNetwork

    device = use_device(args.gpu_id)
    nlp = spacy.load(args.model)
    if args.max_grid_padding != "config":  # the saved model's setting otherwise
        nlp.get_pipe("w2ner").model.attrs["max_grid_padding"] = float(args.max_grid_padding)
    encoder = node_named(nlp.get_pipe("transformer").model, "hf-pytorch")
    w2ner_model = nlp.get_pipe("w2ner").model
    grid_scorer = w2ner_model.get_ref("grid_scorer")
    settings = args.pass_padding.split()
    docs = [blank_copy(doc, nlp.vocab) for doc in read_docs(args.data, nlp.vocab)]
    words = sum(len(doc) for doc in docs)

    def use(setting: str) -> None:
        parts = parse_setting(setting)  # [t][o][cg|ag]N: rules.py owns the grammar
        encoder.attrs["max_pass_padding"] = None if parts["padding"] == "device" else float(parts["padding"])
        encoder.attrs["cuda_graphs"] = parts["kind"] in ("cg", "ag")
        grid_scorer.attrs["cuda_graphs"] = parts["kind"] == "ag"
        nlp.get_pipe("w2ner").overlap_batches = parts["overlap"]
        torch.backends.cuda.matmul.allow_tf32 = parts["tf32"]
        for shim in (*encoder.shims, *grid_scorer.layers[0].shims):  # made in a setting's first run
            if getattr(shim, "cuda_graphs", None) is not None:  # every setting's graphs side by side
                shim.cuda_graphs.max_graphs = BENCH_MAX_GRAPHS

    def grids() -> "numpy.ndarray":
        """Every relation's probability on every cell of the first 64 sentences, flattened."""
        first = list(nlp.get_pipe("transformer").pipe(blank_copy(d, nlp.vocab) for d in docs[:64]))
        return numpy.concatenate([probs.ravel() for _, probs in grid_probabilities(w2ner_model, first)])

    def encoder_vectors() -> "torch.Tensor":
        """The encoder's vectors of the real word pieces of the first 64 sentences, on the host."""
        batch = nlp.get_pipe("transformer").predict([blank_copy(d, nlp.vocab) for d in docs[:64]])
        vectors = batch.model_output.last_hidden_state
        vectors = vectors if isinstance(vectors, torch.Tensor) else torch.as_tensor(nlp.get_pipe("transformer").model.ops.to_numpy(vectors))
        real = torch.as_tensor(batch.wordpieces.attention_mask).to(vectors.device) > 0
        return vectors[real].float().cpu()

    def run(disable, keep=None) -> float:
        start = time.perf_counter()
        for doc in nlp.pipe((blank_copy(d, nlp.vocab) for d in docs), batch_size=args.batch_size, disable=disable):
            if keep is not None:
                keep.append([(e.label, e.tokens, round(e.score, 4)) for e in get_entities(doc)])
        if args.gpu_id >= 0:
            torch.cuda.synchronize()
        return time.perf_counter() - start

    entities, vectors, grid_probs = {}, {}, {}
    for setting in settings:  # warm-up: kernels, allocator, each setting's shapes (and graphs)
        use(setting)
        entities[setting] = []
        run([], entities[setting])
        vectors[setting] = encoder_vectors()
        grid_probs[setting] = grids()
    measured = {setting: {"full": [], "encoder_only": [], "peak": 0.0} for setting in settings}
    for round_number in range(1, args.rounds + 1):
        for setting in settings:
            use(setting)
            times = measured[setting]
            if args.gpu_id >= 0:
                torch.cuda.reset_peak_memory_stats()
            times["full"].append(run([]))
            times["encoder_only"].append(run(["w2ner"]))
            times["peak"] = max(times["peak"], peak_gpu_mb())
        interim = {"bench": "infer-interim", "batch_size": args.batch_size, "rounds_done": round_number, "sentences": len(docs)}
        interim["seconds"] = {setting: [round(seconds, 3) for seconds in times["full"]] for setting, times in measured.items()}
        emit(interim, args.results)  # what a step cut off by its time limit leaves
    if args.profile:  # the first setting and the fastest, one more run each, before any timer hook
        fastest = min(settings, key=lambda setting: min(measured[setting]["full"]))
        for setting in dict.fromkeys([settings[0], fastest]):
            use(setting)
            title = f"torch profiler, one nlp.pipe over {len(docs)} sentences, batch {args.batch_size}, setting {setting}"
            measured[setting]["profile"] = profile_run(lambda: run([]), f"{args.profile}-{setting}.txt", title)
    install_grid_timers()
    for setting in settings:  # the grid network's share, in a run of its own
        use(setting)
        calls = len(STATS["grid_forward_s"])
        with timed_replays(GraphedGridNetwork):
            seconds = run([])
        measured[setting]["grid_share"] = sum(STATS["grid_forward_s"][calls:]) / seconds
    first = entities[settings[0]]
    for setting, times in measured.items():
        full, encoder_only = times["full"], times["encoder_only"]
        best = min(range(args.rounds), key=lambda i: full[i])
        kind = parse_setting(setting)["kind"]
        graphs = getattr(encoder.shims[0], "cuda_graphs", None) if kind else None
        grid_graphs = getattr(grid_scorer.layers[0].shims[0], "cuda_graphs", None) if kind == "ag" else None
        result = {
            "bench": "infer",
            "model": args.model,
            "sentences": len(docs),
            "words": words,
            "batch_size": args.batch_size,
            "max_grid_padding": args.max_grid_padding,
            "max_pass_padding": setting,
            "seconds": round(full[best], 3),
            "sentences_per_s": round(len(docs) / full[best], 1),
            "encoder_only_sentences_per_s": round(len(docs) / min(encoder_only), 1),
            "rounds_sentences_per_s": [round(len(docs) / seconds, 1) for seconds in full],
            "w2ner_share": round(1 - min(encoder_only) / full[best], 3),
            "grid_network_share": round(times["grid_share"], 3),
            "entities": sum(len(found) for found in entities[setting]),
            "entities_equal_first_setting": entities[setting] == first,
            "encoder_max_abs_diff_from_first_setting": float((vectors[setting] - vectors[settings[0]]).abs().max()),
            "grid_max_abs_diff_from_first_setting": float(numpy.abs(grid_probs[setting] - grid_probs[settings[0]]).max()),
            "peak_gpu_mb": round(times["peak"], 1),
            "device": device,
        }
        if graphs is not None:
            result.update(cuda_graphs=len(graphs.graphs), cuda_graphs_failed=graphs.failed)
        if grid_graphs is not None:
            result.update(grid_cuda_graphs=len(grid_graphs.graphs), grid_cuda_graphs_failed=grid_graphs.failed)
        if "profile" in times:
            result["profile"] = times["profile"]
        emit(result, args.results)


# ---------------------------------------------------------------- long document
def long_document(data: str, vocab, n_tokens: int) -> Tuple[List[str], List[bool]]:
    """The words and sentence starts of one document: the data's sentences (over 3 words) repeated."""
    sentences = [[t.text for t in doc] for doc in read_docs(data, vocab) if len(doc) > 3]
    words, starts = [], []
    while len(words) < n_tokens:
        for sentence in sentences:
            starts.extend([True] + [False] * (len(sentence) - 1))
            words.extend(sentence)
    return words[:n_tokens], starts[:n_tokens]


def long_doc(args) -> None:
    """One document of --tokens tokens (CADEC-like sentences): time and peak GPU memory (the
    windows and the grid-cell bound keep it flat). With sentence boundaries twice: the first
    document meets most grid shapes for the first time, the second shows the steady state;
    then without (the pipeline's sentencizer off): 256-token windows."""
    import spacy
    import torch
    from spacy.tokens import Doc

    from hooks import peak_gpu_mb
    from spacy_w2ner.common import sentence_setters

    device = use_device(args.gpu_id)
    nlp = spacy.load(args.model)
    words, starts = long_document(args.data, nlp.vocab, args.tokens)
    nlp(Doc(nlp.vocab, words=words[:200], sent_starts=starts[:200]))  # warm-up
    for run, with_sentences in (("first", True), ("again", True), ("first", False)):
        if args.gpu_id >= 0:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        doc = Doc(nlp.vocab, words=words, sent_starts=starts if with_sentences else None)
        start = time.perf_counter()
        with nlp.select_pipes(disable=[] if with_sentences else sentence_setters(nlp)):
            doc = nlp(doc)
        if args.gpu_id >= 0:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        key = nlp.get_pipe("w2ner").spans_key
        emit(
            {
                "bench": "long-doc",
                "tokens": len(doc),
                "sentence_boundaries": with_sentences,
                "run": run,
                "seconds": round(seconds, 2),
                "tokens_per_s": round(len(doc) / seconds, 1),
                "entities": len({span.id_ for span in doc.spans[key]}),
                "peak_gpu_mb": round(peak_gpu_mb(), 1),
                "device": device,
            },
            args.results,
        )


# ---------------------------------------------------------------- GPU against CPU
def predict_entities(args) -> None:
    """(Child process) the entities of every doc of --data, as JSON lines, on one device."""
    import spacy

    from spacy_w2ner import get_entities

    use_device(args.gpu_id)
    nlp = spacy.load(args.model)
    key = nlp.get_pipe("w2ner").spans_key
    docs = [blank_copy(doc, nlp.vocab) for doc in read_docs(args.data, nlp.vocab)]
    with open(args.output, "w", encoding="utf8") as file:
        for doc in nlp.pipe(docs, batch_size=args.batch_size):
            entities = sorted(
                [entity.label, list(entity.tokens), float(entity.score)] for entity in get_entities(doc, key)
            )
            file.write(json.dumps({"words": [t.text for t in doc], "entities": entities}) + "\n")


def compare(args) -> None:
    """The same saved pipeline on --gpu-id and on the CPU: entities equal per sentence?"""
    outputs = {}
    for gpu_id in (args.gpu_id, -1):
        outputs[gpu_id] = Path(args.workdir) / f"entities-gpu{gpu_id}.jsonl"
        command = [
            sys.executable, str(Path(__file__).resolve()), "predict-entities", args.model, args.data,
            "--gpu-id", str(gpu_id), "--output", str(outputs[gpu_id]), "--batch-size", str(args.batch_size),
        ]  # fmt: skip
        subprocess.run(command, check=True)
    emit(compare_outputs(outputs[args.gpu_id], outputs[-1], args), args.results)


def compare_outputs(device_path: Path, cpu_path: Path, args) -> Dict:
    device_rows = [json.loads(line) for line in open(device_path, encoding="utf8")]
    cpu_rows = [json.loads(line) for line in open(cpu_path, encoding="utf8")]
    assert len(device_rows) == len(cpu_rows)
    differing, max_score_diff = [], 0.0
    for index, (a, b) in enumerate(zip(device_rows, cpu_rows)):
        if [e[:2] for e in a["entities"]] != [e[:2] for e in b["entities"]]:
            differing.append(
                {
                    "doc": index,
                    "text": " ".join(a["words"]),
                    "device_only": [e for e in a["entities"] if e[:2] not in [f[:2] for f in b["entities"]]],
                    "cpu_only": [e for e in b["entities"] if e[:2] not in [f[:2] for f in a["entities"]]],
                }
            )
        else:
            for e, f in zip(a["entities"], b["entities"]):
                max_score_diff = max(max_score_diff, abs(e[2] - f[2]))
    return {
        "bench": "compare",
        "model": args.model,
        "device": device_name(args.gpu_id) if args.gpu_id >= 0 else "CPU (twice)",
        "sentences": len(device_rows),
        "entities_equal_fraction": round(1 - len(differing) / max(1, len(device_rows)), 4),
        "differing_sentences": len(differing),
        "max_score_diff_where_equal": round(max_score_diff, 6),
        "differences": differing[:20],
    }


# ---------------------------------------------------------------- command line
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="", help="append each result as a JSON line here")
    commands = parser.add_subparsers(dest="command", required=True)

    p = commands.add_parser("make-encoder")
    p.add_argument("directory")
    p.add_argument("--like", required=True, help="a Hugging Face model directory: its config and tokenizer")
    p.add_argument("--layers", type=int, default=0, help="other than --like's")
    p.add_argument("--width", type=int, default=0, help="other than --like's")
    p.set_defaults(run=make_encoder)

    p = commands.add_parser("train")
    p.add_argument("output")
    p.add_argument("--encoder", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--dev", required=True)
    p.add_argument("--config", default="w2ner_mpnet_gpu.cfg")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=12)
    p.add_argument("--last-layers", type=int, default=None)
    p.add_argument("--precision", choices=sorted(PRECISIONS), default="fp32")
    p.add_argument("--dev-limit", type=int, default=200, help="dev sentences evaluated (0: all)")
    p.add_argument("--grid-timers", type=int, default=0, help="1: time the grid network (adds 4 syncs a step)")
    p.add_argument("--pack-spans", choices=["auto", "false"], default="auto", help="the encoder's pack_spans: auto (probed) or false (padded)")
    p.add_argument("--eval-every", type=int, default=0, help="evaluate (and log the loss) every N steps (0: at the end only)")
    p.add_argument("--max-grid-padding", default="config", help="w2ner's max_grid_padding (a number, inf; config: the config's)")
    p.add_argument("--profile-steps", default="", help="FIRST:LAST: torch's profiler over those steps, inside the warm-up (OUTPUT/profile.txt)")
    p.add_argument("--code-dir", default="", help="train with the spacy_w2ner in this directory (bench/gpu/baseline.sh) instead of this tree's")
    p.add_argument("--gpu-id", type=int, default=0)
    p.set_defaults(run=train)

    p = commands.add_parser("grid-batches")
    p.add_argument("data")
    p.add_argument("--config", default="w2ner_mpnet_gpu.cfg")
    p.add_argument("--batch-size", type=int, default=12)
    p.add_argument("--steps", type=int, default=0, help="the first N steps (0: the whole epoch)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--paddings", default="1.25 2 4 inf", help="max_grid_padding values, space-separated")
    p.set_defaults(run=grid_batches)

    p = commands.add_parser("step-ops")
    p.add_argument("data")
    p.add_argument("--encoder", required=True)
    p.add_argument("--config", default="w2ner_mpnet_gpu.cfg")
    p.add_argument("--batch-size", type=int, default=12)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--paddings", default="1.25 1e9", help="max_grid_padding values, space-separated")
    p.add_argument("--gpu-id", type=int, default=-1)
    p.set_defaults(run=step_ops)

    for name, function in (("infer", infer), ("long-doc", long_doc), ("compare", compare), ("predict-entities", predict_entities)):
        p = commands.add_parser(name)
        p.add_argument("model")
        p.add_argument("data")
        p.add_argument("--gpu-id", type=int, default=0)
        p.add_argument("--batch-size", type=int, default=64)
        p.add_argument("--rounds", type=int, default=3)
        p.add_argument("--tokens", type=int, default=50000)
        p.add_argument("--workdir", default=".")
        p.add_argument("--output", default="")
        p.add_argument("--max-grid-padding", default="config", help="infer: w2ner's max_grid_padding (a number, inf; config: the model's)")
        p.add_argument("--profile", default="", help="infer: PREFIX; the first setting and the fastest run once more each under torch's profiler, into PREFIX-SETTING.txt")
        p.add_argument("--pass-padding", default="device", help="infer: the encoder's max_pass_padding, one or more (space-separated, each a number, inf, default: 1.25 (the default before 2026-11-28), or device: the pipeline's own default, 1.25 on a CPU and none on a GPU; cgN: N with the encoder's CUDA graphs; agN: with the grid network's too; oX: X with w2ner's batches overlapped; tX: X with TF32 matrix products), timed in turn")
        p.set_defaults(run=function)

    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
