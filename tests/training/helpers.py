"""Small training runs for the resume tests: the CNN config shrunk to seconds, on the sample corpus."""
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import numpy
import spacy

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "project" / "configs" / "w2ner_cnn_cpu.cfg"

# 64 training sentences in batches of 16: 4 batches an epoch, so 25 steps cross 6 epochs (and
# their shuffles); evaluated every 8 steps on 16 dev sentences.
SMALL = [
    "--components.w2ner.model.lstm_size", "32", "--components.w2ner.model.conv_size", "16",
    "--components.w2ner.model.biaffine_size", "32", "--components.w2ner.model.ffnn_size", "32",
    "--components.tok2vec.model.embed.width", "32", "--components.tok2vec.model.encode.width", "32",
    "--components.tok2vec.model.encode.depth", "1", "--corpora.train.limit", "64", "--corpora.dev.limit", "16",
    "--training.max_steps", "24", "--training.eval_frequency", "8", "--training.logger.progress_bar", "false",
]  # fmt: skip


def sample_corpus(directory: Path) -> Dict[str, Path]:
    """The sample corpus's train and dev splits converted into ``directory`` as .spacy files."""
    from tests.conftest import cli

    for split in ("train", "dev"):
        cli("convert", "w2ner-json", f"corpora/sample/{split}.json", directory)
    return {"train": directory / "train.spacy", "dev": directory / "dev.spacy"}


def train_command(output: Path, corpus: Dict[str, Path], *extra: str, spacy_train: bool = False) -> List[str]:
    module = ["spacy", "train"] if spacy_train else ["spacy_w2ner", "train"]
    return [
        sys.executable, "-m", *module, str(CONFIG), "--output", str(output),
        "--paths.train", str(corpus["train"]), "--paths.dev", str(corpus["dev"]), *SMALL, *extra,
    ]  # fmt: skip


def environment() -> Dict[str, str]:
    """One thread, as in every run compared (the same arithmetic, whatever the machine)."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


def run(command: List[str], log: Path) -> int:
    with log.open("ab") as file:
        return subprocess.run(command, stdout=file, stderr=subprocess.STDOUT, env=environment()).returncode


def run_and_kill(command: List[str], log: Path, delay: float) -> Optional[int]:
    """Start the command, SIGKILL it ``delay`` seconds after its run directory is made (None),
    or return its exit code if it ended first."""
    output = Path(command[command.index("--output") + 1])
    with log.open("ab") as file:
        process = subprocess.Popen(command, stdout=file, stderr=subprocess.STDOUT, env=environment())
        while process.poll() is None and not (output / "run.json").exists():
            time.sleep(0.05)
        try:
            return process.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            return None


def weights(path: Path) -> Dict[str, numpy.ndarray]:
    """Every parameter of a saved pipeline (Thinc's and its torch modules'), by a stable name."""
    nlp = spacy.load(path)
    found = {}
    for name, pipe in nlp.components:
        model = getattr(pipe, "model", None)
        if not hasattr(model, "walk"):
            continue
        for index, node in enumerate(model.walk()):
            for param in node.param_names:
                if node.has_param(param):
                    found[f"{name}/{index}/{param}"] = node.ops.to_numpy(node.get_param(param)).copy()
            for shim_index, shim in enumerate(node.shims):
                for key, tensor in shim._model.state_dict().items():
                    found[f"{name}/{index}/shim{shim_index}/{key}"] = tensor.detach().cpu().numpy().copy()
    return found


def differing(a: Dict[str, numpy.ndarray], b: Dict[str, numpy.ndarray]) -> List[str]:
    """The parameters whose bytes differ (or that only one side has)."""
    return sorted(key for key in set(a) | set(b) if key not in a or key not in b or a[key].tobytes() != b[key].tobytes())


_HOLD_AND_WAIT = """
import sys
from spacy_w2ner.training.lock import DirectoryLock

lock = DirectoryLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def held_by_another_process(directory: Path) -> Iterator[int]:
    """``directory`` held (``training.lock``) by another process, whose pid is given, until it is
    killed with SIGKILL on leaving (no cleanup of its own: the lock must go with the process)."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_AND_WAIT, str(directory)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=60)
