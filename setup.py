"""spacy-w2ner: unified (flat, nested, discontinuous) NER for spaCy with W2NER."""
import re
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
# One place for the version: the package's __version__.
VERSION = re.search(r'^__version__ = "([^"]+)"', (HERE / "spacy_w2ner" / "__init__.py").read_text(encoding="utf8"), re.M).group(1)

setup(
    name="spacy-w2ner",
    version=VERSION,
    description=(
        "Unified named entity recognition (flat, nested and discontinuous) for spaCy, "
        "with the W2NER word-word relation grid model"
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf8"),
    long_description_content_type="text/markdown",
    license="MIT",
    # The one Python the tests run on (CI and every benchmark); torch 2.13 needs 3.10, and the test,
    # serving and Label Studio extras (httpx2, FastAPI, starlette) need 3.11.
    python_requires=">=3.11",
    packages=find_packages(include=["spacy_w2ner", "spacy_w2ner.*"]),
    include_package_data=True,
    install_requires=[
        "spacy>=3.8.0,<3.9.0",
        "thinc>=8.3.0,<8.4.0",
        "spacy-transformers>=1.3.0,<1.5.0",
        # The lowest torch the test suite has passed on (2.13.0, CPU). Run the suite on an older one
        # before lowering it: nn/adam.py runs torch's fused Adam on the CPU, which came with 2.4.
        "torch>=2.13",
        "numpy>=1.21",
        "typer>=0.9",
    ],
    extras_require={
        # import-linter: the layers contract in setup.cfg, which the tests run (lint-imports).
        # httpx2, the HTTP client of the serving tests and of starlette's TestClient (bench/scaling.py)
        # from starlette 1.2 on, which deprecates httpx (unmaintained since 2024).
        "test": ["pytest>=7", "hypothesis>=6", "build", "httpx2>=2.17", "starlette>=1.2", "playwright>=1.40", "import-linter==2.17"],
        # Serving over HTTP on this machine (python -m spacy_w2ner serve).
        "serve": ["fastapi>=0.110", "uvicorn>=0.29"],
        # The Label Studio ML backend (python -m spacy_w2ner label-studio-backend): the same web stack.
        # Label Studio itself is an application with its own environment (scripts/label_studio_venv.sh).
        "label-studio": ["fastapi>=0.110", "uvicorn>=0.29"],
        # Annotation, serving and training across processes and machines (--engine ray, train
        # --ray-workers): Ray Data, Ray Serve, Ray Train. Below 2.64, which drops map_batches'
        # remote arguments (max_restarts, max_task_retries: annotate.ray._actor_pool).
        "ray": ["ray[data,serve,train]>=2.60,<2.64"],
        # BioC XML and JSON (convert/export bioc, annotate --output-format bioc).
        "bioc": ["bioc>=2.1,<3"],
        # The documentation site (mkdocs build --strict) and its examples' tests.
        "docs": ["mkdocs-material>=9.5", "mkdocstrings-python>=1.10", "mktestdocs>=0.2", "matplotlib>=3.8"],
    },
    entry_points={
        "spacy_factories": ["w2ner = spacy_w2ner.component:make_w2ner"],
        "spacy_architectures": [
            "spacy_w2ner.W2NER.v1 = spacy_w2ner.model.architecture:build_w2ner_model",
            "spacy_w2ner.ChunkedTransformerModel.v1 = spacy_w2ner.encoders.transformer:chunked_transformer_model",
            "spacy_w2ner.ChunkedTransformerModel.v2 = spacy_w2ner.encoders.transformer:chunked_transformer_model_v2",
            "spacy_w2ner.TransformerListener.v1 = spacy_w2ner.encoders.listener:chunked_transformer_listener",
            "spacy_w2ner.ChunkedTok2VecTransformer.v1 = spacy_w2ner.encoders.listener:chunked_tok2vec_transformer",
        ],
        "spacy_scorers": ["spacy_w2ner.entity_scorer.v1 = spacy_w2ner.scorer:make_entity_scorer"],
        "spacy_loggers": ["spacy_w2ner.ConsoleLogger.v1 = spacy_w2ner.training.progress:console_logger_with_progress"],
        "thinc_layers": ["spacy_w2ner.reduce_max.v1 = spacy_w2ner.encoders.pooling:reduce_max_with_empty"],
        "spacy_readers": [
            "spacy_w2ner.W2NERJsonCorpus.v1 = spacy_w2ner.formats.readers:create_w2ner_json_corpus",
            "spacy_w2ner.DaiCorpus.v1 = spacy_w2ner.formats.readers:create_dai_corpus",
            "spacy_w2ner.ConllCorpus.v1 = spacy_w2ner.formats.readers:create_conll_corpus",
            "spacy_w2ner.BmesCorpus.v1 = spacy_w2ner.formats.readers:create_bmes_corpus",
            "spacy_w2ner.BratCorpus.v1 = spacy_w2ner.formats.readers:create_brat_corpus",
        ],
        "spacy_misc": [
            "spacy_w2ner.bundled_encoder_path.v1 = spacy_w2ner.encoders.assets:bundled_encoder_name",
            "spacy_w2ner.encoder_path.v1 = spacy_w2ner.encoders.assets:encoder_name",
        ],
    },
    classifiers=[
        "Framework :: spaCy",
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
