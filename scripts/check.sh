#!/usr/bin/env bash
# The static checks, before any test runs: the type checker (mypy, configured in pyproject.toml: the packages,
# and the strict flags on contract/ and sim/invariants/) and the linter (ruff check). Either finding fails.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m mypy
python -m ruff check .
