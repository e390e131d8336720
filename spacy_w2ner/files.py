"""Files that are whole or absent: written under a temporary name and renamed into place, and
their fingerprints.

A process can be killed at any moment (a scheduler's SIGKILL, a full disk, a power cut); a
reader must then find either the old file or the new one, never half of one. Every writer of the
package that replaces a file or a directory does it through these functions, and every
fingerprint of a file's bytes is ``sha256_file``.
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
    aside = target.with_name(f".{target.name}.old")
    remove_tree(aside)
    if target.exists():
        os.rename(target, aside)
    os.rename(source, target)
    sync_directory(target.parent)
    remove_tree(aside)


def write_directory(target: Path, write: Callable[[Path], None]) -> None:
    """``write(directory)`` fills a temporary sibling of ``target``, which then replaces it."""
    temporary = target.with_name(f".{target.name}.tmp")
    remove_tree(temporary)
    write(temporary)
    replace_directory(temporary, target)


def restore_replaced(target: Path) -> None:
    """After a kill inside ``replace_directory``: put the old directory back if the new one is
    not in place, else remove it."""
    aside = target.with_name(f".{target.name}.old")
    if aside.exists():
        if target.exists():
            remove_tree(aside)
        else:
            os.rename(aside, target)


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
