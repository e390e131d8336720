"""`spacy package` builds a wheel that installs offline and annotates discontinuous entities."""
import subprocess
import sys
import venv

import pytest
import spacy

from .conftest import SMALL_W2NER_CONFIG, make_examples, train

pytest.importorskip("build", reason="spacy package --build wheel needs the 'build' package")


def run(*args, **kwargs):
    result = subprocess.run([*map(str, args)], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.slow
def test_packaged_wheel_installs_offline_and_annotates(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    train(nlp, make_examples(nlp), 150)
    nlp.to_disk(tmp_path / "model")
    (tmp_path / "packages").mkdir()
    run(sys.executable, "-m", "spacy", "package", tmp_path / "model", tmp_path / "packages",
        "--name", "w2ner_test", "--version", "0.0.1", "--build", "wheel", "--force")
    wheel = next((tmp_path / "packages").glob("*/dist/*.whl"))
    # A fresh environment that sees the installed libraries (offline), but not the pipeline.
    venv.create(tmp_path / "env", system_site_packages=True, with_pip=True)
    python = tmp_path / "env" / "bin" / "python"
    # Offline: --no-index; the requirements are checked against what is installed.
    run(python, "-m", "pip", "install", "--no-index", "--no-deps", "-q", wheel)
    requirements = run(python, "-c", (
        "import en_w2ner_test\n"
        "from importlib.metadata import requires, version\n"
        "from packaging.requirements import Requirement\n"
        "for line in requires('en_w2ner_test'):\n"
        "    req = Requirement(line)\n"
        "    assert version(req.name) in req.specifier, (req, version(req.name))\n"
        "    print(req.name)\n"
    ), cwd=tmp_path)
    assert "spacy-w2ner" in requirements.split()
    out = run(python, "-c", (
        "import spacy\n"
        "from spacy_w2ner import get_entities\n"
        "nlp = spacy.load('en_w2ner_test')\n"
        "doc = nlp('She had pain in her knees and ankles .')\n"
        "for e in get_entities(doc): print(e.label, e.fragments)\n"
    ), cwd=tmp_path)
    assert "SYM ((2, 5), (7, 8))" in out
