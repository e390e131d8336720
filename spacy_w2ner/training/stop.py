"""How a run is asked to stop after its step, with a checkpoint: ``train``'s, ``adapt-encoder``'s and
the Ray launcher's one type of stop request."""
import signal
import threading
import time
from pathlib import Path
from typing import IO, Callable, Optional


class StopRequests:
    """SIGINT and SIGTERM ask the run to stop after the current step (with a checkpoint); a
    second SIGINT stops it at once. Only in the main thread (where Python delivers signals).
    ``stop_file`` appearing asks the same (``RunDirectory.stop_file``). ``on_request`` is called
    with each request that a signal makes (the Ray launcher passes it on to its workers so)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)
    POLL_SECONDS = 1.0

    def __init__(self, stderr: IO, stop_file: Optional[Path] = None, on_request: Callable[[], None] = lambda: None,
                 stopping: str = "stopping after this step"):  # fmt: skip
        self.stderr, self.stop_file, self.on_request, self.stopping = stderr, stop_file, on_request, stopping
        self.signal_number: Optional[int] = None
        self._previous: dict = {}
        self._polled = 0.0
        self._file_seen = False

    @property
    def requested(self) -> bool:
        if self.stop_file is not None and not self._file_seen and time.monotonic() - self._polled >= self.POLL_SECONDS:
            self._polled = time.monotonic()
            self._file_seen = self.stop_file.exists()
        return self.signal_number is not None or self._file_seen

    @property
    def exit_signal(self) -> int:
        """The signal a stopped run exits by (128 + it): the one that asked, SIGTERM for the stop file."""
        return self.signal_number or signal.SIGTERM

    def _handle(self, number, frame) -> None:
        if self.requested and number == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal_number = number
        self.on_request()
        self.stderr.write(f"\n{signal.Signals(number).name}: {self.stopping}, with a checkpoint "
                          "(Ctrl+C again stops at once, without one)\n")
        self.stderr.flush()

    def __enter__(self) -> "StopRequests":
        if threading.current_thread() is threading.main_thread():
            self._previous = {number: signal.signal(number, self._handle) for number in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
