#!/usr/bin/env bash
# Label Studio in a virtual environment of its own (.venv-label-studio, gitignored), for the test that
# round-trips our tasks through a real server (tests/formats/test_label_studio_server.py, marked slow;
# skipped without it). Label Studio is an application, not a dependency of spacy-w2ner: about 1 GB
# and a few minutes to install, so CI does not set it up.
#
# The install is checked with `pip show`, not by running `label-studio`: any `label-studio` command
# (`--version` included) goes on to start its development server on 0.0.0.0:8080 and never returns.
# The test starts its own server, bound to 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-label-studio
# sentry-sdk 3 (2026) removed an option Label Studio 1.23 passes at start (TypeError: Unknown
# option 'send_default_pii'); Label Studio asks for >=2.16 with no upper bound.
.venv-label-studio/bin/pip install -q "label-studio==1.23.*" "sentry-sdk>=2.16,<3"
.venv-label-studio/bin/pip show label-studio | grep -E '^(Name|Version):'
