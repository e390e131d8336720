"""spacy-transformers' HFShim with w2ner's fused optimizer step and half dtype (``fused_adam.py``).

A module of its own so that importing ``fused_adam`` does not import spacy-transformers, and so
that the class pickles by name (``spacy_w2ner.nn.hf_shim.FusedHFShim``).
"""
from spacy_transformers.layers.hf_shim import HFShim

from .fused_adam import FusedUpdate


class FusedHFShim(FusedUpdate, HFShim):
    """HFShim whose ``finish_update`` is one fused Adam step over the encoder's tensors."""
