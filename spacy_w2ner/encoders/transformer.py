"""A transformer model whose inference memory does not grow with a document's length, and
whose output can be the mean of the encoder's top layers."""
from functools import partial
from typing import Callable, List

import numpy
import torch
from spacy.util import registry
from spacy_transformers.architectures import create_TransformerModel_v3
from spacy_transformers.data_classes import WordpieceBatch
from thinc.api import ArgsKwargs, Model, NumpyOps
from thinc.layers.pytorchwrapper import forward as pytorch_forward

from ..grid.segments import group_by_length
from ..memory.heap import release_freed_memory
from ..model.padding import padding_limit
from ..model.types import no_backprop
from ..nn.bfloat16 import check_dtypes, use_bfloat16
from ..nn.cuda_graphs import SEQUENCE_OUTPUTS, GraphedEncoder, attach_graphs
from ..nn.shim import check_half_dtype, fuse_updates, torch_module
from ..nn.hf_shim import FusedHFShim, Int8HFShim
from ..nn.int8 import check_patterns
from ..nn.transfers import to_device
from .assets import check_encoder_found
from .packing import PackedWordpieces, pack, packing_offset, pooled_output, unpack_outputs
from .wordpieces import transformer_forward


@registry.architectures("spacy_w2ner.ChunkedTransformerModel.v1")
def chunked_transformer_model(
    name: str,
    get_spans: Callable,
    tokenizer_config: dict = {},
    transformer_config: dict = {},
    mixed_precision: bool = False,
    grad_scaler_config: dict = {},
    max_spans_per_pass: int = 64,
    last_layers: int = 1,
    mixed_precision_dtype: str = "float16",
    pack_spans: bool = True,
    training_pass_wordpieces: int = 1024, training_dtype: str = "float32", inference_dtype: str = "float32",
) -> Model:
    """spacy-transformers' ``TransformerModel.v3`` that runs at most ``max_spans_per_pass``
    spans through the encoder at once when predicting, whose output can be the mean of the
    encoder's ``last_layers`` top layers, and whose training memory is bounded too.

    spacy-transformers encodes all the strided spans of a batch of docs in one forward pass,
    so one 50,000-token doc (about 500 spans of 128 tokens) holds the activations of every
    span at once. Here inference runs the spans in chunks of similar length, each cut to its
    own longest span (CADEC's test set padded to each batch's longest was 3.4 times its
    wordpieces), the outputs concatenated: the same vectors in bounded memory. Training packs
    the spans into rows, and encodes a large batch in recomputed passes
    (``_set_training_passes``: ``pack_spans``, ``training_pass_wordpieces``).

    ``last_layers`` > 1 replaces ``last_hidden_state`` by the mean of the top ``last_layers``
    hidden layers (the reference W2NER's ``use_bert_last_4_layers``), in the torch graph.

    Built from ``TransformerModel.v3`` with public APIs only: its encoder node (``hf-pytorch``)
    is replaced (``Model.replace_node``) by one with the same name, shim and weights, and its
    forward (``Model.replace_callbacks``) by one that tokenizes and aligns a batch with fewer
    host calls, and cuts a span over the encoder's length into halves that fit where
    ``TransformerModel.v3`` drops its last word pieces (``wordpieces.py``); the node tree and
    the serialized weights are ``TransformerModel.v3``'s. Its shim updates the encoder in one fused
    optimizer step, and ``mixed_precision`` autocasts to ``mixed_precision_dtype`` ("bfloat16": no loss
    scaling unless ``grad_scaler_config`` turns it on); see ``nn.shim``; ``training_dtype`` and
    ``inference_dtype``: ``nn.bfloat16``. ``nlp.replace_listeners``: ``listener_replaced_config``.
    """
    if max_spans_per_pass < 1:
        raise ValueError(f"max_spans_per_pass must be at least 1, got {max_spans_per_pass}")
    if last_layers < 1:
        raise ValueError(f"last_layers must be at least 1, got {last_layers}")
    check_half_dtype(mixed_precision_dtype)
    grad_scaler_config = {"enabled": bool(mixed_precision) and mixed_precision_dtype == "float16", **grad_scaler_config}
    model = create_TransformerModel_v3(
        name, get_spans, tokenizer_config, transformer_config, mixed_precision, grad_scaler_config
    )
    encoder = node_named(model, "hf-pytorch")
    for shim in encoder.shims:
        fuse_updates(shim, FusedHFShim, mixed_precision_dtype)
    keep_hidden_states = bool(transformer_config.get("output_hidden_states", False))
    chunked = _chunked_encoder(encoder, max_spans_per_pass, last_layers, keep_hidden_states)
    use_bfloat16(chunked.shims, check_dtypes(training_dtype, inference_dtype, mixed_precision), chunked.attrs, "encoder")
    chunked.attrs["loss_scaling"] = bool(grad_scaler_config["enabled"])
    _set_training_passes(chunked, pack_spans, training_pass_wordpieces)
    model.replace_node(encoder, chunked)
    model.replace_callbacks(transformer_forward, init=_checking_the_encoder_is_found(model.init))
    model.attrs["replace_listener_cfg"] = listener_replaced_config
    return model


def _checking_the_encoder_is_found(init: Callable) -> Callable:
    """spacy-transformers' init, which reads the encoder's files by the model's ``name``: first a
    clear AssetError where they are not on this machine (``assets.NOT_FOUND``; loading a saved
    pipeline does not need them)."""

    def initialize(model: Model, X=None, Y=None):
        check_encoder_found(model.attrs["name"])
        return init(model, X, Y)

    return initialize


REPLACED_LISTENER = "spacy_w2ner.ChunkedTok2VecTransformer.v1"


def listener_replaced_config(transformer_cfg: dict, listener_cfg: dict) -> dict:
    """The config ``nlp.replace_listeners`` writes in a listener's place: this model's config block
    and the listener's pooling (``listener.chunked_tok2vec_transformer``). spacy-transformers' own
    names its ``Tok2VecTransformer.v3`` beside settings it does not take: the saved pipeline
    would not load."""
    config = {"@architectures": REPLACED_LISTENER, "transformer": dict(transformer_cfg)}
    for key in ("pooling", "grad_factor", "max_tokens_per_pass"):
        if key in listener_cfg:
            config[key] = listener_cfg[key]
    return config


@registry.architectures("spacy_w2ner.ChunkedTransformerModel.v2")
def chunked_transformer_model_v2(
    name: str,
    get_spans: Callable,
    tokenizer_config: dict = {},
    transformer_config: dict = {},
    mixed_precision: bool = False,
    grad_scaler_config: dict = {},
    max_spans_per_pass: int = 64,
    last_layers: int = 1,
    mixed_precision_dtype: str = "float16",
    int8_layers: List[str] = [],
    pack_spans: bool = True,
    training_pass_wordpieces: int = 1024, training_dtype: str = "float32", inference_dtype: str = "float32",
) -> Model:
    """``ChunkedTransformerModel.v1`` whose encoder's Linear layers that ``int8_layers`` matches
    (regular expressions over the layer names, ``re.search``) are int8 for CPU inference
    (``nn.int8``): what ``python -m spacy_w2ner optimize`` writes, so that the saved pipeline
    rebuilds itself on load. ``int8_layers = []`` is v1. An int8 encoder predicts on a CPU only
    and does not train."""
    patterns = check_patterns(int8_layers)
    if patterns and mixed_precision:
        raise ValueError("int8_layers and mixed_precision do not go together: int8 layers run on a CPU only")
    if patterns and inference_dtype != "float32":
        raise ValueError("int8_layers and inference_dtype = \"bfloat16\" do not go together: choose one (optimize measures both)")
    model = chunked_transformer_model(
        name, get_spans, tokenizer_config, transformer_config, mixed_precision, grad_scaler_config,
        max_spans_per_pass, last_layers, mixed_precision_dtype, pack_spans, training_pass_wordpieces,
        training_dtype, inference_dtype,
    )  # fmt: skip
    if patterns:
        for shim in node_named(model, "hf-pytorch").shims:
            shim.__class__ = Int8HFShim
            shim.int8_layers = tuple(patterns)
    model.attrs["int8_layers"] = patterns
    return model


def _chunked_encoder(encoder: Model, max_spans_per_pass: int, last_layers: int, keep_hidden_states: bool) -> Model:
    """A node like spacy-transformers' encoder (same name, shim, weights) that predicts in chunks
    and averages the top layers."""
    return Model(
        encoder.name,
        _encode_in_chunks,
        shims=list(encoder.shims),
        dims={dim: None for dim in encoder.dim_names},
        attrs={
            **encoder.attrs,
            "convert_inputs": _convert_inputs,
            "convert_outputs": partial(_mean_of_top_layers, encoder.attrs["convert_outputs"]),
            "max_spans_per_pass": max_spans_per_pass,
            # How much a prediction pass may be padded before spans of other lengths get a pass
            # of their own (``model.padding.padding_limit``: None is 1.25 on a CPU, no limit
            # on a GPU); the GPU bench sets others.
            "max_pass_padding": None,
            # Prediction passes on a GPU replayed from CUDA graphs (``nn/cuda_graphs.py``); off
            # until a GPU's figures decide, the GPU bench turns it on.
            "cuda_graphs": False,
            "last_layers": last_layers,
            "keep_hidden_states": keep_hidden_states,
        },
    )


def _set_training_passes(chunked: Model, pack_spans: bool, training_pass_wordpieces: int) -> None:
    """``pack_spans``: training packs a batch's spans into rows (``packing.py``) where the encoder
    gives the padded pass's vectors so (probed once); false always pads them.

    ``training_pass_wordpieces``: a training batch of more wordpieces than this (documents: 16
    abstracts are about 6,400) is encoded in passes of at most this many, whose activations are
    recomputed in the backward pass (``_train_recomputing``): the encoder's training memory
    follows one pass (MiniLM about 350 KB a wordpiece, MPNet about 1.2 MB), not the batch, for
    one more forward pass of the encoder. Smaller batches (sentences) train as before; 0 never
    recomputes."""
    if not pack_spans:
        chunked.attrs["packs"] = False
    if training_pass_wordpieces < 0:
        raise ValueError(f"training_pass_wordpieces must be 0 (off) or more, got {training_pass_wordpieces}")
    chunked.attrs["training_pass_wordpieces"] = training_pass_wordpieces


def node_named(model: Model, name: str) -> Model:
    """The first node of ``model`` called ``name``; ValueError if there is none."""
    for node in model.walk():
        if node.name == name:
            return node
    raise ValueError(f"spacy_w2ner: no '{name}' layer in the model '{model.name}'")


# A pass is cut for padding's sake only once it holds this many padded wordpieces: smaller
# passes cost more in per-call overhead than padding does.
MIN_TOKENS_PER_PASS = 512
# The same when training: a pass's backward costs about twice its forward, so cutting pays off
# sooner (CADEC train, batches of 16 sentences: padding 2.66x their wordpieces in one pass,
# 1.16x in about four, 2.5x less encoder time with MPNet on a CPU).
MIN_TOKENS_PER_TRAINING_PASS = 64


def _encode_in_chunks(model: Model, wordpieces: WordpieceBatch, is_train: bool):
    """Thinc's PyTorch forward over passes of spans of similar length, each pass cut to its own
    longest span (``grid.segments.group_by_length``: padding at most a quarter more than the
    spans' own wordpieces; when predicting, ``max_pass_padding`` times them and at most
    ``max_spans_per_pass`` spans a pass). Padding is masked, so a span's vectors do not depend
    on its pass, and in training neither do the gradients (up to float rounding). When
    predicting, each pass's output is copied into arrays for all spans as it comes (never all
    passes and their concatenation at once), then the heap's freed memory is given back on the
    CPU (``memory.heap``)."""
    if len(wordpieces) == 0:
        return pytorch_forward(model, wordpieces, is_train)
    if not is_train:
        _attach_cuda_graphs(model)
    widths = unpadded_widths(wordpieces.attention_mask)
    limit = model.attrs.get("training_pass_wordpieces", 0)
    if is_train and limit and int(widths.sum()) > limit:
        return _train_recomputing(model, wordpieces, widths, limit)
    if is_train:
        passes = list(group_by_length(widths, _tokens, min_cost=MIN_TOKENS_PER_TRAINING_PASS))
    else:
        passes = list(group_by_length(
            widths, _tokens, max_items=model.attrs["max_spans_per_pass"], min_cost=MIN_TOKENS_PER_PASS,
            max_padding=padding_limit(model.ops, model.attrs["max_pass_padding"]),
        ))  # fmt: skip
    full_width = wordpieces.input_ids.shape[1]
    if len(passes) == 1 and max(widths, default=0) == full_width:
        return pytorch_forward(model, wordpieces, is_train)
    if is_train and _packs(model, wordpieces, widths):
        return pytorch_forward(model, pack(wordpieces, widths, model.attrs["position_offset"]), True)
    if is_train:
        return _train_in_passes(model, wordpieces, widths, passes)
    merged: dict = {}
    for rows in passes:
        rows = numpy.asarray(rows)
        width = int(widths[rows].max())
        output = pytorch_forward(model, _take_spans(wordpieces, rows, width), False)[0]
        output_type = type(output)
        index = to_device(rows, _device_of(output))
        for key, value in output.items():
            merged[key] = _copy_rows(merged.get(key), value, index, (len(wordpieces), full_width), key)
        del output
    if isinstance(model.ops, NumpyOps) and len(wordpieces) > model.attrs["max_spans_per_pass"]:
        release_freed_memory()
    return output_type(**merged), no_backprop


def _attach_cuda_graphs(model: Model) -> None:
    """Give the encoder's shims a ``GraphedEncoder`` once the ``cuda_graphs`` attr is on (its
    prediction passes on a GPU replayed from CUDA graphs), disabled while it is off
    (``attach_graphs``). The graphs keep only the top layers the encoder averages."""
    def make() -> GraphedEncoder:
        return GraphedEncoder(top_layers=None if model.attrs["keep_hidden_states"] else model.attrs["last_layers"])

    attach_graphs(model.shims, model.attrs.get("cuda_graphs", False), make)


def _packs(model: Model, wordpieces: WordpieceBatch, widths: numpy.ndarray) -> bool:
    """Whether this encoder trains on packed spans: decided once (``packing.packing_offset``), on
    a few spans of its first batch, by comparing their packed vectors with a padded pass's."""
    if model.attrs.get("packs") is None:
        sample = numpy.argsort(widths)[: 4]
        spans = _take_spans(wordpieces, sample, int(widths[sample].max()))
        pad_id = getattr(torch_module(model.shims[0]).config, "pad_token_id", None)
        offset = packing_offset(lambda batch: pytorch_forward(model, batch, False)[0], spans, widths[sample], pad_id)
        model.attrs.update(packs=offset is not None, position_offset=offset)
    return model.attrs["packs"]


def _train_in_passes(model: Model, wordpieces: WordpieceBatch, widths: numpy.ndarray, passes: List[List[int]]):
    """The training forward of each pass, their outputs in arrays for all spans (values only: the
    graph stays with each pass); the backward hands each pass its rows of the gradient. With
    float16 loss scaling, whose overflow check covers one backward call, one pass of all spans."""
    if model.attrs["loss_scaling"]:
        return pytorch_forward(model, wordpieces, True)
    shape = (len(wordpieces), wordpieces.input_ids.shape[1])
    merged: dict = {}
    backprops = []
    for rows in passes:
        rows = numpy.asarray(rows)
        width = int(widths[rows].max())
        output, backprop = pytorch_forward(model, _take_spans(wordpieces, rows, width), True)
        output_type = type(output)
        index = to_device(rows, _device_of(output))
        with torch.no_grad():
            for key, value in output.items():
                merged[key] = _copy_rows(merged.get(key), value, index, shape, key)
        backprops.append((index, width, backprop))

    def backprop_passes(d_output):
        device = next(iter(d_output.values())).device
        for index, width, backprop in backprops:
            index = index.to(device)
            backprop(type(d_output)(**{key: value[index, :width] for key, value in d_output.items()}))
        return []

    return output_type(**merged), backprop_passes


def _train_recomputing(model: Model, wordpieces: WordpieceBatch, widths: numpy.ndarray, limit: int):
    """The training forward of a large batch in passes of at most ``limit`` wordpieces (packed
    where the encoder packs), run without keeping their activations: only the outputs are kept,
    in arrays for all spans. The backward pass runs each pass's forward again, with the random
    state its first run had (the same dropout masks), and its backward pass at once, so one
    pass's activations live at a time; then the random state goes back to where it was, so
    what follows draws what it would have drawn. The gradients are those of one pass over the
    batch, to float rounding."""
    shape = (len(wordpieces), wordpieces.input_ids.shape[1])
    packs = _packs(model, wordpieces, widths)
    merged: dict = {}
    passes = []
    for rows in group_by_length(widths, _tokens, max_cost=limit, min_cost=MIN_TOKENS_PER_TRAINING_PASS):
        rows = numpy.asarray(rows)
        width = int(widths[rows].max())
        spans = _take_spans(wordpieces, rows, width)
        spans = pack(spans, widths[rows], model.attrs["position_offset"]) if packs else spans
        state = _random_states()
        with torch.no_grad():
            output = pytorch_forward(model, spans, True)[0]
            output_type = type(output)
            index = to_device(rows, _device_of(output))
            for key, value in output.items():
                merged[key] = _copy_rows(merged.get(key), value, index, shape, key)
        del output
        passes.append((index, width, spans, state))

    def backprop_recomputing(d_output):
        device = next(iter(d_output.values())).device
        after = _random_states()
        for index, width, spans, state in passes:
            _set_random_states(state)
            backprop = pytorch_forward(model, spans, True)[1]
            index = index.to(device)
            backprop(type(d_output)(**{key: value[index, :width] for key, value in d_output.items()}))
        _set_random_states(after)
        return []

    return output_type(**merged), backprop_recomputing


def _random_states():
    """Torch's random states (the CPU's, and the current CUDA device's where there is one)."""
    return torch.get_rng_state(), torch.cuda.get_rng_state() if torch.cuda.is_available() and torch.cuda.is_initialized() else None


def _set_random_states(states) -> None:
    cpu, cuda = states
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state(cuda)


def unpadded_widths(attention_mask) -> numpy.ndarray:
    """Each span's width up to its last attended wordpiece (padding is on the right; a tokenizer
    that pads on the left gets the full width)."""
    attended = numpy.asarray(attention_mask) > 0
    return attended.shape[1] - numpy.argmax(attended[:, ::-1], axis=1)


def _tokens(width: int) -> int:
    return width


def _take_spans(wordpieces: WordpieceBatch, rows: numpy.ndarray, width: int) -> WordpieceBatch:
    """Spans ``rows`` of the batch, their padding cut to ``width`` wordpieces."""
    token_types = wordpieces.token_type_ids
    return WordpieceBatch(
        strings=[wordpieces.strings[row] for row in rows],
        input_ids=wordpieces.input_ids[rows, :width],
        attention_mask=wordpieces.attention_mask[rows, :width],
        lengths=[wordpieces.lengths[row] for row in rows],
        token_type_ids=None if token_types is None else token_types[rows, :width],
    )


def _convert_inputs(model: Model, wordpieces, is_train: bool):
    """The encoder's inputs as spacy-transformers' converter makes them (word pieces, attention
    mask and token types on the transformer's device), copied there without waiting for the
    device (``nn.transfers``: its blocking copies made the host wait for every pass queued
    before); every layer's output asked for when they are averaged, and packed spans given
    their positions (``packing.py``)."""
    device = torch_module(model.shims[0]).device
    kwargs = {"input_ids": to_device(wordpieces.input_ids, device), "attention_mask": to_device(wordpieces.attention_mask, device)}
    if wordpieces.token_type_ids is not None:
        kwargs["token_type_ids"] = to_device(wordpieces.token_type_ids, device)
    if model.attrs["last_layers"] > 1:
        kwargs["output_hidden_states"] = True
    if isinstance(wordpieces, PackedWordpieces):
        kwargs["position_ids"] = to_device(wordpieces.position_ids, device)
    return ArgsKwargs(args=(), kwargs=kwargs), lambda d_inputs: []


def _mean_of_top_layers(convert_outputs: Callable, model: Model, inputs_outputs, is_train: bool):
    """spacy-transformers' output converter, given the mean of the top layers as last_hidden_state
    (and packed spans' outputs unpacked into a padded batch's shape, ``packing.py``)."""
    n_layers = model.attrs["last_layers"]
    wordpieces, output = inputs_outputs
    packed = isinstance(wordpieces, PackedWordpieces)
    pooled = pooled_output(output, wordpieces.layout, _pooler(model)) if packed and "pooler_output" in output else None
    if n_layers > 1:
        hidden_states = output["hidden_states"]
        if n_layers > len(hidden_states) - 1:  # hidden_states[0] is the embedding layer
            raise ValueError(f"last_layers is {n_layers} but the encoder has {len(hidden_states) - 1} layers")
        top = hidden_states[-n_layers:]
        keep = model.attrs.get("keep_hidden_states", False)
        fields = {key: value for key, value in output.items() if keep or key != "hidden_states"}
        fields["last_hidden_state"] = sum(top[1:], top[0]) / n_layers
        output = type(output)(**fields)
    if packed:
        output = unpack_outputs(output, wordpieces.layout, pooled)
    return convert_outputs(model, (wordpieces, output), is_train)


def _pooler(model: Model):
    """The encoder's pooler module (BERT's and MPNet's dense + tanh on the first wordpiece), if any."""
    return getattr(torch_module(model.shims[0]), "pooler", None)


def _device_of(output) -> torch.device:
    """The device of a model output's tensors."""
    return next(value for value in output.values() if isinstance(value, torch.Tensor)).device


def _copy_rows(merged, value, index: torch.Tensor, shape: tuple, key: str):
    """Copy a pass's output (a tensor, or a tuple of them) into rows ``index`` (on the output's
    device) of arrays with one row per span of the batch (``shape``: spans, wordpieces), made on
    the first pass."""
    if isinstance(value, tuple):
        merged = merged or (None,) * len(value)
        return tuple(_copy_rows(m, v, index, shape, key) for m, v in zip(merged, value))
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"cannot concatenate the encoder output {key!r} of type {type(value).__name__}")
    sequence = key in SEQUENCE_OUTPUTS  # zero-filled past each pass's width to the batch's
    if merged is None:
        merged = value.new_zeros((*shape, *value.shape[2:]) if sequence else (shape[0], *value.shape[1:]))
    if sequence:
        merged[index, : value.shape[1]] = value
    else:
        merged[index] = value
    return merged
