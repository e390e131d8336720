"""A transformer model whose inference memory does not grow with a document's length, and
whose output can be the mean of the encoder's top layers."""
from functools import partial
from typing import Callable

import torch
from spacy.util import registry
from spacy_transformers.architectures import create_TransformerModel_v3
from thinc.api import Model, NumpyOps
from thinc.layers.pytorchwrapper import forward as pytorch_forward

from ..memory import release_freed_memory
from ..model.types import no_backprop
from ..nn.fused_adam import check_half_dtype, fuse_updates
from ..nn.hf_shim import FusedHFShim


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
    see ``nn.fused_adam``.
    """
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
    encoder = node_named(model, "hf-pytorch")
    for shim in encoder.shims:
        fuse_updates(shim, FusedHFShim, mixed_precision_dtype)
    keep_hidden_states = bool(transformer_config.get("output_hidden_states", False))
    model.replace_node(encoder, _chunked_encoder(encoder, max_spans_per_pass, last_layers, keep_hidden_states))
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
            "convert_inputs": partial(_ask_for_hidden_states, encoder.attrs["convert_inputs"]),
            "convert_outputs": partial(_mean_of_top_layers, encoder.attrs["convert_outputs"]),
            "max_spans_per_pass": max_spans_per_pass,
            "last_layers": last_layers,
            "keep_hidden_states": keep_hidden_states,
        },
    )


def node_named(model: Model, name: str) -> Model:
    """The first node of ``model`` called ``name``; ValueError if there is none."""
    for node in model.walk():
        if node.name == name:
            return node
    raise ValueError(f"spacy_w2ner: no '{name}' layer in the model '{model.name}'")


def _encode_in_chunks(model: Model, wordpieces, is_train: bool):
    """Thinc's PyTorch forward; when predicting, over chunks of spans, each chunk's output
    copied into arrays for all spans as it comes (never all chunks and their concatenation
    at once), then the heap's freed memory given back on the CPU (``memory.py``)."""
    size = model.attrs["max_spans_per_pass"]
    if is_train or len(wordpieces) <= size:
        return pytorch_forward(model, wordpieces, is_train)
    merged: dict = {}
    for first in range(0, len(wordpieces), size):
        output = pytorch_forward(model, wordpieces[first : first + size], False)[0]
        output_type = type(output)
        for key, value in output.items():
            merged[key] = _copy_rows(merged.get(key), value, first, len(wordpieces), key)
        del output
    if isinstance(model.ops, NumpyOps):
        release_freed_memory()
    return output_type(**merged), no_backprop


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
    if isinstance(value, tuple):
        merged = merged or (None,) * len(value)
        return tuple(_copy_rows(m, v, first, total, key) for m, v in zip(merged, value))
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"cannot concatenate the encoder output {key!r} of type {type(value).__name__}")
    if merged is None:
        merged = value.new_empty((total, *value.shape[1:]))
    merged[first : first + len(value)] = value
    return merged
