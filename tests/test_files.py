"""``files.py``: files and directories whole or absent, under a real SIGKILL between the renames of
a replacement, and the package's one owner of renames."""
import ast
import zipfile
from pathlib import Path

import pytest

from spacy_w2ner import files
from spacy_w2ner.encoders import assets
from spacy_w2ner.files import move_into_place, restore_replaced, sha256_file, write_directory

from .kills import run_killed_after_rename

PACKAGE = Path(files.__file__).parent
# (where the kill comes, what the next start finds): after the old directory went aside, the
# old one is put back; after the new one came in, the new one stays.
KILLS = [(".{name}.old", "old"), ("{name}", "new")]

_WRITE_DIRECTORY = """
import sys
from pathlib import Path
from spacy_w2ner.files import write_directory

def fill(directory):
    directory.mkdir()
    (directory / "a").write_text("new a")
    (directory / "b").write_text("new b")

write_directory(Path(sys.argv[1]), fill)
"""


def _old_directory(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "a").write_text("old a")
    (path / "b").write_text("old b")


def _contents(path: Path) -> dict:
    return {item.name: item.read_text() for item in sorted(path.iterdir())}


@pytest.mark.parametrize("renamed_to, whole", KILLS)
def test_a_directory_replaced_is_whole_after_a_kill_between_its_renames(tmp_path, renamed_to, whole):
    target = tmp_path / "out"
    _old_directory(target)
    run_killed_after_rename(_WRITE_DIRECTORY, renamed_to.format(name="out"), target)
    restore_replaced(target)  # what the writer's next start does
    assert _contents(target) == {"a": f"{whole} a", "b": f"{whole} b"}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]


_FETCH = """
import shutil, sys
from pathlib import Path
from spacy_w2ner.encoders import assets

directory, archive, spec = sys.argv[1], sys.argv[2], eval(sys.argv[3], vars(assets))
assets.ENCODERS[spec.name] = spec
assets._download_and_join = lambda spec, temp, joined, log: shutil.copy(archive, joined)  # offline
assets.fetch_encoder(spec.name, directory, force=True, log=lambda line: None)
"""


def _tiny_encoder(tmp_path: Path) -> "assets.SplitEncoder":
    """A published encoder of one part: its archive, in ``tmp_path / 'tiny.zip'``, holds new weights."""
    archive = tmp_path / "tiny.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("tiny/model.safetensors", "new weights")
    unpacked = tmp_path / "weights"
    unpacked.write_text("new weights")
    return assets.SplitEncoder(
        name="tiny", packages=("tiny-part-001",), version="0.0.1", member="{n}", archive_bytes=archive.stat().st_size,
        archive_sha256=sha256_file(archive), weights_file="model.safetensors", weights_sha256=sha256_file(unpacked),
        licence="none",
    )  # fmt: skip


@pytest.mark.parametrize("renamed_to, whole", KILLS)
def test_a_fetched_encoder_is_whole_after_a_kill_between_its_renames(tmp_path, monkeypatch, renamed_to, whole):
    """``fetch-encoder --force`` over an encoder that is there, killed between its renames: the
    encoder's path (``spacy_w2ner.encoder_path.v1``, what a config resolves) is the old encoder or
    the new one, whole."""
    spec = _tiny_encoder(tmp_path)
    encoders = tmp_path / "encoders"
    (encoders / "tiny").mkdir(parents=True)
    (encoders / "tiny" / "model.safetensors").write_text("old weights")
    run_killed_after_rename(_FETCH, renamed_to.format(name="tiny"), encoders, tmp_path / "tiny.zip", repr(spec))
    assert not (encoders / "tiny").exists() or whole == "new"  # the kill came where it was asked
    monkeypatch.setitem(assets.ENCODERS, "tiny", spec)
    path = Path(assets.encoder_path("tiny", str(encoders)))
    assert _contents(path) == {"model.safetensors": f"{whole} weights"}
    assert not (encoders / ".tiny.old").exists()


def test_a_directory_whose_writing_fails_is_left_as_it_was(tmp_path):
    target = tmp_path / "out"
    _old_directory(target)

    def fails(directory: Path) -> None:
        directory.mkdir()
        (directory / "a").write_text("half")
        raise OSError("No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_directory(target, fails)
    assert _contents(target) == {"a": "old a", "b": "old b"}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]


def test_a_complete_file_or_directory_is_moved_into_place_in_one_rename(tmp_path):
    (tmp_path / "partial.jsonl").write_text("new")
    (tmp_path / "out.jsonl").write_text("old")
    move_into_place(tmp_path / "partial.jsonl", tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_text() == "new" and not (tmp_path / "partial.jsonl").exists()
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "doc.ann").write_text("T1")
    (tmp_path / "brat").mkdir()  # an empty directory given as the output
    move_into_place(tmp_path / "partial", tmp_path / "brat")
    assert _contents(tmp_path / "brat") == {"doc.ann": "T1"}
    (tmp_path / "partial").mkdir()
    with pytest.raises(OSError):  # a directory with files in it is not replaced
        move_into_place(tmp_path / "partial", tmp_path / "brat")
    assert _contents(tmp_path / "brat") == {"doc.ann": "T1"}


def test_files_py_is_the_one_module_that_renames():
    """No ``os.replace``, ``os.rename`` or ``.rename(`` outside files.py: every write that replaces
    a file or a directory goes through it (its module docstring)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == Path(files.__file__):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
            if not isinstance(node, ast.Attribute):
                continue
            from_os = isinstance(node.value, ast.Name) and node.value.id == "os" and node.attr in ("replace", "rename")
            if from_os or node.attr == "rename":
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []
