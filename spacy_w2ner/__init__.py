"""spacy-w2ner: flat, nested and discontinuous NER for spaCy (W2NER, Li et al. 2022).

The package's layers, highest first. A module imports only its own layer's modules and those of
the layers below it; the layers of one line, joined by "|", import none of each other. This list
is the import contract in setup.cfg, which ``lint-imports`` checks in the tests
(``tests/project/test_layout.py`` also checks that the two lists agree):

* ``__main__``: ``python -m spacy_w2ner``;
* ``cli``: the commands, a module per area;
* ``release`` | ``serve`` | ``label_studio_backend``: what is done to a saved pipeline before it
  ships (``optimize``: int8 or bfloat16 for CPU inference where it measured faster;
  ``model_card``: the README of its wheel); an HTTP service; a Label Studio ML backend that
  pre-annotates and retrains from the corrections;
* ``annotate`` | ``training`` | ``visualize``: documents at any scale; training that resumes
  (``train``, ``adapt-encoder``); pictures;
* ``common``: what every command shares (loading a pipeline, options, engines);
* ``component``: the ``w2ner`` pipe, wiring over the model;
* ``encoders``: word vectors from transformers with bounded memory, where encoders live;
* ``model``: Thinc wiring: ``spacy_w2ner.W2NER.v1``, docs -> scored grids (its docstring states
  the data flow once), the training objective and plan;
* ``grid`` | ``formats`` | ``nn`` | ``scorer``: the grid codec, segments and training targets (numpy
  and spaCy's Doc, no Thinc, no torch); corpus formats <-> Docs (``convert``, ``export``, the
  registered corpus readers); the torch modules and the Thinc shims that run and train them; exact-
  match scores;
* ``entities``: the ``Entity`` type and the ``doc.spans`` contract (``get_entities``, ``set_entities``);
* ``files`` | ``messages`` | ``extras`` | ``memory`` | ``diagnostics``: leaf utilities: files whole
  or absent; error texts; the optional integrations' imports; memory given back and measured;
  warnings counted once.

A document's way through: formats -> Doc -> (encoder -> word vectors) -> segments -> padded
batches -> grid network -> relation grids -> decoded entities -> ``doc.spans`` -> records,
pages and pictures.

Importing the package registers the ``w2ner`` factory, the ``spacy_w2ner.W2NER.v1``
architecture, the ``spacy_w2ner.entity_scorer.v1`` scorer, the corpus readers
(``spacy_w2ner.W2NERJsonCorpus.v1``, ``DaiCorpus.v1``, ``ConllCorpus.v1``, ``BmesCorpus.v1``,
``BratCorpus.v1``) and the encoder paths; the transformer layers register through entry points
when a config names them. ``AnnotateOptions``, ``annotate_dataset`` and ``load_pipeline`` are
imported when first used; the ``annotate`` function is ``spacy_w2ner.annotate.annotate`` (the
name ``spacy_w2ner.annotate`` is its subpackage, which any import of it binds there).
"""
from .component import W2NER, make_w2ner
from .encoders.assets import bundled_encoder_path, encoder_path
from .encoders.pooling import reduce_max_with_empty
from .entities import Entity, get_entities, set_entities
from .formats import readers  # noqa: F401  (registers the corpus readers)
from .model.architecture import build_w2ner_model
from .scorer import score_entities

__version__ = "0.4.0.dev0"  # the code after 0.3.0, not released (CHANGELOG: Unreleased)

# Public names whose modules are imported when first used (they bring pydantic, tqdm, Ray).
_LAZY = {
    "AnnotateOptions": "spacy_w2ner.annotate.options",
    "annotate_dataset": "spacy_w2ner.annotate.ray",
    "load_pipeline": "spacy_w2ner.common",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'spacy_w2ner' has no attribute {name!r}")


__all__ = [
    "W2NER",
    "AnnotateOptions",
    "Entity",
    "annotate_dataset",
    "build_w2ner_model",
    "bundled_encoder_path",
    "encoder_path",
    "get_entities",
    "load_pipeline",
    "make_w2ner",
    "reduce_max_with_empty",
    "score_entities",
    "set_entities",
]
