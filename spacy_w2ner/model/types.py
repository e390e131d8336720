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


@dataclass(frozen=True)
class LinkThresholds:
    """Probabilities at which a cell is read as a link, instead of the arg-max of its relations.

    ``nnw``: a cell above the diagonal is NNW when P(NNW) >= it; ``thw``: a cell on or below it is
    THW-label, of its most probable label, when P(THW-label) >= it. ``None`` keeps the arg-max
    there; both ``None`` is the arg-max everywhere (the default). The decision rule:
    ``predictions.decided_relations``. A dataclass, so a model's ``attrs`` holding it are not
    saved with its weights: the component's config says what they are.
    """

    nnw: Optional[float] = None
    thw: Optional[float] = None

    def __post_init__(self) -> None:  # ValueError naming the setting where one is no probability
        object.__setattr__(self, "nnw", check_link_threshold("nnw_threshold", self.nnw))
        object.__setattr__(self, "thw", check_link_threshold("thw_threshold", self.thw))

    @property
    def is_argmax(self) -> bool:
        return self.nnw is None and self.thw is None


@dataclass(frozen=True)
class TripletSettings:
    """The grid-level triplet loss's settings (``model.loss.grid_triplet_loss``): its ``weight``
    beside the cross-entropy (0: off), the ``window`` around each anchor cell (``grid.triplets``),
    the ``margin`` and the ``mining`` scheme (``nn.triplet``). Checked by
    ``hyperparameters.triplet_settings``; a dataclass, so not saved with the weights: the config
    decides."""

    weight: float = 0.0
    window: int = 25
    margin: float = 1.0
    mining: str = "centroid"

    @property
    def is_on(self) -> bool:
        return self.weight > 0


@dataclass(frozen=True)
class CellWeights:
    """The cross-entropy's weights of kinds of grid cells beside 1: ``gap_link``, the NNW cells
    that join a discontinuous entity's fragments across its gap (``grid.targets.gold_grids``).
    Checked by ``hyperparameters.cell_weights``; a dataclass, so not saved with the weights: the
    config decides."""

    gap_link: float = 1.0


def check_link_threshold(name: str, value: Any) -> Optional[float]:
    """``value`` as a float if it can be a link threshold (None, or in (0, 1]); ValueError naming ``name`` if not."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must be null (the arg-max) or a probability in (0, 1], got {value!r}")
    return float(value)


def no_backprop(d_outputs):
    """The backprop of a layer called to predict: there is none."""
    raise RuntimeError("spacy_w2ner: a layer called to predict has no backward pass")
