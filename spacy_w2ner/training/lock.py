"""An output directory written by one process at a time: ``train``'s and ``adapt-encoder``'s.

A second run started on a directory that a run still writes (a resume from a second terminal, a
job requeued while the old one drains) would write the same checkpoints and delete the other's.
The process that writes a directory holds the operating system's advisory lock (flock) on
``DIR/lock``, which names it; the lock goes when the process ends, however it ends (SIGKILL
included), so a killed run never leaves its directory held. A run that finished removes the
lock file while it holds it; a process that opened that file before and locks it after would
hold a file no longer in the directory, beside a third process that locks the new one: so a lock
counts only once the file locked is still the one the path names (``_still_named``), and is
taken again otherwise. Where there are no advisory locks (Windows, some network file systems)
the directory is unguarded.
"""
import os
import socket
from pathlib import Path
from typing import IO, Optional

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

LOCK_FILE = "lock"


class DirectoryInUse(Exception):
    """Another process holds the directory; ``holder`` names it ("process PID on HOST")."""

    def __init__(self, holder: str):
        super().__init__(holder)
        self.holder = holder


class DirectoryLock:
    def __init__(self, directory: Path):
        self.path = Path(directory) / LOCK_FILE
        self._handle: Optional[IO] = None  # the open lock file while this process holds it
        self._made_directory = False

    def acquire(self) -> None:
        """Hold the directory (created if absent) until ``release`` or this process's end;
        DirectoryInUse when another holder has it (this process's other locks on it included)."""
        if fcntl is None:
            return
        self._made_directory = not self.path.parent.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self._locked_file()
        if handle is None:  # no locks on this file system
            return
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        self._handle = handle

    def _locked_file(self) -> Optional[IO]:
        """The lock file, open and locked by this process (None where the file system has no
        locks); DirectoryInUse naming the holder."""
        while True:
            handle = open(self.path, "a+", encoding="utf8")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                handle.close()
                raise DirectoryInUse(holder) from None
            except OSError:
                handle.close()
                return None
            if _still_named(handle, self.path):
                return handle
            handle.close()  # removed by the holder before: lock the file there now

    def release(self, remove: bool = False) -> None:
        """Let the directory go. The lock file goes too with ``remove`` (a directory whose work is
        done: a run started there finds it finished), or when the run wrote nothing else (a run
        that failed as it started leaves no trace: nor the directory, if acquire made it)."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        directory = self.path.parent
        nothing_else = [path.name for path in directory.iterdir()] == [LOCK_FILE]
        if remove or nothing_else:
            self.path.unlink(missing_ok=True)
        handle.close()
        if nothing_else and self._made_directory:
            try:
                directory.rmdir()
            except OSError:  # something was written there meanwhile
                pass


def _still_named(handle: IO, path: Path) -> bool:
    """Whether the open file ``handle`` is the file ``path`` names now."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(handle.fileno())
    return (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)
