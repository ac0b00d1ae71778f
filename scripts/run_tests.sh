#!/usr/bin/env bash
# Run every test file in its own pytest process, in parallel; see scripts/run_tests.py.
exec python3 "$(dirname "$0")/run_tests.py" "$@"
