"""Docs to scored grid batches: the one loop that training, prediction and pictures share.

Batches are scored one at a time, as they are consumed (the flow: the package docstring), and
each consumer reduces the logits its own way: training keeps them with their backprop
(``architecture``), prediction reduces them on their device to argmax and confidence
(``predictions.HostGrids``), pictures to every relation's probability
(``predictions.grid_probabilities``).
"""
from typing import Iterator, List, Optional, Sequence, Tuple

from spacy.tokens import Doc
from thinc.api import Model

from ..grid.segments import Segment, batch_by_cells, segment_docs
from .padding import all_word_vectors, grid_length_multiple, pad_segments, padding_limit, padding_rows
from .types import ScoredBatch, WordVectors


def score_docs(
    model: Model, docs: Sequence[Doc], is_train: bool, regions: Optional[Sequence] = None
) -> Tuple[WordVectors, List[Segment], Iterator[ScoredBatch]]:
    """The docs' word vectors (computed now), their segments (each doc's sentences, or
    ``regions`` where given: ``grid.segments.segment_docs``) and their scored batches (scored
    as consumed)."""
    vectors, backprop = model.get_ref("tok2vec")(docs, is_train)
    words = WordVectors(*all_word_vectors(model.ops, vectors), backprop)
    segments = segment_docs(docs, model.attrs["max_window"], model.attrs["window_overlap"], regions)
    return words, segments, _scored_batches(model, segments, words, is_train)


def _scored_batches(model: Model, segments: List[Segment], words: WordVectors, is_train: bool) -> Iterator[ScoredBatch]:
    grid_scorer = model.get_ref("grid_scorer")
    multiple = grid_length_multiple(model.ops)
    max_padding = padding_limit(model.ops, model.attrs.get("max_grid_padding"))
    for batch in batch_by_cells(segments, model.attrs["max_grid_cells"], max_padding):
        rows = padding_rows(batch, words.first_rows, multiple)
        padded, lengths = pad_segments(model.ops, words.words, batch, rows)
        logits, backprop = grid_scorer((padded, lengths), is_train)
        yield ScoredBatch(batch, rows, logits, backprop)
