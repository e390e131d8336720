"""The Thinc model's padding of segments into grid batches, and its gradients back to the words."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc
from thinc.api import NumpyOps, Ops

from spacy_w2ner.model.padding import add_unpadded, all_word_vectors, pad_segments, padding_limit, padding_rows
from spacy_w2ner.grid.segments import batch_by_cells, segment_docs

from ..conftest import VOCAB

OPS = NumpyOps()
WIDTH = 3


def make_docs(lengths, with_sentences):
    docs = []
    for n in lengths:
        words = [f"w{i}" for i in range(n)]
        starts = [i % 5 == 0 for i in range(n)] if with_sentences else None
        docs.append(Doc(VOCAB, words=words, sent_starts=starts))
    return docs


def looped_padding(vectors, batch):
    """The reference: one slice copy per segment."""
    longest = max(segment.length for segment in batch)
    padded = np.zeros((len(batch), longest, WIDTH), dtype="float32")
    for k, segment in enumerate(batch):
        padded[k, : segment.length] = vectors[segment.doc_index][segment.start : segment.end]
    return padded


@settings(max_examples=100, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 40), min_size=1, max_size=5),
    with_sentences=st.booleans(),
    max_cells=st.sampled_from([64, 400, 10_000]),
)
def test_padding_is_one_gather_equal_to_slice_copies_and_gradients_add_back(lengths, with_sentences, max_cells):
    docs = make_docs(lengths, with_sentences)
    rng = np.random.default_rng(len(lengths))
    vectors = [rng.normal(size=(n, WIDTH)).astype("float32") if n else OPS.alloc2f(0, 0) for n in lengths]
    words, first_rows = all_word_vectors(OPS, vectors)
    assert list(first_rows) == [0, *np.cumsum(lengths)]
    # Windows of 8 overlapping by 3: a word can sit in two segments and get both gradients.
    segments = segment_docs(docs, 8, 3)
    d_words = OPS.alloc2f(*words.shape)
    expected = [np.zeros((n, WIDTH), dtype="float32") for n in lengths]
    for batch in batch_by_cells(segments, max_cells):
        rows = padding_rows(batch, first_rows)
        padded, batch_lengths = pad_segments(OPS, words, batch, rows)
        assert np.array_equal(padded, looped_padding(vectors, batch))
        assert list(batch_lengths) == [segment.length for segment in batch]
        d_padded = rng.normal(size=padded.shape).astype("float32")
        add_unpadded(OPS, d_words, d_padded, rows)
        for k, segment in enumerate(batch):
            expected[segment.doc_index][segment.start : segment.end] += d_padded[k, : segment.length]
    for doc_index, (a, b) in enumerate(zip(first_rows[:-1], first_rows[1:])):
        assert np.allclose(d_words[a:b].reshape(-1), expected[doc_index].reshape(-1), atol=1e-6)


def test_one_doc_is_not_copied():
    vectors = [np.ones((4, WIDTH), dtype="float32")]
    words, first_rows = all_word_vectors(OPS, vectors)
    assert words is vectors[0] and list(first_rows) == [0, 4]


def test_predicting_on_the_cpu_gives_freed_memory_back_every_so_many_cells(trained_nlp, monkeypatch):
    """A long document without sentences is many window batches: the heap is trimmed between
    them (once every RELEASE_CELLS cells), so its resident memory stays flat (memory.heap)."""
    import spacy_w2ner.memory.heap as memory
    import spacy_w2ner.model.architecture as model_module

    trims = []
    monkeypatch.setattr(memory, "release_freed_memory", lambda: trims.append(1))
    w2ner = trained_nlp.get_pipe("w2ner")
    max_window = w2ner.model.attrs["max_window"]
    doc = Doc(trained_nlp.vocab, words=["pain"] * (3 * max_window))  # no sentence boundaries: windows
    cells_per_window = max_window**2
    monkeypatch.setattr(model_module, "RELEASE_CELLS", 2 * cells_per_window)
    batches = w2ner.model.predict([doc])
    windows = sum(len(batch.segments) for batch in batches)
    assert windows >= 4 and all(len(batch.segments) == 1 for batch in batches)
    assert len(trims) == windows // 2
    trims.clear()
    monkeypatch.setattr(model_module, "RELEASE_CELLS", 1)
    w2ner.model.begin_update([doc])  # training keeps its activations: no trim
    assert trims == []


def test_freed_memory_is_given_back_only_where_the_heap_holds_the_grids():
    """On a GPU the grid temporaries are on the device: no trim (it would cost more than a batch)."""
    from spacy_w2ner.memory.heap import ReleaseEvery

    assert ReleaseEvery(NumpyOps(), 10).enabled
    assert not ReleaseEvery(object(), 10).enabled


def test_grid_batches_are_padded_freely_on_a_gpu_and_by_a_quarter_on_a_cpu():
    """max_grid_padding null: 1.25 on NumpyOps, no limit on other ops (a GPU's); a set value wins.
    Segments of 4 to 40 words make two batches at 1.25 and one without a limit."""
    assert padding_limit(NumpyOps(), None) == 1.25
    assert padding_limit(Ops(), None) == float("inf")
    assert padding_limit(Ops(), 2) == padding_limit(NumpyOps(), 2.0) == 2.0
    docs = [Doc(VOCAB, words=["w"] * n) for n in (4, 5, 12, 30, 40)]
    segments = segment_docs(docs, 256, 64)
    on_cpu = list(batch_by_cells(segments, 100_000, padding_limit(NumpyOps(), None)))
    on_gpu = list(batch_by_cells(segments, 100_000, padding_limit(Ops(), None)))
    assert len(on_cpu) == 2 and len(on_gpu) == 1 and sorted(s.length for s in on_gpu[0]) == [4, 5, 12, 30, 40]
    assert len(list(batch_by_cells(segments, 40 * 40 * 3, float("inf")))) == 2  # max_grid_cells still bounds a batch
