"""`spacy package` builds a wheel of a project pipeline that installs offline, sets sentence
boundaries before w2ner, and annotates discontinuous entities."""
import json
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import spacy
from thinc.api import Adam

from ..conftest import make_examples

pytest.importorskip("build", reason="spacy package --build wheel needs the 'build' package")
pytestmark = pytest.mark.slow

CNN_CONFIG = Path(__file__).resolve().parents[2] / "project" / "configs" / "w2ner_cnn_cpu.cfg"
SMALL = {
    "components.w2ner.model.lstm_size": 64,
    "components.w2ner.model.conv_size": 32,
    "components.w2ner.model.biaffine_size": 64,
    "components.w2ner.model.ffnn_size": 64,
}
PARAGRAPH = (
    "She had pain in her knees and ankles . New York University is in New York . "
    "Aspirin caused severe headaches and nausea . Muscle aches in arms and legs after statins ."
)


def run(*args, **kwargs):
    result = subprocess.run([*map(str, args)], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def fresh_environment_seeing_installed_libraries(path: Path) -> Path:
    """A new virtual environment (its own site-packages) that also sees the libraries of the
    environment running the tests, whatever that is: a virtual or conda environment or a system
    Python. ``system_site_packages`` would not do: from inside a virtual environment it shows
    the base interpreter's packages, not the virtual environment's. The running interpreter's
    site directories are added with ``site.addsitedir``, which also reads their ``.pth`` files
    (editable installs)."""
    venv.create(path, with_pip=True)
    python = path / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    own_site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    if site.ENABLE_USER_SITE and Path(site.getusersitepackages()).is_dir():
        parents.append(site.getusersitepackages())
    lines = "".join(f"site.addsitedir({p!r}); " for p in parents)
    (own_site / "_tested_environment.pth").write_text(f"import site; {lines}\n", encoding="utf8")
    return python


def test_packaged_project_pipeline_installs_offline_and_annotates_by_sentence(tmp_path):
    config = spacy.util.load_config(CNN_CONFIG, overrides=SMALL, interpolate=True)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    examples = make_examples(nlp)
    spacy.util.fix_random_seed(0)
    nlp.initialize(lambda: examples)
    optimizer = Adam(1e-3)  # the config's warm-up would still be warming up after 150 steps
    for _ in range(150):
        nlp.update(examples, sgd=optimizer)
    nlp.to_disk(tmp_path / "model")
    (tmp_path / "packages").mkdir()
    run(sys.executable, "-m", "spacy", "package", tmp_path / "model", tmp_path / "packages",
        "--name", "w2ner_test", "--version", "0.0.1", "--build", "wheel", "--force")
    wheel = next((tmp_path / "packages").glob("*/dist/*.whl"))
    python = fresh_environment_seeing_installed_libraries(tmp_path / "env")
    missing = subprocess.run([str(python), "-c", "import en_w2ner_test"], capture_output=True, text=True, cwd=tmp_path)
    assert "No module named 'en_w2ner_test'" in missing.stderr  # the pipeline is not there before
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
        "import json, spacy\n"
        "from spacy_w2ner import get_entities\n"
        "nlp = spacy.load('en_w2ner_test')\n"
        f"doc = nlp({PARAGRAPH!r})\n"
        "print(json.dumps({'pipeline': nlp.pipe_names, 'sentences': [[s.start, s.end] for s in doc.sents],\n"
        "  'entities': [[e.label, list(e.tokens)] for e in get_entities(doc)]}))\n"
    ), cwd=tmp_path)
    result = json.loads(out.strip().splitlines()[-1])
    pipeline = result["pipeline"]
    assert pipeline.index("sentencizer") < pipeline.index("w2ner")
    sentences = result["sentences"]
    assert len(sentences) == 4
    assert ["SYM", [2, 3, 4, 7]] in result["entities"]  # the discontinuous "pain in her ankles"
    for label, tokens in result["entities"]:
        assert any(start <= tokens[0] and tokens[-1] < end for start, end in sentences), (label, tokens)
