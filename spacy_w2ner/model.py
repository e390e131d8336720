"""The Thinc model: tok2vec -> segments -> padded batches -> PyTorch grid network.

``spacy_w2ner.W2NER.v1`` maps a batch of Docs to a list of ``GridBatch``es: each
holds the segments (sentences or windows, see ``segments.py``) it scores and
their relation logits, shape (segments, longest, longest, relations). The torch
module is built lazily at ``initialize``, once the input width (from tok2vec)
and the number of relations (from the component's labels) are known; the
component keeps both in its cfg and rebuilds the module from them before a saved
pipeline's weights load (``build_for_loading``).
"""
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model, NumpyOps
from thinc.types import ArgsKwargs, Floats2d, Floats3d, Floats4d, Ints1d

from .segments import Segment, batch_by_cells, segment_docs, validate_window
from .shims import check_half_dtype

GRID_SCORER_NAME = "w2ner_grid_scorer"


@dataclass
class GridBatch:
    """Grid scores for a batch of segments, padded to the longest one.

    In training: ``logits`` (segments, longest, longest, relations). When predicting,
    ``predicted`` holds what decoding needs, several times smaller than the logits: the
    argmax relation ids and their probabilities, on their way to the host (``HostGrids``).
    """

    segments: List[Segment]
    logits: Optional[Floats4d] = None
    predicted: Optional["HostGrids"] = None


class HostGrids:
    """Argmax relation ids and their probabilities of a padded batch of grids, for the host.

    Reduced on the logits' device (softmax, max) and copied to the host in one transfer
    that does not wait: on a GPU the copy goes to pinned memory behind the batch's kernels,
    so the device works on the next batch while the host decodes this one. ``arrays``
    waits for the copy.
    """

    def __init__(self, logits) -> None:
        import torch

        confidences, relations = torch.softmax(logits.float(), dim=-1).max(dim=-1)
        packed = torch.stack([confidences, relations.to(confidences.dtype)])  # ids < 2**24: exact
        self._relation_dtype = np.uint8 if logits.shape[-1] <= 256 else np.int16  # kept per window until decoded
        self._ready = None
        if packed.is_cuda:
            self._host = torch.empty(packed.shape, dtype=packed.dtype, pin_memory=True)
            self._host.copy_(packed, non_blocking=True)
            self._ready = torch.cuda.Event()
            self._ready.record()
        else:
            self._host = packed

    def arrays(self) -> Tuple[np.ndarray, np.ndarray]:
        """(relation ids, confidences) as numpy, (segments, longest, longest) each."""
        if self._ready is not None:
            self._ready.synchronize()
            self._ready = None
        host = self._host.numpy()
        return host[1].astype(self._relation_dtype), host[0]


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
) -> Model[List[Doc], List[GridBatch]]:
    """W2NER: word vectors from ``tok2vec``, one relation grid per sentence or window.

    The defaults (the paper's CADEC settings) are in the ``w2ner`` factory's config.
    ``max_window`` bounds the grid side (longer stretches are windowed with
    ``window_overlap`` tokens of overlap); ``max_grid_cells`` bounds segments x
    longest^2 per torch batch. ``nO`` (the number of relations) is set by the
    component from its labels. ``mixed_precision_dtype`` is the autocast dtype of
    ``mixed_precision`` on CUDA: "float16" (with loss scaling) or "bfloat16" (none needed).
    Every setting is checked here, so a bad config fails when the pipeline is created.
    """
    hyper = dict(
        lstm_size=lstm_size,
        dist_emb_size=dist_emb_size,
        region_emb_size=region_emb_size,
        conv_size=conv_size,
        dilations=list(dilations),
        biaffine_size=biaffine_size,
        ffnn_size=ffnn_size,
        input_dropout=input_dropout,
        conv_dropout=conv_dropout,
        output_dropout=output_dropout,
    )
    validate_hyperparameters(hyper)
    validate_window(max_window, window_overlap)
    _check_positive_int("max_grid_cells", max_grid_cells)
    check_half_dtype(mixed_precision_dtype)
    grid_scorer = Model(
        GRID_SCORER_NAME,
        _grid_scorer_forward,
        dims={"nI": None, "nO": nO},
        attrs={
            "hyper": hyper,
            "mixed_precision": mixed_precision,
            "mixed_precision_dtype": mixed_precision_dtype,
            "grad_scaler_config": dict(grad_scaler_config),
        },
    )
    return Model(
        "w2ner",
        _w2ner_forward,
        init=_w2ner_init,
        layers=[tok2vec, grid_scorer],
        refs={"tok2vec": tok2vec, "grid_scorer": grid_scorer},
        attrs={
            "max_window": max_window,
            "window_overlap": window_overlap,
            "max_grid_cells": max_grid_cells,
        },
    )


def validate_hyperparameters(hyper: Dict[str, Any]) -> None:
    """ValueError naming the first setting of the grid network that cannot work."""
    for name in ("lstm_size", "dist_emb_size", "region_emb_size", "conv_size", "biaffine_size", "ffnn_size"):
        _check_positive_int(name, hyper[name])
    if hyper["lstm_size"] % 2:
        raise ValueError(f"lstm_size must be even (two LSTM directions), got {hyper['lstm_size']}")
    dilations = hyper["dilations"]
    if not dilations or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dilations):
        raise ValueError(f"dilations must be a non-empty list of positive ints, got {dilations}")
    for name in ("input_dropout", "conv_dropout", "output_dropout"):
        value = hyper[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")


def _check_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


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


def build_grid_scorer(grid_scorer: Model) -> None:
    """Create the torch module for the grid scorer's dims, once."""
    if grid_scorer.layers:
        return
    from thinc.api import PyTorchGradScaler, PyTorchWrapper_v2, get_torch_default_device

    from .network import GridNetwork

    _single_threaded_torch_in_forked_children()
    from .shims import fuse_updates

    attrs = grid_scorer.attrs
    module = GridNetwork(grid_scorer.get_dim("nI"), grid_scorer.get_dim("nO"), **attrs["hyper"])
    scaler = grad_scaler_settings(
        attrs["grad_scaler_config"],
        attrs["mixed_precision"],
        get_torch_default_device().type,
        attrs.get("mixed_precision_dtype", "float16"),
    )
    wrapper = PyTorchWrapper_v2(
        module,
        convert_inputs=_convert_padded_inputs,
        convert_outputs=_convert_outputs,
        mixed_precision=attrs["mixed_precision"],
        grad_scaler=PyTorchGradScaler(**scaler),
    )
    fuse_updates(wrapper.shims[0], attrs.get("mixed_precision_dtype", "float16"))
    grid_scorer.layers.append(wrapper)  # Thinc: "you can append to it to add layers"


def grad_scaler_settings(
    config: dict, mixed_precision: bool, device_type: str, dtype: str = "float16"
) -> dict:
    """The grad scaler's settings: on by default when mixed precision trains on CUDA in float16.

    Without loss scaling, float16 gradients of small losses underflow to zero; bfloat16
    has float32's range and needs none. Thinc's scaler only works on CUDA tensors, and
    autocast does nothing elsewhere, so on a CPU it stays off. ``enabled`` in
    ``grad_scaler_config`` wins, as in spacy-transformers.
    """
    settings = dict(config)
    settings.setdefault("enabled", bool(mixed_precision) and device_type == "cuda" and dtype == "float16")
    return settings


_FORK_HOOK_REGISTERED = False


def _single_threaded_torch_in_forked_children() -> None:
    """Let forked workers (``nlp.pipe(n_process=...)``) run torch on one thread.

    A child forked after torch used its OpenMP thread pool deadlocks in its first
    parallel op; with one thread per child no pool is touched. The processes
    already give the parallelism.
    """
    global _FORK_HOOK_REGISTERED
    if _FORK_HOOK_REGISTERED or not hasattr(os, "register_at_fork"):
        return
    import torch

    os.register_at_fork(after_in_child=lambda: torch.set_num_threads(1))
    _FORK_HOOK_REGISTERED = True


def grid_scorer_dims(model: Model) -> Dict[str, int]:
    """The dims the torch module is built from (``nI``: word vector width, ``nO``: relations)."""
    grid_scorer = model.get_ref("grid_scorer")
    return {dim: grid_scorer.get_dim(dim) for dim in ("nI", "nO")}


def build_for_loading(model: Model, dims: Dict[str, int]) -> None:
    """Set the grid scorer's dims and build its torch module, so saved weights can load into it."""
    grid_scorer = model.get_ref("grid_scorer")
    for dim, value in dims.items():
        grid_scorer.set_dim(dim, value, force=True)
    build_grid_scorer(grid_scorer)


def legacy_grid_scorer_dims(model: Model, model_bytes: bytes) -> Dict[str, int]:
    """The grid scorer's dims stored inside the model bytes of a pipeline saved by 0.1.0.

    Version 0.1.0 kept them in the model only; later versions keep them in the
    component's cfg. Reads Thinc's serialized node list, for those pipelines alone.
    """
    import srsly

    node_ids = [node.id for node in model.walk()]
    index = node_ids.index(model.get_ref("grid_scorer").id)
    dims = srsly.msgpack_loads(model_bytes)["nodes"][index]["dims"]
    return {dim: dims[dim] for dim in ("nI", "nO")}


def _convert_padded_inputs(model: Model, X: Tuple[Floats3d, Ints1d], is_train: bool):
    from thinc.api import torch2xp, xp2torch
    import torch

    vectors, lengths = X
    vectors_torch = xp2torch(vectors, requires_grad=is_train)
    # On the host: the LSTM's packing reads them there (no copy back from the device).
    lengths_torch = torch.as_tensor(model.ops.to_numpy(lengths), dtype=torch.int64)

    def convert_back(d_inputs: ArgsKwargs) -> Floats3d:
        return torch2xp(d_inputs.args[0])

    return ArgsKwargs(args=(vectors_torch, lengths_torch), kwargs={}), convert_back


def _convert_outputs(model: Model, inputs_outputs, is_train: bool):
    """Thinc's conversion of the logits in training; when predicting, the torch tensor itself
    (``HostGrids`` reduces it on its device, with no round trip through CuPy)."""
    from thinc.layers.pytorchwrapper import convert_pytorch_default_outputs

    if is_train:
        return convert_pytorch_default_outputs(model, inputs_outputs, is_train)
    return inputs_outputs[1], _no_backprop


def _no_backprop(d_outputs):
    raise RuntimeError("the w2ner grid scorer has no backward pass when predicting")


def _grid_scorer_forward(model: Model, X: Tuple[Floats3d, Ints1d], is_train: bool):
    if not model.layers:
        raise ValueError("The w2ner grid scorer was used before initialization")
    return model.layers[0](X, is_train)


def _w2ner_forward(model: Model, docs: List[Doc], is_train: bool):
    tok2vec = model.get_ref("tok2vec")
    grid_scorer = model.get_ref("grid_scorer")
    vectors, backprop_tok2vec = tok2vec(docs, is_train)
    words, first_rows = _all_word_vectors(model.ops, vectors)
    segments = segment_docs(docs, model.attrs["max_window"], model.attrs["window_overlap"])
    outputs: List[GridBatch] = []
    callbacks: List[Tuple[Callable, PaddingRows]] = []
    multiple = grid_length_multiple(model.ops)
    for batch in batch_by_cells(segments, model.attrs["max_grid_cells"]):
        rows = padding_rows(batch, first_rows, multiple)
        padded, lengths = _pad_segments(model.ops, words, batch, rows)
        logits, backprop = grid_scorer((padded, lengths), is_train)
        if is_train:
            outputs.append(GridBatch(batch, logits))
            callbacks.append((backprop, rows))
        else:  # the device goes on with the next batch while this one is copied
            outputs.append(GridBatch(batch, predicted=HostGrids(logits)))

    def backprop(d_logits: List[Floats4d]) -> Any:
        d_words = model.ops.alloc2f(*words.shape)
        for d_batch, (callback, rows) in zip(d_logits, callbacks):
            _add_unpadded(model.ops, d_words, callback(d_batch), rows)
        return backprop_tok2vec([d_words[a:b] for a, b in zip(first_rows[:-1], first_rows[1:])])

    return outputs, backprop


def segment_grids(ops, batches: Sequence[GridBatch]) -> Iterator[Tuple[Segment, np.ndarray, np.ndarray]]:
    """(segment, relation ids, confidences) for every segment of the batches, unpadded (numpy)."""
    from thinc.api import xp2torch

    for batch in batches:
        predicted = batch.predicted if batch.predicted is not None else HostGrids(xp2torch(batch.logits))
        relations, confidences = predicted.arrays()
        for k, segment in enumerate(batch.segments):
            n = segment.length
            yield segment, relations[k, :n, :n], confidences[k, :n, :n]


class PaddingRows(NamedTuple):
    """Index arrays that move a batch of segments' words in one gather: row ``source[i]`` of
    all docs' word vectors goes to row ``padded[i]`` of the batch as (segments x longest) rows."""

    source: np.ndarray
    padded: np.ndarray
    longest: int


def grid_length_multiple(ops) -> int:
    """Grid sides are padded to a multiple of this: 8 on a GPU, where each new shape costs
    kernel selection the first time it is met (the padding is masked: results do not
    change), 1 on a CPU, where padding only costs cells."""
    return 1 if isinstance(ops, NumpyOps) else 8


def _all_word_vectors(ops, vectors: Sequence[Floats2d]) -> Tuple[Floats2d, np.ndarray]:
    """Every doc's word vectors in one array (one copy at most), and each doc's first row (and the end)."""
    first_rows = np.concatenate([[0], np.cumsum([len(v) for v in vectors])]).astype(np.int64)
    if len(vectors) == 1:
        return vectors[0], first_rows
    width = max((v.shape[1] for v in vectors if v.size), default=0)
    return ops.xp.concatenate([v if v.size else ops.alloc2f(0, width) for v in vectors]), first_rows


def padding_rows(batch: Sequence[Segment], first_rows: np.ndarray, multiple: int = 1) -> PaddingRows:
    """The rows that pad a batch of segments to its longest one, rounded up to ``multiple``
    (numpy index arrays)."""
    lengths = np.array([segment.length for segment in batch], dtype=np.int64)
    longest = -(-int(lengths.max()) // multiple) * multiple
    offsets = np.cumsum(lengths) - lengths  # where each segment's words begin in the index arrays
    within = np.arange(int(lengths.sum())) - np.repeat(offsets, lengths)  # word k of its segment
    starts = np.array([first_rows[s.doc_index] + s.start for s in batch], dtype=np.int64)
    padded = np.repeat(np.arange(len(batch)) * longest, lengths) + within
    return PaddingRows(np.repeat(starts, lengths) + within, padded, longest)


def _pad_segments(
    ops, words: Floats2d, batch: Sequence[Segment], rows: PaddingRows
) -> Tuple[Floats3d, Ints1d]:
    """The segments' word vectors padded with zeros to (segments, longest, width): one gather;
    and their lengths (numpy)."""
    width = words.shape[1]
    padded = ops.alloc2f(len(batch) * rows.longest, width)
    padded[ops.asarray1i(rows.padded)] = words[ops.asarray1i(rows.source)]
    lengths = np.array([segment.length for segment in batch], dtype=np.int32)  # stays on the host
    return ops.reshape3f(padded, len(batch), rows.longest, width), lengths


def _add_unpadded(ops, d_words: Floats2d, d_padded: Floats3d, rows: PaddingRows) -> None:
    """Add a padded batch's gradients to the words they came from (overlapping windows add up)."""
    d_flat = ops.reshape2f(d_padded, -1, d_padded.shape[-1])
    ops.scatter_add(d_words, ops.asarray1i(rows.source), d_flat[ops.asarray1i(rows.padded)])


def grid_probabilities(model: Model, docs: List[Doc]) -> List[Tuple[Segment, np.ndarray]]:
    """Every relation's probability on every cell of each segment's grid (for pictures).

    Returns (segment, probs) per segment, probs of shape (n, n, relations) in numpy, as
    the model predicts them. A transformer listener reads the upstream component's output:
    run the pipeline's components before w2ner on the docs first.
    """
    import torch

    tok2vec = model.get_ref("tok2vec")
    grid_scorer = model.get_ref("grid_scorer")
    words, first_rows = _all_word_vectors(model.ops, tok2vec.predict(docs))
    segments = segment_docs(docs, model.attrs["max_window"], model.attrs["window_overlap"])
    grids: List[Tuple[Segment, np.ndarray]] = []
    for batch in batch_by_cells(segments, model.attrs["max_grid_cells"]):
        padded, lengths = _pad_segments(model.ops, words, batch, padding_rows(batch, first_rows))
        logits = grid_scorer.predict((padded, lengths))
        probs = torch.softmax(logits.float(), dim=-1).cpu().numpy()
        grids.extend((segment, probs[k, : segment.length, : segment.length]) for k, segment in enumerate(batch))
    return sorted(grids, key=lambda grid: (grid[0].doc_index, grid[0].start))
