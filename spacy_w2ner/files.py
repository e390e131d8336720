"""Files that are whole or absent: written under a temporary name and renamed into place, and
their fingerprints.

A process can be killed at any moment (a scheduler's SIGKILL, a full disk, a power cut); a
reader must then find either the old file or the new one, never half of one. Every writer of the
package that replaces a file or a directory does it through these functions (the import
contract in setup.cfg keeps ``os.replace`` and ``os.rename`` here: ``tests/test_files.py``), and
every fingerprint of a file's bytes is ``sha256_file``:

* ``write_atomically``: a file's new bytes, replacing it in one rename;
* ``move_into_place``: a file or directory written under a temporary name (a long write that
  resumes: annotate's partial output; a streamed one: a .spacy file) given its name once complete;
* ``write_directory``/``replace_directory``: a directory replaced by a complete new one. POSIX has
  no rename over a non-empty directory: the old one is renamed aside first, so a kill between the
  two renames leaves it there, and ``restore_replaced``, called by the writer's next start (and
  by the commands that read what it writes), puts it back.
"""
import hashlib
import os
import shutil
from pathlib import Path
from typing import Callable, Dict, Union


def write_atomically(path: Path, data: Union[str, bytes], sync: bool = False) -> None:
    """Replace ``path`` by ``data`` (text is written as UTF-8) through a temporary sibling and a
    rename; with ``sync``, the bytes and the rename are on disk when it returns."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    write_synced(temporary, data.encode("utf8") if isinstance(data, str) else data, sync)
    os.replace(temporary, path)
    if sync:
        sync_directory(path.parent)


def write_synced(path: Path, data: bytes, sync: bool = True) -> None:
    """Write ``data`` to ``path`` (on disk when it returns, with ``sync``)."""
    with Path(path).open("wb") as file:
        file.write(data)
        if sync:
            file.flush()
            os.fsync(file.fileno())


def replace_directory(source: Path, target: Path) -> None:
    """Move the complete directory ``source`` to ``target``, replacing what is there: the old
    one is first renamed aside (``restore_replaced`` undoes a kill between the two renames)."""
    aside = _aside(target)
    remove_tree(aside)
    if target.exists():
        os.rename(target, aside)
    os.rename(source, target)
    sync_directory(target.parent)
    remove_tree(aside)


def write_directory(target: Path, write: Callable[[Path], None]) -> None:
    """``write(directory)`` fills a temporary sibling of ``target``, which then replaces it; where
    ``write`` raises, the temporary one is removed and ``target`` is left as it was."""
    temporary = _temporary(target)
    remove_tree(temporary)
    try:
        write(temporary)
    except BaseException:
        remove_tree(temporary)
        raise
    replace_directory(temporary, target)


def move_into_place(source: Path, target: Path) -> None:
    """Give the complete file or directory ``source`` the name ``target`` in one rename: a file
    there is replaced, an empty directory there (one given as an output) removed first."""
    target = Path(target)
    if target.is_dir() and not Path(source).is_file():
        target.rmdir()  # OSError where it is not empty: nothing is replaced
    os.replace(source, target)


def restore_replaced(target: Path) -> None:
    """After a kill inside ``replace_directory``: put the old directory back if the new one is
    not in place, else remove it; and remove what ``write_directory`` was writing."""
    target = Path(target)
    aside = _aside(target)
    if aside.exists():
        if target.exists():
            remove_tree(aside)
        else:
            os.rename(aside, target)
    remove_tree(_temporary(target))


def _aside(target: Path) -> Path:
    """Where ``replace_directory`` puts the old directory while the new one comes in."""
    return target.with_name(f".{target.name}.old")


def _temporary(target: Path) -> Path:
    """Where ``write_directory`` writes the new directory."""
    return target.with_name(f".{target.name}.tmp")


def remove_tree(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def sha256_file(path: Path, sync: bool = False) -> str:
    """The SHA-256 of a file's bytes (with ``sync``, after making sure they are on disk)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as file:
        for block in iter(lambda: file.read(1 << 22), b""):
            digest.update(block)
        if sync:
            os.fsync(file.fileno())
    return digest.hexdigest()


def describe_file(path: Path, sync: bool = False) -> Dict[str, object]:
    """A file's size and SHA-256, as a manifest records them."""
    digest = sha256_file(path, sync)
    return {"size": Path(path).stat().st_size, "sha256": digest}


def sync_directory(directory: Path) -> None:
    """Make the renames in ``directory`` durable (POSIX: fsync the directory)."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
