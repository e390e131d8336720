"""``spacy_w2ner.W2NER.v1``: tok2vec and the grid scorer, docs -> a ``GridBatch`` per batch of segments.

The torch module is built lazily at ``initialize``, once the input width (from tok2vec) and the
number of relations (from the component's labels) are known; the component keeps both in its
cfg and rebuilds the module from them before a saved pipeline's weights load
(``grid_scorer.build_for_loading``). The data flow: the package docstring.
"""
from typing import Any, Callable, List, Optional, Sequence

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d, Floats4d

from ..grid.segments import validate_window
from ..memory.heap import ReleaseEvery
from ..nn.bfloat16 import check_dtypes
from ..nn.shim import check_half_dtype
from .batches import score_docs
from .grid_scorer import build_grid_scorer, grid_overflowed, grid_scorer_layer
from .hyperparameters import cell_weights, check_positive_int, grid_padding_setting, triplet_settings, validate_hyperparameters
from .padding import add_unpadded
from .predictions import HostGrids
from .types import GridBatch, LinkThresholds, ScoredBatch


@registry.architectures("spacy_w2ner.W2NER.v1")
def build_w2ner_model(
    tok2vec: Model[List[Doc], List[Floats2d]],
    lstm_size: int,
    dist_emb_size: int,
    region_emb_size: int,
    conv_size: int,
    dilations: List[int],
    biaffine_size: int,
    ffnn_size: int,
    input_dropout: float,
    conv_dropout: float,
    output_dropout: float,
    max_window: int,
    window_overlap: int,
    max_grid_cells: int,
    mixed_precision: bool = False,
    grad_scaler_config: dict = {},
    nO: Optional[int] = None,
    mixed_precision_dtype: str = "float16",
    triplet_weight: float = 0.0,
    triplet_window: int = 25,
    triplet_margin: float = 1.0,
    triplet_mining: str = "centroid",
    gap_link_weight: float = 1.0,
    max_grid_padding: Optional[float] = None, training_dtype: str = "float32", inference_dtype: str = "float32",
) -> Model[List[Doc], List[GridBatch]]:
    """W2NER: word vectors from ``tok2vec``, one relation grid per sentence or window.

    The defaults (the paper's CADEC settings) are in the ``w2ner`` factory's config.
    ``max_window`` bounds the grid side (longer stretches are windowed with ``window_overlap``
    tokens of overlap); ``max_grid_cells`` bounds segments x longest^2 per torch batch and
    ``max_grid_padding`` its padding (``padding.padding_limit``); the component sets ``nO``.
    ``mixed_precision_dtype``: the autocast dtype of ``mixed_precision`` on CUDA, "float16" (with
    loss scaling) or "bfloat16". Training's loss: ``triplet_*``, a grid-level triplet loss beside
    the cross-entropy, off while ``triplet_weight`` is 0 (``model.loss.grid_triplet_loss``);
    ``gap_link_weight``, the cross-entropy's weight on the links across an entity's gaps
    (``grid.targets.gold_grids``); ``training_dtype`` and ``inference_dtype``: ``nn.bfloat16``. Every setting is checked here: a bad config fails when the
    pipeline is created.
    """
    hyper = dict(lstm_size=lstm_size, dist_emb_size=dist_emb_size, region_emb_size=region_emb_size,
                 conv_size=conv_size, dilations=list(dilations), biaffine_size=biaffine_size, ffnn_size=ffnn_size,
                 input_dropout=input_dropout, conv_dropout=conv_dropout, output_dropout=output_dropout)  # fmt: skip
    validate_hyperparameters(hyper)
    validate_window(max_window, window_overlap)
    check_positive_int("max_grid_cells", max_grid_cells)
    check_half_dtype(mixed_precision_dtype)
    triplet = triplet_settings(triplet_weight, triplet_window, triplet_margin, triplet_mining)
    grid_scorer = grid_scorer_layer(nO, hyper, mixed_precision, mixed_precision_dtype, grad_scaler_config,
                                    check_dtypes(training_dtype, inference_dtype, mixed_precision))  # fmt: skip
    return Model(
        "w2ner", _w2ner_forward, init=_w2ner_init, layers=[tok2vec, grid_scorer],
        refs={"tok2vec": tok2vec, "grid_scorer": grid_scorer},
        attrs={
            "max_window": max_window, "window_overlap": window_overlap, "max_grid_cells": max_grid_cells,
            "max_grid_padding": grid_padding_setting(max_grid_padding),
            "triplet": triplet,  # a TripletSettings: read by the component's get_loss, not saved with the weights
            "cell_weights": cell_weights(gap_link_weight),  # a CellWeights: the same
        },
    )


def _w2ner_init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    tok2vec = model.get_ref("tok2vec")
    grid_scorer = model.get_ref("grid_scorer")
    if X is not None:
        tok2vec.initialize(X=X)
    else:
        tok2vec.initialize()
    if not grid_scorer.has_dim("nI"):
        grid_scorer.set_dim("nI", _infer_width(tok2vec, X))
    if not grid_scorer.has_dim("nO"):
        raise ValueError(
            "The w2ner model needs its number of relations (nO) before initialization: "
            "initialize it through the w2ner component, which sets it from the labels"
        )
    build_grid_scorer(grid_scorer)


def _infer_width(tok2vec: Model, X: Optional[List[Doc]]) -> int:
    if tok2vec.has_dim("nO") is True:
        return tok2vec.get_dim("nO")
    if X:
        vectors = tok2vec.predict(X[:1])
        return int(vectors[0].shape[1])
    raise ValueError(
        "Cannot infer the width of the w2ner tok2vec output: initialize with sample docs"
    )


# Predicting on the CPU, freed heap memory goes back to the system once every this many grid
# cells (four 256-token windows): a long document's resident memory stays flat (``memory.heap``).
RELEASE_CELLS = 4 * 256 * 256


def link_thresholds(model: Model) -> Optional[LinkThresholds]:
    """The link thresholds predicting reads cells with (set by the component; ``None``: the arg-max)."""
    return model.attrs.get("link_thresholds")


def _w2ner_forward(model: Model, docs: List[Doc], is_train: bool):
    """Thinc's forward: every grid batch's logits, and one backprop for them all (training then
    holds every batch's activations at once: the component trains with ``GridTrainingStep``)."""
    words, _, batches = score_docs(model, docs, is_train)
    outputs: List[GridBatch] = []
    trained: List[ScoredBatch] = []
    release = ReleaseEvery(model.ops, RELEASE_CELLS)
    thresholds = None if is_train else link_thresholds(model)
    for batch in batches:
        if is_train:
            outputs.append(GridBatch(batch.segments, batch.logits))
            trained.append(batch)
        else:  # the device goes on with the next batch while this one is copied
            outputs.append(GridBatch(batch.segments, predicted=HostGrids(batch.logits, thresholds)))
            cells = len(batch.segments) * batch.rows.longest**2
            del batch  # its logits are freed before the trim
            release.add(cells)

    def backprop(d_logits: List[Floats4d]) -> Any:
        d_words = model.ops.alloc2f(*words.words.shape)
        for d_batch, batch in zip(d_logits, trained):
            add_unpadded(model.ops, d_words, batch.backprop(d_batch), batch.rows)
        first_rows = words.first_rows
        return words.backprop([d_words[a:b] for a, b in zip(first_rows[:-1], first_rows[1:])])

    return outputs, backprop


class GridTrainingStep:
    """A training step's forward and backward passes, one grid batch at a time.

    Thinc's ``begin_update`` keeps every grid batch's activations until the backward pass, so a
    step's memory grows with all the cells of its documents (16 abstracts in 256-token windows:
    two million cells). Here each batch's backward pass runs right after its forward pass and
    its loss (``backprop_each``), the word vectors' gradient accumulating, so a step's grid
    memory follows the largest grid batch (``max_grid_cells``, or one segment's cells where a
    segment is larger), whatever the documents' length. The gradients are those of
    ``begin_update``'s single backward pass (the same dropout masks, drawn in the same order).
    """

    def __init__(self, model: Model, docs: Sequence[Doc], regions: Optional[Sequence] = None) -> None:
        self.model = model
        self.words, self.segments, self._batches = score_docs(model, docs, True, regions)

    @property
    def n_cells(self) -> int:
        """The step's grid cells (each segment's length squared): the loss's normaliser."""
        return sum(segment.length * segment.length for segment in self.segments)

    def backprop_each(self, gradient_of: Callable[[ScoredBatch], Floats4d]) -> None:
        """Score each grid batch, take its logits' gradient from ``gradient_of`` and run its
        backward pass before the next batch is scored; then tok2vec's backward pass. After a
        float16 overflow in any batch (the grid network's loss scaling) the step is skipped
        whole: tok2vec gets no gradient, and the grid network's update skips the step."""
        ops = self.model.ops
        d_words = ops.alloc2f(*self.words.words.shape)
        for batch in self._batches:
            add_unpadded(ops, d_words, batch.backprop(gradient_of(batch)), batch.rows)
            del batch  # its logits and gradient go before the next batch is scored
        if grid_overflowed(self.model.get_ref("grid_scorer")):
            return
        rows = self.words.first_rows
        self.words.backprop([d_words[a:b] for a, b in zip(rows[:-1], rows[1:])])
