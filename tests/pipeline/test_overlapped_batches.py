"""``W2NER.overlap_batches``: a batch's scoring queued before the batch before it is decoded."""
import pytest
from spacy.util import raise_error

from spacy_w2ner import get_entities

from ..conftest import HAS_MINILM, TRAIN_DATA, make_examples

TEXTS = [text for text, _ in TRAIN_DATA] * 4


def annotations(nlp, texts, batch_size):
    return [[(e.label, e.tokens, round(e.score, 6)) for e in get_entities(doc)] for doc in nlp.pipe(texts, batch_size=batch_size)]


@pytest.fixture
def w2ner(trained_nlp):
    pipe = trained_nlp.get_pipe("w2ner")
    yield pipe
    pipe.overlap_batches = False
    pipe.set_error_handler(raise_error)


def test_overlapped_batches_find_the_same_entities_in_the_same_order(trained_nlp, w2ner):
    expected = annotations(trained_nlp, TEXTS, 3)
    w2ner.overlap_batches = True
    assert annotations(trained_nlp, TEXTS, 3) == expected
    assert sum(map(len, expected)) > 0
    assert annotations(trained_nlp, TEXTS[:2], 3) == expected[:2]  # one batch only


def events_of_a_pipe(nlp, w2ner, monkeypatch, texts, batch_size):
    """The order in which the batches' scoring is queued, their entities decoded and their docs given out."""
    events = []
    start, decode = w2ner._start_predict, w2ner.entities_from_grids
    monkeypatch.setattr(w2ner, "_start_predict", lambda docs: events.append(("start", docs[0].text)) or start(docs))
    monkeypatch.setattr(w2ner, "entities_from_grids", lambda docs, grids: events.append(("decode", docs[0].text)) or decode(docs, grids))
    for doc in nlp.pipe(texts, batch_size=batch_size):
        events.append(("out", doc.text))
    return events


def test_each_batch_is_queued_before_the_one_before_it_is_decoded(trained_nlp, w2ner, monkeypatch):
    texts = TEXTS[:6]
    w2ner.overlap_batches = True
    events = events_of_a_pipe(trained_nlp, w2ner, monkeypatch, texts, 2)
    first = [texts[0], texts[2], texts[4]]
    assert [event for event in events if event[0] != "out"] == [
        ("start", first[0]), ("start", first[1]), ("decode", first[0]),
        ("start", first[2]), ("decode", first[1]), ("decode", first[2]),
    ]  # fmt: skip
    assert [text for kind, text in events if kind == "out"] == texts
    # the second batch is queued before any doc of the first is given out
    assert events.index(("start", first[1])) < events.index(("out", texts[0]))
    w2ner.overlap_batches = False
    plain = events_of_a_pipe(trained_nlp, w2ner, monkeypatch, texts, 2)
    assert [event for event in plain if event[0] != "out"][:3] == [("start", first[0]), ("decode", first[0]), ("start", first[1])]


@pytest.mark.parametrize("failing", ["_start_predict", "entities_from_grids"])
def test_a_failed_batch_goes_to_the_error_handler_with_its_own_docs(trained_nlp, w2ner, monkeypatch, failing):
    texts = TEXTS[:6]
    expected = annotations(trained_nlp, texts, 2)
    w2ner.overlap_batches = True
    original = getattr(w2ner, failing)

    def fail_on_the_second_batch(docs, *rest):
        if docs[0].text == texts[2]:
            raise ValueError("bad batch")
        return original(docs, *rest)

    monkeypatch.setattr(w2ner, failing, fail_on_the_second_batch)
    handled = []
    w2ner.set_error_handler(lambda name, pipe, docs, error: handled.append((name, [d.text for d in docs], str(error))))
    out = list(trained_nlp.pipe(texts, batch_size=2))
    assert handled == [("w2ner", texts[2:4], "bad batch")]
    assert [doc.text for doc in out] == texts[:2] + texts[4:]
    got = [[(e.label, e.tokens, round(e.score, 6)) for e in get_entities(doc)] for doc in out]
    assert got == expected[:2] + expected[4:]
    w2ner.set_error_handler(raise_error)
    with pytest.raises(ValueError, match="bad batch"):
        list(trained_nlp.pipe(texts, batch_size=2))


@pytest.mark.skipif(not HAS_MINILM, reason="the bundled MiniLM encoder is not installed")
def test_a_transformer_pipeline_scores_each_overlapped_batch_from_its_own_docs(monkeypatch):
    # The project's MiniLM pipeline, its doc_cleaner dropping the transformer's output after
    # w2ner: with batches overlapped, the transformer has run on the next batch before w2ner
    # decodes this one, and each batch's grids are still its own docs' (initialized, not trained:
    # the grids' confidences are the check).
    import spacy

    from ..encoders.test_chunked_transformer import CPU_CONFIG, SMALL_HEAD

    spacy.util.fix_random_seed(0)
    config = spacy.util.load_config(CPU_CONFIG, overrides=SMALL_HEAD, interpolate=True)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    nlp.initialize(lambda: make_examples(nlp))
    assert nlp.pipe_names[-2:] == ["w2ner", "doc_cleaner"]
    w2ner = nlp.get_pipe("w2ner")
    decode = w2ner.entities_from_grids

    def grids_of_a_pipe(texts):
        kept = []

        def keep(docs, segment_grids):
            segment_grids = list(segment_grids)
            kept.extend((docs[segment.doc_index].text, relations, confidences) for segment, relations, confidences in segment_grids)
            return decode(docs, segment_grids)

        monkeypatch.setattr(w2ner, "entities_from_grids", keep)
        docs = list(nlp.pipe(texts, batch_size=2))
        assert [doc.text for doc in docs] == texts and all(doc._.trf_data is None for doc in docs)
        return kept

    texts = [f"Note {i} : {text}" for i, text in enumerate(TEXTS[:7])]
    plain = sorted(grids_of_a_pipe(texts), key=lambda grid: grid[0])  # a batch's grids come by length
    w2ner.overlap_batches = True
    overlapped = sorted(grids_of_a_pipe(texts), key=lambda grid: grid[0])
    assert [text for text, _, _ in overlapped] == [text for text, _, _ in plain] == sorted(texts)
    for (_, relations, confidences), (_, plain_relations, plain_confidences) in zip(overlapped, plain):
        assert (relations == plain_relations).all() and abs(confidences - plain_confidences).max() < 1e-6
    assert len({float(confidences.sum()) for _, _, confidences in plain}) == len(texts)  # the docs' grids differ
