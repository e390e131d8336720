"""``train --ray-workers N``: the same training loop in the workers of Ray Train's
``TorchTrainer`` (the ``[ray]`` extra), which sets up their process group as torchrun does.

Every worker runs ``training.train`` as a torchrun process would (``distributed.py``): the first
writes the run's output, model-best, model-last and checkpoints to ``--output``, which is
therefore a path every worker reaches (a shared file system on a cluster of several machines:
a relative path is refused there), and which the workers check they all see. Ray Train's own
checkpoints are not used: the run's are, so ``--resume`` goes on after the Ray job was killed
as after any kill. Ctrl+C or SIGTERM here asks the workers to stop after their current step,
with a checkpoint (the run's STOP file, which every worker's first process polls); a second
Ctrl+C stops at once.
"""
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

from ..extras import connect_ray, require_ray_train
from .checkpoints import checkpoints
from .distributed import check_world_size
from .loop import Outcome
from .run import RAY_STORAGE, RunDirectory, RunError, check_corpora_exist, corpus_fingerprints, prepare_training
from .stop import StopRequests


@dataclass
class RayWorkers:
    """Where and on what the workers run."""

    workers: int
    address: Optional[str] = None  # a running cluster ("auto", "ray://host:10001"); None: a local Ray
    gpus_per_worker: float = 0.0
    cpus_per_worker: float = 1.0


def train_on_ray(
    config_path: Path, output: Path, workers: RayWorkers, *, overrides: Dict[str, object] = {}, code: Optional[Path] = None,
    resume: bool = False, force_resume: bool = False, checkpoint_every: int = 0, keep: int = 2,
) -> Outcome:  # fmt: skip
    """Train in ``workers.workers`` Ray Train workers (see the module docstring); the exceptions
    the first failing worker raised (RunError, RunFinished, ...) are raised here."""
    ray = require_ray_train()
    if workers.workers < 1:
        raise RunError(f"--ray-workers must be at least 1, got {workers.workers}")
    _check_before_starting(Path(config_path), overrides, RunDirectory(Path(output).absolute()), workers.workers, resume, force_resume)
    connect_ray(workers.address, log_to_driver=True)
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    if len(nodes) > 1 and not Path(output).is_absolute():
        raise RunError(
            f"--output {output} is a relative path and the Ray cluster has {len(nodes)} machines: give an absolute "
            "path on a file system every machine reaches"
        )
    run = RunDirectory(Path(output).absolute())
    payload = {
        "config": str(Path(config_path).absolute()), "output": str(run.path), "overrides": overrides,
        "code": str(Path(code).absolute()) if code else None, "cwd": os.getcwd(), "use_gpu": workers.gpus_per_worker > 0,
        "resume": resume, "force_resume": force_resume, "checkpoint_every": checkpoint_every, "keep": keep,
    }  # fmt: skip
    trainer = _trainer(payload, workers, run)
    with StopRequests(sys.stderr, on_request=run.request_stop, stopping="the workers stop after this step") as stop:
        error = _fit_in_thread(trainer, stop, run)
    if error is not None:
        raise _worker_error(error)
    record = run.record or {}
    if record.get("finished"):
        return Outcome(record.get("steps") or 0, True)
    found = checkpoints(run.path)
    return Outcome(found[0].step if found else 0, False, stop.exit_signal)


def _check_before_starting(config_path: Path, overrides: dict, run: RunDirectory, world_size: int, resume: bool, force_resume: bool) -> None:
    """What the first worker checks before it trains (the config; the output directory: another
    run's, a finished run, changed settings; the checkpoint's world size), checked here first:
    an error in one line, without starting Ray or its workers' tracebacks."""
    from spacy import util
    from spacy.cli._util import show_validation_error

    with show_validation_error(config_path):
        config = util.load_config(config_path, overrides=overrides, interpolate=False)
    check_corpora_exist(config)
    run.hold()  # a run still training there is refused here; the first worker holds it while it trains
    run.release()
    checkpoint = prepare_training(run, config, corpus_fingerprints(config), resume or force_resume, force_resume, lambda line: None)
    check_world_size(checkpoint, world_size, force_resume, lambda line: None)


def _trainer(payload: dict, workers: RayWorkers, run: RunDirectory):
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    resources = {"CPU": workers.cpus_per_worker}
    if workers.gpus_per_worker:
        resources["GPU"] = workers.gpus_per_worker
    return TorchTrainer(
        _worker,
        train_loop_config=payload,
        scaling_config=ScalingConfig(num_workers=workers.workers, use_gpu=workers.gpus_per_worker > 0, resources_per_worker=resources),
        run_config=RunConfig(name="train", storage_path=str(run.path / RAY_STORAGE), failure_config=FailureConfig(max_failures=0)),
    )


def _worker(payload: dict) -> None:
    """One Ray Train worker: ``training.train`` as a torchrun process would run it."""
    import socket

    import ray.train.torch
    from spacy.cli._util import import_code

    from . import train

    if not Path(payload["cwd"]).is_dir():
        raise RunError(
            f"the worker on {socket.gethostname()} cannot reach the working directory {payload['cwd']}: start the "
            "run from a directory every machine reaches, with absolute paths (or ones below it) in the config"
        )
    os.chdir(payload["cwd"])  # the config's relative paths are the driver's
    import_code(Path(payload["code"]) if payload["code"] else None)
    gpu = ray.train.torch.get_device().index if payload["use_gpu"] else -1
    train(
        Path(payload["config"]), Path(payload["output"]), overrides=payload["overrides"], use_gpu=gpu,
        resume=payload["resume"], force_resume=payload["force_resume"], checkpoint_every=payload["checkpoint_every"],
        keep=payload["keep"],
    )  # fmt: skip


def _fit_in_thread(trainer, stop: StopRequests, run: RunDirectory) -> Optional[BaseException]:
    """``trainer.fit()`` in a thread, so that this (main) thread keeps its signal handlers
    (Ray Train's own, set in the main thread, would abort the workers at the first Ctrl+C). A
    stop request is made again until the run ends (a worker starting removes the one before)."""
    outcome: Dict[str, BaseException] = {}

    def fit() -> None:
        try:
            trainer.fit()
        except BaseException as err:  # handed to the main thread
            outcome["error"] = err

    thread = threading.Thread(target=fit, name="ray-train-fit", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.2)
        if stop.signal_number is not None and not run.stop_file.exists():
            run.request_stop()
    return outcome.get("error")


def _worker_error(error: BaseException) -> BaseException:
    """The exception a worker raised, from Ray Train's report of the failure (the first one)."""
    failures = getattr(error, "worker_failures", None) or {}
    for rank in sorted(failures):
        cause = failures[rank]
        while getattr(cause, "cause", None) is not None and cause is not cause.cause:
            cause = cause.cause
        return cause if isinstance(cause, BaseException) else error
    return error
