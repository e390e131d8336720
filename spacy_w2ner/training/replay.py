"""spaCy's ``train_while_improving``, run again over its first steps without training.

``train_while_improving`` keeps its state in local variables: the step count, the evaluation
results (which decide the best model and the patience), the losses since the last evaluation,
the words seen and the dropout schedule's place. It cannot be given them back, so a resumed run
lets it run its first steps again, fast: the batches come from ``stream.Batches`` (the same
ones), the pipeline it is given skips the updates and the evaluation gives back the recorded
results, while the optimizer's schedules advance as they did. After the last replayed step
every local of the generator is what it was when the checkpoint was written.
"""
import contextlib
from typing import Callable, Dict, List, Tuple

from .stream import Batches

Evaluation = Tuple[float, Dict[str, object]]


class ReplayError(ValueError):
    """The recorded evaluations do not match the replayed steps."""


class Replay:
    """The stand-ins ``train_while_improving`` gets while ``batches`` replays.

    evaluations: the (score, other scores) of every evaluation before the checkpoint, in order;
    losses: the losses summed since the last evaluation at the checkpoint."""

    def __init__(self, batches: Batches, evaluations: List[Evaluation], losses: Dict[str, float]):
        self.batches = batches
        self._evaluations = list(evaluations)
        self._losses = dict(losses)
        self._steps_left = batches.replay_to.steps

    @property
    def active(self) -> bool:
        return self.batches.replaying

    def language(self, nlp) -> "ReplayingLanguage":
        return ReplayingLanguage(nlp, self)

    def evaluation(self, evaluate: Callable[[], Evaluation]) -> Callable[[], Evaluation]:
        def evaluate_or_recall() -> Evaluation:
            if not self.active:
                return evaluate()
            if not self._evaluations:
                raise ReplayError("the checkpoint records fewer evaluations than its steps make (did eval_frequency change?)")
            score, other_scores = self._evaluations.pop(0)
            return score, other_scores

        return evaluate_or_recall

    def step_replayed(self, step: int) -> bool:
        """Called for each replayed step (0-based); true for the last one, when no recorded
        evaluation may be left."""
        self._steps_left -= 1
        if self._steps_left:
            return False
        if self._evaluations:
            raise ReplayError(f"the checkpoint records {len(self._evaluations)} more evaluations than its {step + 1} steps make")
        return True

    def carry_losses(self, losses: Dict[str, float]) -> None:
        """Give the last replayed step's losses dict the checkpoint's (once)."""
        if self._steps_left == 1 and self._losses:
            losses.update(self._losses)
            self._losses = {}


class ReplayingLanguage:
    """The pipeline as ``train_while_improving`` sees it: unchanged, except while replaying,
    when ``update`` trains nothing, ``pipeline`` is empty (no component applies an update) and
    ``use_params`` swaps nothing in."""

    def __init__(self, nlp, replay: Replay):
        self._nlp = nlp
        self._replay = replay

    def update(self, examples, *, losses=None, **kwargs):
        if not self._replay.active:
            return self._nlp.update(examples, losses=losses, **kwargs)
        if losses is not None:
            self._replay.carry_losses(losses)
        return losses

    @property
    def pipeline(self):
        return [] if self._replay.active else self._nlp.pipeline

    def use_params(self, params):
        return contextlib.nullcontext() if self._replay.active else self._nlp.use_params(params)

    def __getattr__(self, name):
        return getattr(self._nlp, name)
