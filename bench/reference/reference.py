"""The reference W2NER code (ljynlp/W2NER) beside ours: same encoder, data, batch size and GPU.

    python bench/reference/reference.py prepare GIT_DIR OUT_DIR --data CADEC_JSON_DIR
    python bench/reference/reference.py speed OUT_DIR --encoder DIR --batch-size 12 [--steps 150]
    python bench/reference/reference.py train OUT_DIR --encoder DIR --seed 1 --run-dir RUN

``prepare`` exports the fetched repository (``fetch`` github:ljynlp/W2NER; nothing of it is
committed here) at the pinned commit, puts the corpus where it reads it (``data/cadec``) and
makes the one change an MPNet encoder needs: its padding id is 1 and id 0 is ``<s>``, but the
code pads word pieces with 0 and masks attention with ``ids != 0`` (so it would mask the start
token and attend to padding). Both use the tokenizer's pad id instead (``W2NER_PAD_ID``).

What the environment needs, done here without touching their code: numpy 2 removed the
``np.int``/``np.bool`` aliases their data loader uses (restored as ``int``/``bool``); the
``gensim`` import is unused (a stub module); ``transformers.AdamW``, which they call, is gone
from transformers 4.53 and its replacement is torch's ``AdamW`` with transformers' old default
``eps=1e-6`` (torch's runs a multi-tensor step on CUDA, faster than the removed per-tensor one,
so this favours the reference). Their ``main.py`` leaves seeding commented out; ``train`` seeds
Python, NumPy and torch with ``--seed`` so a run can be repeated.

``speed`` drives their ``Trainer`` on their data loader: ``--warmup`` training batches, then
``--steps`` timed ones (sentences/s, CUDA synchronised), then their evaluation loop (forward,
argmax, copy to the host, their decoder) over the test set at each ``--infer-batch-sizes``.
The scikit-learn label metrics their loops compute at the end are timed apart and left out.
Prints one JSON object per measurement.
"""
import argparse
import functools
import json
import os
import random
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

PINNED_COMMIT = "a34ff84"  # ljynlp/W2NER main, as fetched (README update, 2022)
SOURCES = ["main.py", "config.py", "data_loader.py", "utils.py", "model.py", "config/cadec.json"]
PAD_ID_ENV = "W2NER_PAD_ID"
# (file, text, replacement): each must occur exactly once.
MPNET_CHANGES = [
    (
        "data_loader.py",
        "bert_inputs = pad_sequence(bert_inputs, True)",
        f"bert_inputs = pad_sequence(bert_inputs, True, padding_value=int(os.environ.get('{PAD_ID_ENV}', '0')))",
    ),
    (
        "model.py",
        "attention_mask=bert_inputs.ne(0).float()",
        f"attention_mask=bert_inputs.ne(int(__import__('os').environ.get('{PAD_ID_ENV}', '0'))).float()",
    ),
]


# ---------------------------------------------------------------- prepare
def prepare(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in SOURCES:
        text = subprocess.run(
            ["git", "--git-dir", args.git_dir, "show", f"{PINNED_COMMIT}:{name}"],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text, encoding="utf8")
    for name, text, replacement in MPNET_CHANGES:
        source = (out / name).read_text(encoding="utf8")
        if source.count(text) != 1:
            raise SystemExit(f"{name}: expected one '{text}', found {source.count(text)}")
        (out / name).write_text(source.replace(text, replacement), encoding="utf8")
    (out / "gensim").mkdir(exist_ok=True)
    (out / "gensim" / "__init__.py").write_text('"""Stub: the reference imports gensim but does not use it."""\n')
    (out / "gensim" / "models.py").write_text("KeyedVectors = None\n")
    data = out / "data" / "cadec"
    data.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        shutil.copy(Path(args.data) / f"{split}.json", data / f"{split}.json")
    print(json.dumps({"prepared": str(out), "commit": PINNED_COMMIT, "changes": [c[:2] for c in MPNET_CHANGES]}))


# ---------------------------------------------------------------- environment
def enter_reference(ref_dir: Path, run_dir: Path, encoder: str, cpu: bool = False) -> None:
    """Import path, working directory (their code reads ./data, writes ./log) and the shims.

    ``cpu`` (a check of this harness on a machine without CUDA, not a measurement): their
    ``.cuda()`` calls become no-ops.
    """
    import numpy as np
    import torch
    import transformers
    from transformers import AutoTokenizer

    if cpu:
        torch.Tensor.cuda = lambda self, *a, **k: self
        torch.nn.Module.cuda = lambda self, *a, **k: self
        torch.cuda.synchronize = lambda *a, **k: None
        torch.cuda.reset_peak_memory_stats = lambda *a, **k: None
        torch.cuda.max_memory_allocated = lambda *a, **k: 0
        torch.cuda.get_device_name = lambda *a, **k: "CPU (harness check)"

    run_dir.mkdir(parents=True, exist_ok=True)
    for name in ("data", "config"):
        link = run_dir / name
        if not link.exists():
            link.symlink_to((ref_dir / name).resolve())
    (run_dir / "log").mkdir(exist_ok=True)
    os.chdir(run_dir)
    sys.path.insert(0, str(ref_dir.resolve()))
    np.int = int  # removed in numpy 1.24; their loader uses it as a dtype
    np.bool = bool
    transformers.AdamW = functools.partial(torch.optim.AdamW, eps=1e-6)
    os.environ[PAD_ID_ENV] = str(AutoTokenizer.from_pretrained(encoder).pad_token_id)


def reference_config(ref_dir: Path, encoder: str, **overrides):
    """Their Config from config/cadec.json, with the encoder and any overrides (as their CLI sets them)."""
    import config as ref_config

    fields = {"config": str(ref_dir / "config" / "cadec.json"), "bert_name": encoder, "bert_hid_size": 768}
    fields.update(overrides)
    return ref_config.Config(types.SimpleNamespace(**fields))


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


# ---------------------------------------------------------------- speed
class Batches:
    """The first ``n`` batches of a data loader, as an iterable their loops can take."""

    def __init__(self, loader, n: int) -> None:
        self.loader, self.n = loader, n

    def __iter__(self):
        for k, batch in enumerate(self.loader):
            if k >= self.n:
                return
            yield batch


def speed(args) -> None:
    ref_dir = Path(args.ref).resolve()
    enter_reference(ref_dir, Path(args.run_dir or ref_dir / "run-speed"), args.encoder, args.cpu)
    import torch
    from torch.utils.data import DataLoader

    import data_loader
    import main as ref_main
    import utils

    seed_everything(args.seed)
    config = reference_config(ref_dir, args.encoder, batch_size=args.batch_size)
    logger = utils.get_logger(config.dataset)
    config.logger = logger
    datasets, _ = data_loader.load_data_bert(config)
    metric_seconds = [0.0]
    timed = _timed(ref_main.precision_recall_fscore_support, metric_seconds)
    ref_main.precision_recall_fscore_support = timed
    ref_main.f1_score = _timed(ref_main.f1_score, metric_seconds)

    def loader(dataset, batch_size, shuffle):
        return DataLoader(dataset, batch_size=batch_size, collate_fn=data_loader.collate_fn,
                          shuffle=shuffle, num_workers=4, drop_last=shuffle)  # fmt: skip

    train_loader = loader(datasets[0], args.batch_size, True)
    ref_main.config, ref_main.logger = config, logger
    ref_main.updates_total = len(datasets[0]) // config.batch_size * config.epochs
    model = ref_main.Model(config).cuda()
    ref_main.model = model
    trainer = ref_main.Trainer(model)
    torch.cuda.reset_peak_memory_stats()
    trainer.train(0, Batches(train_loader, args.warmup))
    torch.cuda.synchronize()
    metric_seconds[0] = 0.0
    start = time.perf_counter()
    trainer.train(1, Batches(train_loader, args.steps))
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start - metric_seconds[0]
    emit({
        "bench": "reference-train", "batch_size": args.batch_size, "steps": args.steps,
        "sentences_per_s": round(args.steps * args.batch_size / seconds, 1),
        "seconds": round(seconds, 2), "metric_seconds_left_out": round(metric_seconds[0], 3),
        "peak_gpu_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1), **_context(args),
    }, args.results)  # fmt: skip
    test = datasets[2]
    for batch_size in args.infer_batch_sizes:
        test_loader = loader(test, batch_size, False)
        trainer.eval(0, test_loader, is_test=True)  # warm-up
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        best = None
        for _ in range(args.rounds):
            metric_seconds[0] = 0.0
            start = time.perf_counter()
            f1 = trainer.eval(0, test_loader, is_test=True)
            torch.cuda.synchronize()
            seconds = time.perf_counter() - start - metric_seconds[0]
            best = seconds if best is None else min(best, seconds)
        emit({
            "bench": "reference-infer", "batch_size": batch_size, "sentences": len(test),
            "sentences_per_s": round(len(test) / best, 1), "seconds": round(best, 3),
            "test_f_after_training_steps": round(float(f1), 4),
            "peak_gpu_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1), **_context(args),
        }, args.results)  # fmt: skip


def _timed(function, total):
    @functools.wraps(function)
    def wrapper(*a, **k):
        start = time.perf_counter()
        try:
            return function(*a, **k)
        finally:
            total[0] += time.perf_counter() - start

    return wrapper


def _context(args) -> dict:
    import torch

    return {
        "encoder": args.encoder, "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "transformers": __import__("transformers").__version__, "commit": PINNED_COMMIT,
    }  # fmt: skip


# ---------------------------------------------------------------- train
def train(args) -> None:
    """Their main.py as published (config/cadec.json, the encoder named), seeded; best dev/test F."""
    import runpy

    ref_dir = Path(args.ref).resolve()
    run_dir = Path(args.run_dir)
    enter_reference(ref_dir, run_dir, args.encoder, args.cpu)
    seed_everything(args.seed)
    sys.argv = [
        "main.py", "--config", str(ref_dir / "config" / "cadec.json"), "--bert_name", args.encoder,
        "--save_path", str(run_dir / "model.pt"), "--predict_path", str(run_dir / "output.json"),
    ] + (["--epochs", str(args.epochs)] if args.epochs else [])  # fmt: skip
    start = time.perf_counter()
    namespace = runpy.run_path(str(ref_dir / "main.py"), run_name="__main__")
    result = {
        "bench": "reference-cadec", "seed": args.seed,
        "dev_f": round(100 * float(namespace["best_f1"]), 2),
        "test_f": round(100 * float(namespace["best_test_f1"]), 2),
        "train_seconds": round(time.perf_counter() - start, 1), **_context(args),
    }  # fmt: skip
    emit(result, args.results)


def emit(result: dict, results_path: str) -> None:
    print(json.dumps(result), flush=True)
    if results_path:
        with open(results_path, "a", encoding="utf8") as file:
            file.write(json.dumps(result) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("prepare")
    p.add_argument("git_dir")
    p.add_argument("out")
    p.add_argument("--data", required=True)
    p.set_defaults(run=prepare)
    for name, function in (("speed", speed), ("train", train)):
        p = commands.add_parser(name)
        p.add_argument("ref")
        p.add_argument("--encoder", required=True)
        p.add_argument("--run-dir", default="")
        p.add_argument("--results", default="")
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--batch-size", type=int, default=12)
        p.add_argument("--steps", type=int, default=150)
        p.add_argument("--warmup", type=int, default=20)
        p.add_argument("--rounds", type=int, default=2)
        p.add_argument("--infer-batch-sizes", type=int, nargs="+", default=[32, 128])
        p.add_argument("--epochs", type=int, default=0, help="train: override config/cadec.json's 10 (harness checks)")
        p.add_argument("--cpu", action="store_true", help="check the harness without CUDA (no figures)")
        p.set_defaults(run=function)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
