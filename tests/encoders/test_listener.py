"""The listener's word-piece pooling in training: a batch's docs at once, the numbers of
spacy-transformers' doc-by-doc trfs2arrays (hand-made transformer outputs: no encoder needed)."""
import numpy
import pytest
from spacy_transformers.data_classes import TransformerData, WordpieceBatch
from spacy_transformers.layers.trfs2arrays import forward as trfs2arrays_forward
from thinc.api import reduce_max
from thinc.types import Ragged
from transformers.utils import ModelOutput

from spacy_w2ner.encoders import listener
from spacy_w2ner.encoders.pooling import reduce_max_with_empty


def transformer_data(rng, n_spans: int, span_length: int, token_pieces: list, width: int = 6) -> TransformerData:
    """A doc's transformer output: ``n_spans`` strided spans of ``span_length`` rows, each token
    aligned to the rows ``token_pieces`` lists (a row may serve two tokens, a token two rows)."""
    hidden = rng.normal(size=(n_spans, span_length, width)).astype("float32")
    align = Ragged(
        numpy.asarray([row for rows in token_pieces for row in rows], dtype="int32"),
        numpy.asarray([len(rows) for rows in token_pieces], dtype="int32"),
    )
    return TransformerData(wordpieces=WordpieceBatch.zeros([n_spans * span_length]), model_output=ModelOutput(last_hidden_state=hidden), align=align)


def batch(rng) -> list:
    return [
        transformer_data(rng, 1, 5, [[1], [2, 3], [3], [4]]),
        transformer_data(rng, 2, 4, [[1], [2], [3, 5], [6], [6, 7]]),  # spans overlap: rows 3 and 5
        transformer_data(rng, 1, 3, [[1, 2]]),
    ]


def listener_node(pooling, grad_factor: float = 1.0):
    model = listener.chunked_transformer_listener(pooling, grad_factor=grad_factor)
    return listener.node_named(model, "trfs2arrays")


@pytest.mark.parametrize("grad_factor", [1.0, 0.5])
@pytest.mark.parametrize("make_pooling", [reduce_max, reduce_max_with_empty])
def test_a_training_batch_pools_at_once_with_trfs2arrays_numbers(make_pooling, grad_factor):
    node = listener_node(make_pooling(), grad_factor)
    trf_datas = batch(numpy.random.default_rng(0))
    scatters = []
    real_scatter_add = node.ops.scatter_add
    node.ops.scatter_add = lambda table, indices, values: scatters.append(len(indices)) or real_scatter_add(table, indices, values)

    ours, backprop = node(trf_datas, is_train=True)
    theirs, their_backprop = trfs2arrays_forward(node, trf_datas, True)
    assert [o.shape for o in ours] == [(4, 6), (5, 6), (1, 6)]
    for mine, reference in zip(ours, theirs):
        numpy.testing.assert_array_equal(mine, reference)

    d_outputs = [numpy.random.default_rng(i).normal(size=o.shape).astype("float32") for i, o in enumerate(ours)]
    d_ours = backprop([d.copy() for d in d_outputs])
    assert scatters == [14]  # one scatter-add for the 14 aligned rows of the three docs
    d_theirs = their_backprop([d.copy() for d in d_outputs])
    assert len(d_ours) == len(d_theirs) == 3
    for mine, reference, trf_data in zip(d_ours, d_theirs, trf_datas):
        shape = trf_data.model_output.last_hidden_state.shape
        assert mine.model_output.last_hidden_state.shape == shape
        numpy.testing.assert_array_equal(mine.model_output.last_hidden_state, reference.model_output.last_hidden_state)
        assert mine.align is trf_data.align and mine.wordpieces is trf_data.wordpieces
    # A row two tokens share gets both tokens' gradients (doc 1, row 3 of its first span).
    assert numpy.abs(d_ours[0].model_output.last_hidden_state[0, 3]).sum() > 0


def test_docs_without_aligned_pieces_train_as_spacy_transformers_does():
    """A doc whose tokens have no word pieces (whitespace) or no output at all: the batch goes
    doc by doc, as before (zero vectors, no gradient for the empty doc)."""
    node = listener_node(reduce_max_with_empty())
    rng = numpy.random.default_rng(1)
    whitespace = transformer_data(rng, 1, 3, [[], []])
    empty = TransformerData.empty()
    trf_datas = [*batch(rng), whitespace, empty]
    ours, backprop = node(trf_datas, is_train=True)
    theirs, _ = trfs2arrays_forward(node, trf_datas, True)
    assert [o.shape for o in ours] == [o.shape for o in theirs] == [(4, 6), (5, 6), (1, 6), (2, 6), (0, 0)]
    assert not ours[3].any()
    d_trf_datas = backprop([numpy.ones(o.shape, dtype="float32") for o in ours])
    assert len(d_trf_datas) == 4  # the empty doc has no output, so no gradient
