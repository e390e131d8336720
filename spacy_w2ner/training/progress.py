"""``spacy_w2ner.ConsoleLogger.v1``: spaCy's training table, and a line of progress between its rows.

spaCy's console logger prints a row at each evaluation. On a CPU rows can be many minutes apart,
and its progress bar shows neither before the first row's interval ends nor where the output is not
a terminal (tqdm disables itself: a log file, CI, ``nohup``), so a run looks stuck. This logger
prints spaCy's table as spaCy does and, between rows, at most one line every ``every_seconds`` on
stderr: the step, the steps a minute since the last row, and when the next row is due (a resumed
run's loop says the step it resumes at, ``resumed``: the replayed steps are not logged)::

    [training.logger]
    @loggers = "spacy_w2ner.ConsoleLogger.v1"
    every_seconds = 60
    progress_bar = false
"""
import sys
import time
from typing import IO, Any, Callable, Dict, Optional, Tuple

from spacy.training.loggers import console_logger_v3
from spacy.util import registry


@registry.loggers("spacy_w2ner.ConsoleLogger.v1")
def console_logger_with_progress(
    every_seconds: float = 60.0, progress_bar: bool = False, console_output: bool = True, output_file: Optional[str] = None
):
    """spaCy's ConsoleLogger (its table; its progress bar, ``progress_bar``, where the output is a
    terminal; ``output_file``) with a progress line at most every ``every_seconds`` between its
    rows (none with ``console_output = false``)."""
    table = console_logger_v3(progress_bar="eval" if progress_bar else None, console_output=console_output, output_file=output_file)

    def setup(nlp, stdout: IO = sys.stdout, stderr: IO = sys.stderr) -> Tuple[Callable[[Optional[Dict[str, Any]]], None], Callable[[], None]]:
        log_step, finalize = table(nlp, stdout, stderr)
        progress = Progress(nlp.config["training"]["max_steps"], nlp.config["training"]["eval_frequency"], every_seconds, stderr)

        def step(info: Optional[Dict[str, Any]]) -> None:
            log_step(info)
            if console_output:
                progress.step(info)

        step.resumed = progress.resume  # type: ignore[attr-defined]
        return step, finalize

    return setup


class Progress:
    """Counts the steps spaCy's loop logs (one call a step; ``info`` at an evaluation) and says
    how far it is when ``every_seconds`` passed without a row or a line."""

    def __init__(self, max_steps: int, eval_frequency: int, every_seconds: float, stream: IO, clock: Callable[[], float] = time.monotonic):
        self.max_steps, self.eval_frequency, self.every_seconds = max_steps, eval_frequency, every_seconds
        self.stream, self.clock = stream, clock
        self.steps = -1  # the step just done (spaCy's first call is step 0)
        self.row = (0, clock())  # the step and time of the last row (or the start)
        self.said = self.row[1]

    def step(self, info: Optional[Dict[str, Any]]) -> None:
        now = self.clock()
        self.steps = info["step"] if info is not None else self.steps + 1
        if info is not None:
            self.row = (self.steps, now)
            self.said = now
            return
        if now - self.said < self.every_seconds:
            return
        self.said = now
        self.stream.write(self.line(now) + "\n")
        self.stream.flush()

    def resume(self, step: int) -> None:
        """A resumed run's replay ended: the next step logged is ``step``; its rate counts from now."""
        now = self.clock()
        self.steps = step - 1
        self.row, self.said = (self.steps, now), now

    def line(self, now: float) -> str:
        done = self.steps - self.row[0]
        per_minute = 60 * done / max(now - self.row[1], 1e-9)
        next_row = (self.steps // self.eval_frequency + 1) * self.eval_frequency
        if self.max_steps:
            next_row = min(next_row, self.max_steps)
        minutes = (next_row - self.steps) / per_minute if per_minute > 0 else None
        due = "" if minutes is None else ", in under a minute" if minutes < 1 else f", in about {minutes:.0f} min"
        of = f" of {self.max_steps}" if self.max_steps else ""
        return f"  ... step {self.steps}{of}, {per_minute:.1f} steps a minute; the next row at step {next_row}{due}"
