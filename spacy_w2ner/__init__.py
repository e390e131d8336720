"""spacy-w2ner: flat, nested and discontinuous NER for spaCy (W2NER, Li et al. 2022).

Importing the package registers the ``w2ner`` factory, the
``spacy_w2ner.W2NER.v1`` architecture, the ``spacy_w2ner.entity_scorer.v1``
scorer, the corpus readers (``spacy_w2ner.W2NERJsonCorpus.v1``, ``DaiCorpus.v1``,
``ConllCorpus.v1``, ``BmesCorpus.v1``, ``BratCorpus.v1``) and helpers; torch
modules are only built when a model is initialized.
"""
from .assets import encoder_path
from .component import W2NER, make_w2ner
from .encoders import bundled_encoder_path
from .entities import Entity, get_entities, set_entities
from .model import build_w2ner_model
from .pooling import reduce_max_with_empty
from .formats import readers  # noqa: F401  (registers the corpus readers)
from .scorer import score_entities

__version__ = "0.1.0"

__all__ = [
    "W2NER",
    "Entity",
    "get_entities",
    "set_entities",
    "score_entities",
    "build_w2ner_model",
    "bundled_encoder_path",
    "encoder_path",
    "make_w2ner",
    "reduce_max_with_empty",
]
