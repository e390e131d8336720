"""Spans packed into rows without padding, for training an encoder at the cost of its wordpieces.

A batch of sentences padded to its longest spends the encoder's work on padding (CADEC train
in random batches of 16: 2.66 times their wordpieces); passes of similar length cut that to
1.16 times but run several smaller passes, whose gradients are then added up tensor by tensor.
Packing puts several spans in one row, each attending to itself only (a block-diagonal
attention mask) at its own positions: one pass, no padding but at the rows' ends. The outputs
are unpacked, inside the torch graph, into the shape a padded batch has, so what comes after
the encoder, and the backward pass, do not change.

An encoder packs when it takes position ids and a 3D attention mask (BERT, RoBERTa and MPNet
do): ``packing_offset`` checks once, on a few spans of the first batch, that packed spans get
the vectors a padded pass gives them (and which positions the encoder counts from); one that
does not trains in passes of similar length. ``adapt-encoder`` (``training/adapt``) packs its
masked-LM batches with the same functions.
"""
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

import numpy
import torch
from spacy_transformers.data_classes import WordpieceBatch

# A row holds up to this many wordpieces (or one longer span): attention costs the square of a row.
ROW_TOKENS = 128
# Packed vectors must equal the padded pass's within this (float32 rounding of other shapes).
TOLERANCE = 1e-4


@dataclass
class Layout:
    """Where each span's wordpieces are: ``source`` (flat positions in the packed rows) and
    ``target`` (in the padded batch, of ``shape``: spans x wordpieces), ``first`` (each span's
    first wordpiece in the packed rows)."""

    source: torch.Tensor
    target: torch.Tensor
    first: torch.Tensor
    shape: Tuple[int, int]


@dataclass
class PackedWordpieces(WordpieceBatch):
    """A WordpieceBatch of packed rows: its attention mask is rows x wordpieces x wordpieces."""

    position_ids: Optional[numpy.ndarray] = None
    layout: Optional[Layout] = field(default=None, repr=False)


def rows_of(widths: numpy.ndarray, row_tokens: int = ROW_TOKENS) -> List[List[int]]:
    """The spans (indices) of each row: as few rows of about ``row_tokens`` wordpieces as hold
    them, filled evenly (every row is padded to the fullest), each span in the first row with
    room, longest first."""
    total, longest = int(widths.sum()), int(widths.max())
    count = max(1, -(-total // row_tokens))
    capacity = max(longest, -(-total // count))
    while True:
        rows = _first_fit(widths, capacity)
        if len(rows) <= count:
            return rows
        capacity += max(1, capacity // 32)


def _first_fit(widths: numpy.ndarray, capacity: int) -> List[List[int]]:
    rows: List[List[int]] = []
    room: List[int] = []
    for span in sorted(range(len(widths)), key=lambda i: (-int(widths[i]), i)):
        row = next((r for r, left in enumerate(room) if left >= widths[span]), None)
        if row is None:
            rows.append([])
            room.append(capacity)
            row = len(rows) - 1
        rows[row].append(span)
        room[row] -= int(widths[span])
    return rows


def pack(wordpieces: WordpieceBatch, widths: numpy.ndarray, position_offset: int) -> PackedWordpieces:
    """The spans of ``wordpieces`` (``widths`` wordpieces each) packed into rows."""
    rows = rows_of(widths)
    width = max(int(widths[row].sum()) for row in rows)
    input_ids = numpy.zeros((len(rows), width), dtype=wordpieces.input_ids.dtype)
    segments = numpy.full((len(rows), width), -1)
    positions = numpy.zeros((len(rows), width), dtype="int64")
    types = None if wordpieces.token_type_ids is None else numpy.zeros((len(rows), width), dtype=wordpieces.token_type_ids.dtype)
    source, target, first = [], [], []
    full_width = wordpieces.input_ids.shape[1]
    for r, row in enumerate(rows):
        column = 0
        for span in row:
            n = int(widths[span])
            input_ids[r, column : column + n] = wordpieces.input_ids[span, :n]
            if types is not None:
                types[r, column : column + n] = wordpieces.token_type_ids[span, :n]
            segments[r, column : column + n] = span
            positions[r, column : column + n] = position_offset + numpy.arange(n)
            source.append(r * width + column + numpy.arange(n))
            target.append(span * full_width + numpy.arange(n))
            first.append(r * width + column)
            column += n
    mask = (segments[:, :, None] == segments[:, None, :]) & (segments[:, :, None] >= 0)
    layout = Layout(
        torch.as_tensor(numpy.concatenate(source)), torch.as_tensor(numpy.concatenate(target)),
        torch.as_tensor(first), (len(widths), full_width),
    )  # fmt: skip
    return PackedWordpieces(
        strings=wordpieces.strings, input_ids=input_ids, attention_mask=mask.astype("float32"),
        lengths=wordpieces.lengths, token_type_ids=types, position_ids=positions, layout=layout,
    )  # fmt: skip


def unpack(packed: torch.Tensor, layout: Layout) -> torch.Tensor:
    """Packed rows x wordpieces x width -> the padded batch's spans x wordpieces x width (zeros
    where it pads), by index, in the graph."""
    flat = packed.reshape(-1, packed.shape[-1])
    device = packed.device
    spans, full_width = layout.shape
    unpacked = flat.new_zeros((spans * full_width, packed.shape[-1]))
    unpacked = unpacked.index_put((layout.target.to(device),), flat[layout.source.to(device)])
    return unpacked.view(spans, full_width, packed.shape[-1])


def pooled_output(output, layout: Layout, pooler) -> torch.Tensor:
    """The encoder's pooled output of each packed span: its ``pooler`` on the span's first
    wordpiece of the last layer (ValueError without a pooler)."""
    if pooler is None:
        raise ValueError("cannot pool packed spans: the encoder has no pooler module")
    last = output["last_hidden_state"]
    return pooler(last.reshape(-1, last.shape[-1])[layout.first.to(last.device)].unsqueeze(1))


def unpack_outputs(output, layout: Layout, pooled: Optional[torch.Tensor]):
    """An encoder output of packed rows as a padded batch's: its sequence outputs unpacked, its
    pooled output replaced by ``pooled`` (``pooled_output``). ValueError for another output."""
    fields = {}
    for key, value in output.items():
        if key == "last_hidden_state":
            fields[key] = unpack(value, layout)
        elif key == "hidden_states":
            fields[key] = tuple(unpack(layer, layout) for layer in value)
        elif key == "pooler_output" and pooled is not None:
            fields[key] = pooled
        else:
            raise ValueError(f"cannot unpack the encoder output {key!r}")
    return type(output)(**fields)


def packing_offset(encode: Callable[[WordpieceBatch], object], spans: WordpieceBatch, widths: numpy.ndarray, pad_id: Optional[int]) -> Optional[int]:
    """The position an encoder counts a span's wordpieces from (0, or the padding id + 1: RoBERTa's
    and MPNet's way) when ``spans`` packed get the vectors a padded pass gives them; None when
    they do not, or the encoder takes no position ids or 3D mask. ``encode``: a batch (padded or
    ``PackedWordpieces``) -> the encoder's output (with ``last_hidden_state``, padded shape)."""
    padded = encode(spans)
    scale = max(1.0, float(padded.last_hidden_state.abs().max()))
    for offset in [0] + ([pad_id + 1] if pad_id is not None else []):
        try:
            packed = encode(pack(spans, widths, offset))
        except (ValueError, TypeError, RuntimeError):
            return None
        if largest_difference(packed, padded, widths) <= TOLERANCE * scale:
            return offset
    return None


def largest_difference(a, b, widths: numpy.ndarray) -> float:
    """The largest absolute difference between two encoder outputs' last hidden states, over each
    span's ``widths`` wordpieces (what a padded pass computes at its padding is never used)."""
    real = torch.as_tensor(numpy.arange(a.last_hidden_state.shape[1])[None, :] < widths[:, None])
    return float((a.last_hidden_state - b.last_hidden_state).abs()[real].max())
