"""The training loop of ``spacy train``, made of spaCy's own functions, with what they lack for a
run that survives interruption: checkpoints and an exact resume.

spaCy's ``train`` is a short loop around ``train_while_improving`` and ``create_train_batches``
that saves model-best and model-last at each evaluation. ``train_resumable`` is that loop over
the same functions, the same logger and the same ``before_to_disk`` callback, plus a checkpoint
at every evaluation (or every ``checkpoint_every`` steps) and when SIGINT or SIGTERM asks the
run to stop. Resumed from a checkpoint, it loads the weights, replays the steps before it
without training (``replay.py``, ``stream.py``: the same batches, the same evaluations, the
schedules advanced), then gives the optimizer its saved state and the random generators theirs:
on a CPU the run ends with the same weights, bit for bit, as one that was never stopped. In a
data-parallel run (``distributed.py``) every process runs this loop; the first alone evaluates,
logs, saves and writes the checkpoints.
"""
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Dict, List, Optional

import torch
from spacy.schemas import ConfigSchemaTraining
from spacy.training.loop import (
    DIR_MODEL_LAST,
    create_before_to_disk_callback,
    create_evaluation_callback,
    create_train_batches,
    train_while_improving,
    update_meta,
)
from spacy.util import registry, resolve_dot_names
from thinc.api import fix_random_seed, set_gpu_allocator
from wasabi import Printer, color

from .checkpoints import CONFIG, MODEL, TRAINER, Checkpoint, random_states_file, write_json
from .distributed import Cluster, DataParallelLanguage, DistributedError, check_annotating_components, check_same_python_random
from .randomness import capture_random_states, restore_random_states, seed_process_generators
from .replay import Replay
from .run import RunDirectory
from .stop import StopRequests
from .state import load_optimizer, save_optimizer
from .stream import Batches, DataPosition


@dataclass
class Outcome:
    """How a call ended: ``finished``, or stopped by ``signal_number`` after ``steps`` steps."""

    steps: int
    finished: bool
    signal_number: Optional[int] = None


@dataclass
class TrainerState:
    """What ``train_while_improving``'s locals and the run's totals were at a checkpoint."""

    steps: int = 0
    position: DataPosition = field(default_factory=DataPosition)
    evaluations: List[list] = field(default_factory=list)  # [score, step, other scores]
    losses: Dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    @classmethod
    def read(cls, checkpoint: Checkpoint) -> "TrainerState":
        data = checkpoint.read_json(TRAINER)
        return cls(
            data["steps"], DataPosition.from_dict(data["position"]), data["evaluations"],
            data["losses"], data["seconds"],
        )  # fmt: skip

    def as_dict(self, info: dict, world_size: int) -> dict:
        best = best_evaluation(self.evaluations)
        return {
            "steps": self.steps,
            "epoch": info["epoch"],
            "position": self.position.as_dict(),
            "evaluations": self.evaluations,
            "best": None if best is None else {"score": best[0], "step": best[1], "steps_since": info["step"] - best[1]},
            "losses": self.losses,
            "words": info["words"],
            "seconds": round(self.seconds, 3),
            "threads": torch.get_num_threads(),
            "world_size": world_size,
        }


def train_resumable(
    nlp, run: RunDirectory, checkpoint: Optional[Checkpoint], *, use_gpu: int = -1, checkpoint_every: int = 0,
    keep: int = 2, force_resume: bool = False, stdout: IO = sys.stdout, stderr: IO = sys.stderr,
    cluster: Optional[Cluster] = None,
) -> Outcome:  # fmt: skip
    """Train ``nlp`` (from ``init_nlp``) as ``spacy train`` does, into ``run``'s directory, from
    ``checkpoint`` when given, as process ``cluster.rank`` of a data-parallel run when given;
    see the module docstring."""
    session = _Session(nlp, run, checkpoint, use_gpu, stdout, stderr, cluster or Cluster())
    session.resume_from(checkpoint, force_resume)
    with StopRequests(stderr, run.stop_file if session.cluster.is_main else None) as stop:
        steps = session.steps(lambda: stop.requested)
        try:
            for batch, info, is_best in steps:
                session.last_info = info
                if session.replaying(info):
                    continue
                session.after_step(info, is_best)
                stopping = session.stop_agreed(stop.requested)
                if stopping or (checkpoint_every and (info["step"] + 1) % checkpoint_every == 0) or (
                    not checkpoint_every and is_best is not None
                ):
                    session.checkpoint(info, keep)
                if stopping:
                    return Outcome(info["step"] + 1, False, stop.exit_signal)
            session.evaluate_final_step()
        except BaseException as err:
            session.say_aborting(err)
            raise
        finally:
            session.finalize()
    session.finish()
    return Outcome(session.state.steps, True)


class _Session:
    """One process's part of a run: spaCy's training objects, resolved as ``spacy train``
    resolves them, and the run's state."""

    def __init__(self, nlp, run: RunDirectory, checkpoint: Optional[Checkpoint], use_gpu: int, stdout: IO, stderr: IO, cluster: Cluster):  # fmt: skip
        self.nlp, self.run, self.stdout, self.stderr, self.cluster = nlp, run, stdout, stderr, cluster
        self.msg = Printer(no_print=True)
        self.config = nlp.config.interpolate()
        seed = self.config["training"]["seed"]
        if seed is not None:
            fix_random_seed(seed)
        if cluster.distributed:
            if seed is None:
                raise DistributedError("data-parallel training needs a [training] seed: every process builds the pipeline from it")
            seed_process_generators(seed, cluster.rank)
        allocator = self.config["training"]["gpu_allocator"]
        if use_gpu >= 0 and allocator:
            set_gpu_allocator(allocator)
        self.T = registry.resolve(self.config["training"], schema=ConfigSchemaTraining)
        self.train_corpus, self.dev_corpus = resolve_dot_names(self.config, [self.T["train_corpus"], self.T["dev_corpus"]])
        self.optimizer = self.T["optimizer"]
        self.before_to_disk = create_before_to_disk_callback(self.T["before_to_disk"])
        self.state = TrainerState.read(checkpoint) if checkpoint else TrainerState()
        self.checkpoint_read = checkpoint
        self.seconds_before = self.state.seconds  # in the sessions before this one
        self.started = time.perf_counter()
        self.log_step = self.finalize_logger = None
        self.last_info: Optional[dict] = None  # the newest step's, replayed or trained

    def resume_from(self, checkpoint: Optional[Checkpoint], force_resume: bool) -> None:
        self.force_resume = force_resume
        if checkpoint is not None:
            self.nlp.from_disk(checkpoint.model)
            self.say(f"Resuming from {checkpoint.path} (step {checkpoint.step}): replaying the steps before it without training")

    def steps(self, stop_requested: Callable[[], bool]):
        T, nlp, cluster = self.T, self.nlp, self.cluster
        make_batches = lambda: create_train_batches(nlp, self.train_corpus, T["batcher"], T["max_epochs"])  # noqa: E731
        self.batches = Batches(make_batches, self.state.position)
        self.replay = Replay(self.batches, [(e[0], e[2]) for e in self.state.evaluations], self.state.losses)
        self.evaluate = cluster.main_only(create_evaluation_callback(nlp, self.dev_corpus, T["score_weights"]))
        self.language = nlp
        if cluster.distributed:
            check_annotating_components(nlp, T["annotating_components"])
            self.language = DataParallelLanguage(nlp, cluster, T["frozen_components"], T["accumulate_gradient"], stop_requested)
            cluster.check_weights_agree(nlp, "before training")
        steps = train_while_improving(
            self.replay.language(self.language), self.optimizer, self.batches, self.replay.evaluation(self.evaluate),
            dropout=T["dropout"], accumulate_gradient=1 if cluster.distributed else T["accumulate_gradient"], patience=T["patience"],
            max_steps=T["max_steps"], eval_frequency=T["eval_frequency"], exclude=T["frozen_components"],
            annotating_components=T["annotating_components"], before_update=T["before_update"],
        )  # fmt: skip
        self._announce()
        return steps

    def _announce(self) -> None:
        """spaCy's lines before the training table, and the table's header (the logger's)."""
        T, nlp, msg = self.T, self.nlp, self.msg
        self.stdout.write(msg.info(f"Pipeline: {nlp.pipe_names}") + "\n")
        if T["frozen_components"]:
            self.stdout.write(msg.info(f"Frozen components: {T['frozen_components']}") + "\n")
        if T["annotating_components"]:
            self.stdout.write(msg.info(f"Set annotations on update for: {T['annotating_components']}") + "\n")
        self.stdout.write(msg.info(f"Initial learn rate: {self.optimizer.learn_rate}") + "\n")
        if not self.cluster.is_main:  # the first process logs
            self.log_step, self.finalize_logger = (lambda info: None), (lambda: None)
            return
        with nlp.select_pipes(disable=T["frozen_components"]):
            self.log_step, self.finalize_logger = T["logger"](nlp, self.stdout, self.stderr)

    def replaying(self, info: dict) -> bool:
        """Whether this step was a replayed one; after the last, the saved state is put back."""
        if not self.replay.active:
            return False
        if self.replay.step_replayed(info["step"]):
            checkpoint = self.checkpoint_read
            load_optimizer(self.optimizer, self.nlp, checkpoint.path, check_schedules=not self.force_resume)
            restore_random_states(checkpoint.random_states(self.cluster.rank))
            if checkpoint.threads_differ():
                self.say(checkpoint.threads_differ())
            if self.cluster.is_main:
                self.run.count_resume()
            self.say(f"Resumed at step {info['step'] + 1}, epoch {info['epoch']}")
            getattr(self.log_step, "resumed", lambda step: None)(info["step"] + 1)  # the progress line's count
        return True

    def after_step(self, info: dict, is_best: Optional[bool]) -> None:
        """What spaCy's loop does after a step: meta, model-last (and model-best), the log."""
        self.state.steps = info["step"] + 1
        self.state.seconds = self.seconds_before + (time.perf_counter() - self.started)
        info["seconds"] = int(self.state.seconds)
        if info["score"] is not None:
            self.state.evaluations.append([info["score"], info["step"], info["other_scores"]])
        if is_best is not None and self.cluster.is_main:
            with self.nlp.select_pipes(disable=self.T["frozen_components"]):
                update_meta(self.T, self.nlp, info)
            self._save_model(is_best)
            info["output_path"] = str(self.run.path / DIR_MODEL_LAST)
        self.log_step(info if is_best is not None else None)

    def stop_agreed(self, requested: bool) -> bool:
        """Whether the run stops after this step: asked of this process, or in a data-parallel
        run of any process (as the processes agreed in the step's facts)."""
        return self.language.stop_agreed if self.cluster.distributed else requested

    def evaluate_final_step(self) -> None:
        """Evaluate the final weights where the run ended between two evaluations, as an
        evaluation step does (model-best if they score best, the log's row, the meta).

        spaCy's loop evaluates every ``eval_frequency`` steps only: where ``max_epochs`` or
        ``max_steps`` ends the run between two evaluations, its last steps (up to a whole epoch
        with an evaluation each epoch) are never compared on dev. Resumed, a run that ended so
        is evaluated here once its steps are replayed."""
        info, evaluations = self.last_info, self.state.evaluations
        if info is None or (evaluations and evaluations[-1][1] == info["step"]):
            return
        if self.optimizer.averages:
            with self.nlp.use_params(self.optimizer.averages):
                score, other_scores = self.evaluate()
        else:
            score, other_scores = self.evaluate()
        is_best = not evaluations or score >= max(e[0] for e in evaluations)
        checkpoints = [(e[0], e[1]) for e in evaluations] + [(score, info["step"])]
        self.after_step(dict(info, score=score, other_scores=other_scores, checkpoints=checkpoints), is_best)

    def _save_model(self, is_best: bool) -> None:
        if not self.cluster.is_main:
            return

        def write(path: Path) -> None:
            with self.nlp.use_params(self.optimizer.averages):
                self.before_to_disk(self.nlp).to_disk(path)

        self.run.save_model(write, is_best)

    def checkpoint(self, info: dict, keep: int) -> None:
        """Write the state after this step (``checkpoints.py`` says what goes where): the first
        process writes it, with every process's random states, once their weights agree."""
        cluster = self.cluster
        cluster.check_weights_agree(self.nlp, f"after step {info['step']}")
        random_states = cluster.all_gather(capture_random_states())
        check_same_python_random(random_states)
        if not cluster.is_main:
            return
        self.state.position = self.batches.position
        self.state.losses = {} if info["score"] is not None else dict(info["losses"])
        trainer = self.state.as_dict(info, cluster.world_size)

        def write_files(directory: Path) -> None:
            self.nlp.to_disk(directory / MODEL)
            save_optimizer(self.optimizer, self.nlp, directory)
            (directory / CONFIG).write_text(self.config.to_str(), encoding="utf8")
            for rank, states in enumerate(random_states):
                write_json(directory / random_states_file(rank, cluster.world_size), states)
            write_json(directory / TRAINER, trainer)

        started = time.perf_counter()
        written = self.run.write_checkpoint(self.state.steps, write_files, keep)
        self.say(f"checkpoint {written.path.name} written in {time.perf_counter() - started:.1f} s")

    def say(self, line: str) -> None:
        self.stdout.write(info_line(line) + "\n")
        self.stdout.flush()

    def say_aborting(self, err: BaseException) -> None:
        if not self.replay.active:
            self.stdout.write(self.msg.warn(f"Aborting and saving the final best model. Encountered exception: {err!r}") + "\n")

    def finalize(self) -> None:
        """The logger's end, and model-last as spaCy saves it whenever its loop ends (not while
        replaying: the weights are then the checkpoint's, not the run's; by the first process)."""
        if self.finalize_logger is not None:
            self.finalize_logger()
        if not self.replay.active and self.state.steps:
            self._save_model(False)

    def finish(self) -> None:
        best = best_evaluation(self.state.evaluations)
        self.cluster.check_weights_agree(self.nlp, "at the end")
        if self.cluster.is_main:
            self.run.finish(
                steps=self.state.steps, seconds=round(self.state.seconds, 1),
                best_score=None if best is None else best[0], best_step=None if best is None else best[1],
            )  # fmt: skip
        self.cluster.barrier()  # the others end once the first has written the run's end
        if self.optimizer.averages:
            self.nlp.use_params(self.optimizer.averages)
        self.stdout.write(self.msg.good("Saved pipeline to output directory", self.run.path / DIR_MODEL_LAST) + "\n")


def best_evaluation(evaluations: List[list]) -> Optional[list]:
    """The evaluation model-best holds: the highest score, the latest of equal ones (spaCy's
    loop saves model-best again when a score equals the best so far)."""
    return max(evaluations, key=lambda e: (e[0], e[1]), default=None)


def info_line(line: str) -> str:
    """wasabi's info message, never wrapped (wasabi wraps at 80 columns, which cuts the paths)."""
    text = f"\u2139 {line}"
    return color(text, fg=4) if Printer().show_color else text

