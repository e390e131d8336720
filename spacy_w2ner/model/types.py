"""The data passed between the model's steps (see the package docstring for the flow).

Imports none of its siblings, so every step can import its types without a cycle.
"""
from dataclasses import dataclass
from typing import Any, Callable, List, NamedTuple, Optional

import numpy as np
from thinc.types import Floats2d, Floats4d

from ..grid.segments import Segment


class PaddingRows(NamedTuple):
    """Index arrays that move a batch of segments' words in one gather: row ``source[i]`` of
    all docs' word vectors goes to row ``padded[i]`` of the batch as (segments x longest) rows."""

    source: np.ndarray
    padded: np.ndarray
    longest: int


class WordVectors(NamedTuple):
    """Every doc's word vectors in one array, each doc's first row in it (and the end),
    and tok2vec's backprop (which takes one gradient array per doc)."""

    words: Floats2d
    first_rows: np.ndarray
    backprop: Callable


class ScoredBatch(NamedTuple):
    """A batch of segments, the rows that padded it, the grid scorer's logits and their backprop."""

    segments: List[Segment]
    rows: PaddingRows
    logits: Any
    backprop: Callable


@dataclass
class GridBatch:
    """Grid scores for a batch of segments, padded to the longest one: the model's output.

    In training: ``logits`` (segments, longest, longest, relations). When predicting,
    ``predicted`` holds what decoding needs, several times smaller than the logits: the
    argmax relation ids and their probabilities, on their way to the host
    (a ``predictions.HostGrids``).
    """

    segments: List[Segment]
    logits: Optional[Floats4d] = None
    predicted: Optional[Any] = None


def no_backprop(d_outputs):
    """The backprop of a layer called to predict: there is none."""
    raise RuntimeError("spacy_w2ner: a layer called to predict has no backward pass")
