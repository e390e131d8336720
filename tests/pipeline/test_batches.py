"""The component's batches: at most ``batch_size`` docs and ``MAX_BATCH_WORDS`` tokens, in order,
and predictions that do not depend on where the batches are cut."""
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc

import spacy_w2ner.memory.batches as memory
from spacy_w2ner.entities import get_entities
from spacy_w2ner.memory.batches import batches_within_words

from ..conftest import TRAIN_DATA, VOCAB


def docs_of(lengths):
    return [Doc(VOCAB, words=["w"] * n) for n in lengths]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=30), st.integers(1, 8), st.integers(1, 60))
def test_batches_keep_order_and_hold_no_more_than_their_docs_and_words(lengths, max_docs, max_words):
    docs = docs_of(lengths)
    batches = list(batches_within_words(iter(docs), max_docs, max_words))
    assert [doc for batch in batches for doc in batch] == docs
    for batch in batches:
        assert 1 <= len(batch) <= max_docs
        # only a doc longer than the budget goes over it, and then alone
        assert sum(map(len, batch)) <= max_words or len(batch) == 1
    # a batch ends early only when the next doc would not fit
    for batch, following in zip(batches, batches[1:]):
        assert len(batch) == max_docs or sum(map(len, batch)) + len(following[0]) > max_words


def test_short_docs_fill_a_batch_and_a_long_one_goes_alone():
    sizes = [[len(doc) for doc in batch] for batch in batches_within_words(docs_of([3, 3, 50, 3, 3, 3]), 10, 8)]
    assert sizes == [[3, 3], [50], [3, 3], [3]]


def test_entities_do_not_depend_on_the_word_budget(trained_nlp, monkeypatch):
    texts = [text for text, _ in TRAIN_DATA] * 3
    whole = [sorted((e.label, e.tokens) for e in get_entities(doc)) for doc in trained_nlp.pipe(texts, batch_size=1000)]
    calls = []
    w2ner = trained_nlp.get_pipe("w2ner")
    predict = w2ner.predict
    monkeypatch.setattr(w2ner, "predict", lambda docs: calls.append(len(docs)) or predict(docs))
    monkeypatch.setattr(memory, "MAX_BATCH_WORDS", 12)
    cut = [sorted((e.label, e.tokens) for e in get_entities(doc)) for doc in trained_nlp.pipe(texts, batch_size=1000)]
    assert len(calls) > 3 and sum(calls) == len(texts)  # the budget cut the batch of 1000 docs
    assert cut == whole and any(whole)
