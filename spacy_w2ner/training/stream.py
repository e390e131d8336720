"""The training batches' place in the data, kept so that a new process finds it again exactly.

spaCy's ``create_train_batches`` reads the corpus once, then shuffles it in place with Python's
``random`` at the start of every epoch, so the order of an epoch depends on every draw made
before it, by the training too. ``Batches`` wraps it unchanged and records what the order
depends on: Python's random state just before each epoch's first batch was asked for (the
shuffle happens then) and how many batches each epoch had. A resumed run runs the same
generator again, setting the recorded state before each epoch, and skips the batches already
trained on: it yields the same batches in the same order, whatever the corpus reader, the
augmenter or the batcher does with Python's ``random`` when it reads or shuffles, and it costs a
pass of batching without training. Batchers must not draw random numbers in the middle of an
epoch (spaCy's do not); the checkpoint's last batch is compared with the replayed one to be sure.
"""
import hashlib
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, List, Optional, Tuple

from .randomness import python_random_state, set_python_random_state


class DataPositionError(ValueError):
    """The corpus does not replay to the checkpoint's place in it."""


@dataclass
class DataPosition:
    """Where the training is in its data after ``steps`` batches.

    epoch_states[i]: Python's random state before epoch i's first batch; epoch_sizes[i]: the
    batches of each epoch that ended; in_epoch: batches taken from the current one;
    last_batch: a fingerprint of the last batch taken."""

    epoch_states: List[list] = field(default_factory=list)
    epoch_sizes: List[int] = field(default_factory=list)
    in_epoch: int = 0
    last_batch: str = ""

    @property
    def steps(self) -> int:
        return sum(self.epoch_sizes) + self.in_epoch

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "DataPosition":
        return cls(**data)


def batch_fingerprint(batch) -> str:
    """A short hash of a batch's reference texts, in order."""
    digest = hashlib.sha256()
    for example in batch:
        digest.update(example.reference.text.encode("utf8") + b"\0")
    return digest.hexdigest()[:16]


class Batches:
    """Iterate ``(epoch, batch)`` from ``make_batches()`` (spaCy's ``create_train_batches``),
    first replaying the batches up to ``position``; ``position`` then follows the live ones.

    ``replaying`` is true while the last batch handed out was a replayed one."""

    def __init__(self, make_batches: Callable[[], Iterator[Tuple[int, list]]], position: Optional[DataPosition] = None):
        self._make_batches = make_batches
        self.replay_to = position or DataPosition()
        self.position = DataPosition()
        self.replaying = False

    def __iter__(self) -> Iterator[Tuple[int, list]]:
        batches = self._make_batches()
        yield from self._replay(batches)
        self.replaying = False
        epoch = len(self.position.epoch_states) - 1
        while True:
            state = python_random_state()
            try:
                item = next(batches)
            except StopIteration:
                return
            if item[0] != epoch:
                epoch = item[0]
                self._start_epoch(state)
            self._take(item[1])
            yield item

    def _replay(self, batches: Iterator) -> Iterator[Tuple[int, list]]:
        target = self.replay_to
        sizes = target.epoch_sizes + ([target.in_epoch] if target.in_epoch else [])
        for epoch, size in enumerate(sizes):
            set_python_random_state(target.epoch_states[epoch])
            self._start_epoch(target.epoch_states[epoch])
            for _ in range(size):
                item = next(batches, None)
                if item is None or item[0] != epoch:
                    found = "the data ended" if item is None else f"epoch {item[0]} began"
                    raise DataPositionError(f"the corpus does not replay to the checkpoint: {found} after {self.position.steps} batches, in epoch {epoch}, which had {size}")
                self._take(item[1])
                if self.position.steps == target.steps and self.position.last_batch != target.last_batch:
                    raise DataPositionError(
                        f"the corpus does not replay to the checkpoint: batch {target.steps} differs from the one "
                        "trained on (did the corpus, its reader or the batcher change?)"
                    )
                self.replaying = True
                yield item

    def _start_epoch(self, state: list) -> None:
        if self.position.epoch_states:
            self.position.epoch_sizes.append(self.position.in_epoch)
        self.position.epoch_states.append(state)
        self.position.in_epoch = 0

    def _take(self, batch) -> None:
        self.position.in_epoch += 1
        self.position.last_batch = batch_fingerprint(batch)
