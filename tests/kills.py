"""A child process killed (SIGKILL) right after the rename of its choice: what a scheduler's kill
does between the two renames of a directory replacement (``files.replace_directory``)."""
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_KILLED_AFTER_A_RENAME = """
import os, signal
from pathlib import Path

_rename = os.rename


def _rename_then_die(source, destination, *args, **kwargs):
    _rename(source, destination, *args, **kwargs)
    if Path(destination).name == os.environ["KILL_AFTER_RENAMING_TO"]:
        os.kill(os.getpid(), signal.SIGKILL)


os.rename = _rename_then_die
"""


def run_killed_after_rename(code: str, renamed_to: str, *args: object) -> None:
    """Run ``code`` (with ``args`` in ``sys.argv[1:]``) in a new interpreter that kills itself with
    SIGKILL as soon as it has renamed something to ``renamed_to`` (a name); AssertionError unless
    it was killed so."""
    environment = {**os.environ, "KILL_AFTER_RENAMING_TO": renamed_to}
    done = subprocess.run([sys.executable, "-c", _KILLED_AFTER_A_RENAME + code, *map(str, args)], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == -signal.SIGKILL, f"not killed after renaming to {renamed_to}: {done.stderr[-2000:]}"
