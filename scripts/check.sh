#!/usr/bin/env bash
# The static checks, before any test runs: the type checker (mypy, configured in pyproject.toml: the packages,
# and the strict flags on contract/ and sim/invariants/), the linter (ruff check), and a reason beside every
# `# type: ignore[code]` (mypy itself insists on the code). Any finding fails.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m mypy
python -m ruff check .
if grep -rnE --include='*.py' '# type: ignore(\[[^]]*\])?[[:space:]]*$' contract faults reference scripts sim targets tests; then
    echo "each # type: ignore above says why on its line: '# type: ignore[code]  # why'" >&2
    exit 1
fi
