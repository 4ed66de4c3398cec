#!/usr/bin/env bash
# Sets up everything maestro needs on a fresh machine: a project-local virtual environment with
# the pinned dependencies (constraints.txt) and maestro itself installed in editable mode.
# Idempotent: a second run only checks that the environment is complete.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.maestro-installed
want="$(cat pyproject.toml constraints.txt maestro/domains/sandbox/_native.c | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    .venv/bin/python -m pip install --quiet --upgrade "pip>=24"
    # llama-cpp-python builds from source (about 5 minutes once; pip caches the wheel). A
    # portable build: the CPU features of the build machine are not assumed.
    CMAKE_ARGS="-DGGML_NATIVE=OFF" .venv/bin/python -m pip install --quiet -c constraints.txt -e ".[dev,train]"
    # BFCL's data, API classes and checker (maestro import bfcl): without its pinned dependencies
    # (model SDKs, torch extras); what its multi-turn code imports (mpmath) is in pyproject.toml.
    .venv/bin/python -m pip install --quiet --no-deps -c constraints.txt bfcl-eval
    # OpenEnv's server and client (maestro serve-openenv): without gradio, which its pinned
    # requirements pull in for a web UI; what its modules import is in the train extra.
    .venv/bin/python -m pip install --quiet --no-deps -c constraints.txt openenv-core
    echo "$want" > "$stamp"
fi
