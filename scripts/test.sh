#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then runs the checks CI runs: lint, format, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
