"""Spans packed into rows for training: the rows, the masks and positions, and unpacking."""
import numpy
import pytest
import torch
from spacy_transformers.data_classes import WordpieceBatch

from spacy_w2ner.encoders.packing import ROW_TOKENS, pack, rows_of, unpack


def batch_of(widths, full_width=None):
    full_width = full_width or max(widths)
    ids = numpy.zeros((len(widths), full_width), dtype="int64")
    mask = numpy.zeros((len(widths), full_width), dtype="float32")
    for span, width in enumerate(widths):
        ids[span, :width] = 100 * (span + 1) + numpy.arange(width)
        mask[span, :width] = 1
    return WordpieceBatch(strings=[[]] * len(widths), input_ids=ids, attention_mask=mask, lengths=list(widths), token_type_ids=None)


@pytest.mark.parametrize("widths", [[5], [9, 18, 4, 12], [130, 3, 3], [20] * 30, list(range(1, 60, 3))])
def test_every_span_is_in_one_row_and_the_rows_are_as_few_as_their_width_allows(widths):
    widths = numpy.array(widths)
    rows = rows_of(widths)
    assert sorted(span for row in rows for span in row) == list(range(len(widths)))
    fullest = max(int(widths[row].sum()) for row in rows)
    assert len(rows) == max(1, -(-int(widths.sum()) // ROW_TOKENS))
    assert fullest <= max(int(widths.max()), ROW_TOKENS * 1.25)


def test_packed_spans_attend_to_themselves_at_their_own_positions():
    widths = numpy.array([3, 2, 4])
    packed = pack(batch_of(widths, full_width=6), widths, position_offset=2)
    assert packed.input_ids.shape == (1, 9)
    assert packed.input_ids[0].tolist() == [300, 301, 302, 303, 100, 101, 102, 200, 201]  # longest first
    assert packed.position_ids[0].tolist() == [2, 3, 4, 5, 2, 3, 4, 2, 3]
    blocks = numpy.zeros((9, 9))
    for start, end in ((0, 4), (4, 7), (7, 9)):
        blocks[start:end, start:end] = 1
    assert (packed.attention_mask[0] == blocks).all()


def test_unpacking_puts_each_wordpiece_where_the_padded_batch_has_it_and_gradients_go_back():
    widths = numpy.array([6, 1, 4, 3, 5])
    padded = batch_of(widths, full_width=8)
    packed = pack(padded, widths, position_offset=0)
    values = torch.as_tensor(packed.input_ids, dtype=torch.float32)[..., None].repeat(1, 1, 2).requires_grad_()
    unpacked = unpack(values, packed.layout)
    assert unpacked.shape == (5, 8, 2)
    assert torch.equal(unpacked[..., 0], torch.as_tensor(padded.input_ids * padded.attention_mask, dtype=torch.float32))
    unpacked.sum().backward()
    assert torch.equal(values.grad[..., 0], torch.as_tensor((packed.input_ids > 0).astype("float32")))
