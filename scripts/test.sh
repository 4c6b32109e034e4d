#!/usr/bin/env bash
# The README's test command: the set-up with what only the tests need (scripts/setup.sh
# --tests), then pytest with the Python it installed into (the active venv, else .venv).
# Arguments go to pytest: `bash scripts/test.sh tests/unit -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
# shellcheck source=/dev/null
[[ -n ${VIRTUAL_ENV:-} ]] || . .venv/bin/activate
exec python3 -m pytest "$@"
