"""Files other tools wrote (../shared/interop-samples, README there: sources and licences; skipped
without it): `convert` then `export` back in the same format gives every annotation and relation at
the same offsets, types and locations (a BioC annotation with several locations comes back with
them), read with the bioc package's own parser; a PubTator file comes back line for line, less the
lines `convert` listed as of no kind.

Run it as a new user would (`python -m spacy_w2ner convert` and `export`, one process each) with
``python tests/formats/test_interop_samples.py``: it prints the command and the counts per file.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import cli, summary_line
from .test_bioc import contents

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "interop-samples"

# file, convert's options, counts that must hold (the "Done when"), the lines listed as of no kind
EXPECTED = [
    ("bconv-CRAFT-example.bioc.xml", [], {"entities": 40, "discontinuous": 4, "per_label": {"Cell": 40}}, []),
    ("bconv-CRAFT-example.bioc.json", [], {"entities": 40, "discontinuous": 4, "per_label": {"Cell": 40}}, []),
    ("bconv-elliptic-coordination.bioc.xml", [], {"entities": 9, "discontinuous": 2}, []),
    ("bconv-elliptic-coordination.bioc.json", [], {"entities": 9, "discontinuous": 2}, []),
    ("teamtat-sample_training.bioc.xml", [], {"documents": 60, "entities": 542, "tokens_split": 1}, []),
    ("teamtat-11773052_v0.bioc.xml", [], {"entities": 23, "relations": 1}, []),
    ("bionlplab-bioc-everything.bioc.xml", ["--type-key", "annotation-infon-key"], {"documents": 2, "entities": 5, "relations": 3}, []),
    ("ncbi-disease-NCBItestset_corpus.pubtator.txt", [], {"documents": 100, "entities": 960, "tokens_split": 1}, []),
    ("bionlplab-bioc-tmVar.Normalization.pubtator.txt", [], {"documents": 158, "entities": 674, "not_read": {"unknown line or element": 1}}, [691]),
]  # fmt: skip

pytestmark = pytest.mark.skipif(not SAMPLES.exists(), reason="../shared/interop-samples is absent")


def input_format(name: str) -> str:
    return "pubtator" if name.endswith(".pubtator.txt") else "bioc"


@pytest.mark.parametrize("name, options, expected, unknown_lines", EXPECTED, ids=[e[0] for e in EXPECTED])
def test_every_annotation_and_relation_comes_back(tmp_path, name, options, expected, unknown_lines):
    source = SAMPLES / name
    result = cli("convert", input_format(name), source, tmp_path, *options)
    counts = summary_line(result)
    assert {key: counts.get(key) for key in expected} == expected
    assert "ignored_annotations" not in counts  # no annotation lost
    assert counts["sentences"] >= counts["documents"]
    at_lines = re.findall(rf"^warning: {re.escape(str(source))}:(\d+): (.*)$", result.stderr, re.M)
    # Each split named at the annotation (or passage) that made it: each token split, once or more.
    splits = {(why.split(": ")[0], why.split(" splits the token ")[1]) for _, why in at_lines if " splits the token " in why}
    assert len(splits) == counts.get("tokens_split", 0)
    listed = [int(line) for line, why in at_lines if " splits the token " not in why]
    assert listed == unknown_lines
    converted = tmp_path / (source.stem + ".spacy")
    if input_format(name) == "pubtator":
        cli("export", "pubtator", converted, tmp_path / "back.txt")
        assert nonblank_lines(tmp_path / "back.txt") == [line for number, line in enumerate(source.read_text(encoding="utf8").splitlines(), 1) if line.strip() and number not in listed]
        return
    for suffix in (".xml", ".json"):  # the same format, and the other BioC encoding
        exported = summary_line(cli("export", "bioc", converted, tmp_path / f"back{suffix}"))
        assert "not_exported" not in exported
        assert contents(tmp_path / f"back{suffix}") == contents(source)


def test_doc_per_passage_gives_the_same_annotations_back(tmp_path):
    source = SAMPLES / "bionlplab-bioc-everything.bioc.xml"  # annotations and relations at every level
    cli("convert", "bioc", source, tmp_path, "--doc-per", "passage", "--type-key", "annotation-infon-key")
    cli("export", "bioc", tmp_path / (source.stem + ".spacy"), tmp_path / "back.xml")
    assert contents(tmp_path / "back.xml") == contents(source)


def nonblank_lines(path: Path):
    return [line for line in path.read_text(encoding="utf8").splitlines() if line.strip()]


def main(out: Path) -> None:
    """Convert and export every sample with ``python -m spacy_w2ner``, printing commands and counts."""
    for name, options, _, _ in EXPECTED:
        source = SAMPLES / name
        back = out / f"back-{name}"
        commands = [
            [sys.executable, "-m", "spacy_w2ner", "convert", input_format(name), str(source), str(out), *options],
            [sys.executable, "-m", "spacy_w2ner", "export", input_format(name), str(out / (source.stem + ".spacy")), str(back)],
        ]
        for command in commands:
            done = subprocess.run(command, capture_output=True, text=True)
            print("$", " ".join(command[1:]), f"(exit {done.returncode})")
            print("  " + json.dumps(json.loads(done.stdout.strip().splitlines()[-1]), ensure_ascii=False) if done.returncode == 0 else done.stderr)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        main(Path(directory))
