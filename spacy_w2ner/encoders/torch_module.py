"""The torch module of a pipeline's transformer encoder, found in one place.

The Hugging Face module is its ``hf-pytorch`` node's shim's torch module (``nn.shim.torch_module``);
the commands that read or change a saved pipeline's encoder (``release.optimize``,
``release.model_card``, ``release.measure``) find it here, so that one function knows which node holds it.
"""
import torch
from spacy.language import Language

from ..nn.shim import torch_module
from .transformer import node_named


def encoder_torch_module(nlp: Language, name: str) -> torch.nn.Module:
    """The Hugging Face torch module that component ``name``'s model runs (the shim of its
    ``hf-pytorch`` layer holds it); ValueError naming the component where it has none (not a
    transformer, or not built yet). Changing the module in place changes the pipeline."""
    try:
        module = torch_module(node_named(nlp.get_pipe(name).model, "hf-pytorch").shims[0])
    except (ValueError, IndexError):
        module = None
    if not isinstance(module, torch.nn.Module):
        raise ValueError(f"'{name}' has no Hugging Face encoder")
    return module
