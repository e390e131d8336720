"""The registered corpus readers (spacy_w2ner/readers.py), made from the FORMATS table."""
import importlib.metadata
import json

import pytest
import spacy
from spacy.training import Example

from spacy_w2ner import get_entities
from spacy_w2ner.formats import REPAIRED_KEY, FormatError

from ..conftest import NLP, entities, words, write
from ..samples import BMES, BRAT_ANN, BRAT_TEXT, CONLL, DAI, RECORDS


READER_INPUTS = {
    "spacy_w2ner.W2NERJsonCorpus.v1": ("data.json", json.dumps(RECORDS), {}, [2, 2, 0]),
    "spacy_w2ner.DaiCorpus.v1": ("dai.txt", DAI, {}, [2, 0, 2]),
    "spacy_w2ner.ConllCorpus.v1": ("conll.txt", CONLL, {"scheme": "IOB2", "tag_column": 3}, [2, 1, 1]),
    "spacy_w2ner.BmesCorpus.v1": ("x.bmes", BMES, {}, [3, 2]),
    "spacy_w2ner.BratCorpus.v1": ("brat", None, {"tokenizer": "spacy"}, [2]),
}


@pytest.mark.parametrize("name", list(READER_INPUTS))
def test_registered_corpus_readers(tmp_path, name):
    filename, text, options, expected = READER_INPUTS[name]
    if text is None:  # a brat directory
        write(tmp_path / filename, "doc.txt", BRAT_TEXT)
        write(tmp_path / filename, "doc.ann", BRAT_ANN)
        path = tmp_path / filename
    else:
        path = write(tmp_path, filename, text)
    nlp = spacy.blank("zh" if "Bmes" in name else "en")
    corpus = spacy.registry.readers.get(name)(path=str(path), **options)
    examples = list(corpus(nlp))
    assert all(isinstance(eg, Example) for eg in examples)
    assert [len(get_entities(eg.reference, "w2ner")) for eg in examples] == expected
    for eg in examples:
        assert words(eg.predicted) == words(eg.reference)
        assert eg.predicted.text == eg.reference.text
        assert "w2ner" in eg.reference.spans and "w2ner" not in eg.predicted.spans
    assert list(corpus(nlp))[0].reference.text == examples[0].reference.text  # can be read again
    # limit
    assert len(list(spacy.registry.readers.get(name)(path=str(path), limit=1, **options)(nlp))) == 1


def test_brat_corpus_reader_whitespace_tokenizer(tmp_path):
    write(tmp_path, "doc.txt", "No  fever .\n")
    write(tmp_path, "doc.ann", "T1\tSYM 4 9\tfever\n")
    corpus = spacy.registry.readers.get("spacy_w2ner.BratCorpus.v1")(path=tmp_path, tokenizer="whitespace")
    (eg,) = corpus(spacy.blank("en"))
    assert words(eg.predicted) == words(eg.reference) == ["No", " ", "fever", ".", "\n"]
    assert entities(eg.reference) == [("SYM", (2,))]
    assert eg.reference.spans["w2ner"][0].id_ == "T1"


def test_corpus_reader_errors():
    readers = spacy.registry.readers
    with pytest.raises(ValueError, match="'path' is not set"):
        readers.get("spacy_w2ner.DaiCorpus.v1")(path=None)
    with pytest.raises(ValueError, match="unknown tag scheme"):
        readers.get("spacy_w2ner.ConllCorpus.v1")(path="x.txt", scheme="BMES")
    with pytest.raises(ValueError, match="tag_column 0"):
        readers.get("spacy_w2ner.ConllCorpus.v1")(path="x.txt", tag_column=0)
    with pytest.raises(ValueError, match="tokenizer must be 'spacy' or 'whitespace'"):
        readers.get("spacy_w2ner.BratCorpus.v1")(path="x", tokenizer="bert")
    corpus = readers.get("spacy_w2ner.BmesCorpus.v1")(path="/nonexistent/x.bmes")
    with pytest.raises(ValueError, match="does not exist"):
        list(corpus(spacy.blank("zh")))


def test_corpus_reader_malformed_input_raises_format_error(tmp_path):
    path = write(tmp_path, "bad.txt", "a B-X\nb Q-X\n")
    corpus = spacy.registry.readers.get("spacy_w2ner.ConllCorpus.v1")(path=path)
    with pytest.raises(FormatError, match=rf"{path}:2: tag 'Q-X'"):
        list(corpus(NLP))


def test_readers_are_spacy_readers_entry_points():
    points = {ep.name: ep for ep in importlib.metadata.entry_points(group="spacy_readers")}
    for name in READER_INPUTS:
        assert name in points
        assert points[name].load() is spacy.registry.readers.get(name)


CONFIG = """
[paths]
train = null

[corpora]

[corpora.train]
@readers = "spacy_w2ner.ConllCorpus.v1"
path = ${paths.train}
scheme = "IOB1"
tag_column = 3
limit = 0
"""


def test_reader_resolved_from_a_config(tmp_path):
    path = write(tmp_path, "iob1.txt", "EU NNP B-NP I-ORG\nrejects VBZ I-VP O\n\nPeter NNP I-NP I-PER\nSmith NNP I-NP B-PER\n")
    config = spacy.util.load_config_from_str(CONFIG, overrides={"paths.train": str(path)}, interpolate=True)
    corpus = spacy.util.resolve_dot_names(config, ["corpora.train"])[0]
    examples = list(corpus(NLP))
    assert [entities(eg.reference) for eg in examples] == [[("ORG", (0,))], [("PER", (0,)), ("PER", (1,))]]
    assert not any(REPAIRED_KEY in eg.reference.user_data for eg in examples)
    resolved = spacy.util.registry.resolve(config)
    assert [words(eg.reference) for eg in resolved["corpora"]["train"](NLP)] == [["EU", "rejects"], ["Peter", "Smith"]]
    # a bad scheme fails when the config is resolved
    bad = spacy.util.load_config_from_str(CONFIG.replace('"IOB1"', '"BMES"'), overrides={"paths.train": str(path)}, interpolate=True)
    with pytest.raises(ValueError, match="unknown tag scheme 'BMES'"):
        spacy.util.registry.resolve(bad)
    # paths.train left null: a clear error
    with pytest.raises(ValueError, match="'path' is not set"):
        spacy.util.registry.resolve(spacy.util.load_config_from_str(CONFIG, interpolate=True))
