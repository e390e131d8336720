"""Every setting of ``adapt-encoder`` (one dataclass: the command line's options are made from
it) and the run's plan in steps: the head's steps, then the encoder's, each phase reading the
texts in its own shuffled order."""
import math
from dataclasses import asdict, dataclass
from typing import Optional

from ...common import option

# TriG-NER's recipe (CADEC's training sentences, BioBERT): 20 epochs in batches of 16 at 2e-5, 20%
# of the wordpieces masked, whole words at a time.
DEFAULT_EPOCHS = 20
# The head trains alone for one epoch when it starts untrained, at most this many steps.
MAX_HEAD_STEPS = 1000
# Phases, each with its own stream of batches (and masks); the held-out texts' masks are a third.
HEAD, ENCODER, HELD_OUT = "head", "encoder", "held-out"
STREAMS = {HEAD: 1, ENCODER: 2, HELD_OUT: 3}
TRAINING_DTYPES = ("float32", "bfloat16")


class AdaptError(ValueError):
    """The adaptation cannot start or go on (the message says why and what to do)."""


class AdaptFinished(Exception):
    """The adaptation to resume has finished: nothing to do."""


@dataclass
class AdaptOptions:
    """How ``adapt-encoder`` trains (the defaults: TriG-NER's recipe, see the module constants)."""

    epochs: Optional[int] = option(None, "Epochs the encoder trains, after the head's steps (default 20); or --steps")
    steps: Optional[int] = option(None, "Steps the encoder trains (instead of --epochs)")
    batch_size: int = option(16, "Sequences a step")
    learning_rate: float = option(2e-5, "The encoder's learning rate (AdamW, decaying linearly to 0)")
    masking: float = option(0.2, "Share of the wordpieces masked, whole words at a time (80% mask, 10% random, 10% kept)")
    max_length: int = option(128, "Wordpieces a sequence holds, special ones included: a longer text is cut between words")
    head_steps: Optional[int] = option(
        None, "Steps that train the masked-LM head alone first (default: one epoch, at most 1000, when the encoder "
        "ships no head; 0 when it does)"
    )  # fmt: skip
    head_learning_rate: float = option(1e-3, "The head's learning rate while it trains alone (constant)")
    held_out: float = option(0.02, "Share of the texts held out to measure the masked-LM loss (at most 1000; 0: none)")
    seed: int = option(0, "Seed of the data order, the masks, the new head's weights and dropout")
    checkpoint_every: int = option(0, "A checkpoint and the held-out loss every N steps (0: every epoch)")
    input_format: Optional[str] = option(None, "txt, jsonl or spacy (default: from TEXTS' name; a directory: .txt notes)")
    text_key: str = option("text", "jsonl: the key of the text")
    gpu_id: int = option(-1, "GPU to train on (-1: the CPU; an exact resume is promised on the CPU)")
    training_dtype: str = option(
        "float32", "float32, or bfloat16: each step's passes on a bfloat16 copy of the float32 weights, which the "
        "optimizer updates (a CPU with bfloat16 instructions; MPNet's steps 1.48x as fast on an AMD EPYC with "
        "AVX512-BF16)"
    )  # fmt: skip

    def check(self) -> None:
        """AdaptError naming the first setting out of its range."""
        if self.epochs is not None and self.steps is not None:
            raise AdaptError("give --epochs or --steps, not both")
        positive = {"epochs": self.epochs, "steps": self.steps, "batch_size": self.batch_size, "learning_rate": self.learning_rate,
                    "head_learning_rate": self.head_learning_rate}  # fmt: skip
        for name, value in positive.items():
            if value is not None and value <= 0:
                raise AdaptError(f"--{name.replace('_', '-')} must be positive, got {value}")
        if not 0 < self.masking < 1:
            raise AdaptError(f"--masking must be between 0 and 1, got {self.masking}")
        if not 0 <= self.held_out < 1:
            raise AdaptError(f"--held-out must be at least 0 and below 1, got {self.held_out}")
        if self.seed < 0:
            raise AdaptError(f"--seed must be 0 or more, got {self.seed}")
        if self.max_length < 8:
            raise AdaptError(f"--max-length must be at least 8, got {self.max_length}")
        if self.training_dtype not in TRAINING_DTYPES:
            raise AdaptError(f"--training-dtype must be one of {', '.join(TRAINING_DTYPES)}, got {self.training_dtype!r}")
        if self.training_dtype == "bfloat16" and self.gpu_id >= 0:
            raise AdaptError("--training-dtype bfloat16 is for a CPU with bfloat16 instructions: on a GPU, train in float32")
        for name in ("head_steps", "checkpoint_every"):
            if (getattr(self, name) or 0) < 0:
                raise AdaptError(f"--{name.replace('_', '-')} must be 0 or more, got {getattr(self, name)}")

    def settings(self) -> dict:
        """What the run's results depend on, compared when it resumes (not where or how often it
        checkpoints, nor the device; the dtype where it is not float32, so that runs started before
        the setting existed resume)."""
        ignored = ("checkpoint_every", "gpu_id") + (("training_dtype",) if self.training_dtype == "float32" else ())
        return {key: value for key, value in asdict(self).items() if key not in ignored}


@dataclass(frozen=True)
class Plan:
    """The run in steps: ``head_steps`` training the head alone, then ``encoder_steps`` training
    everything; each phase reads the training sequences in batches, ``steps_per_epoch`` an epoch."""

    head_steps: int
    encoder_steps: int
    steps_per_epoch: int
    checkpoint_every: int

    @classmethod
    def of(cls, options: AdaptOptions, sequences: int, head_is_new: bool) -> "Plan":
        per_epoch = math.ceil(sequences / options.batch_size)
        head = options.head_steps if options.head_steps is not None else (min(per_epoch, MAX_HEAD_STEPS) if head_is_new else 0)
        encoder = options.steps if options.steps is not None else (options.epochs or DEFAULT_EPOCHS) * per_epoch
        return cls(head, encoder, per_epoch, options.checkpoint_every or per_epoch)

    @property
    def total(self) -> int:
        return self.head_steps + self.encoder_steps

    def phase(self, step: int) -> str:
        """The phase step ``step`` (0-based) belongs to."""
        return HEAD if step < self.head_steps else ENCODER

    def phase_step(self, step: int) -> int:
        """Step ``step``'s place in its phase's stream of batches."""
        return step if step < self.head_steps else step - self.head_steps

    def epochs_done(self, done: int) -> float:
        """The encoder's epochs after ``done`` steps of the run."""
        return max(0, done - self.head_steps) / self.steps_per_epoch

    def evaluates_after(self, done: int) -> bool:
        """Whether the held-out loss is measured (and a checkpoint written) after ``done`` steps:
        every ``checkpoint_every`` steps of a phase, at the head phase's end and at the run's."""
        in_phase = done if done <= self.head_steps else done - self.head_steps
        return in_phase % self.checkpoint_every == 0 or done in (self.head_steps, self.total)
