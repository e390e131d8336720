"""The torch module of a pipeline's transformer encoder, found in one place.

spacy-transformers keeps the Hugging Face module in its shim's private ``_model``; the commands
that read or change a saved pipeline's encoder (``release.optimize``, ``release.model_card``)
find it here, so that one function knows where it is.
"""
import torch
from spacy.language import Language

from .transformer import node_named


def encoder_torch_module(nlp: Language, name: str) -> torch.nn.Module:
    """The Hugging Face torch module that component ``name``'s model runs (the shim of its
    ``hf-pytorch`` layer holds it); ValueError naming the component where it has none (not a
    transformer, or not built yet). Changing the module in place changes the pipeline."""
    try:
        module = node_named(nlp.get_pipe(name).model, "hf-pytorch").shims[0]._model
    except (ValueError, IndexError):
        module = None
    if not isinstance(module, torch.nn.Module):
        raise ValueError(f"'{name}' has no Hugging Face encoder")
    return module
