"""The corpus readers' former path: they live in ``spacy_w2ner.formats.readers`` (this name still works)."""
from .formats.readers import *  # noqa: F401,F403
