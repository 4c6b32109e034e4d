#!/usr/bin/env bash
# Rewrites constraints.txt, the versions scripts/setup.sh installs and CI tests, from a fresh
# install of the newest versions pyproject.toml allows: a venv of its own (removed after), set up
# by `scripts/setup.sh --tests` with LOADER_CONSTRAINTS=none, then `pip freeze`. Run .ci/run on
# the result before committing it.
set -euo pipefail
cd "$(dirname "$0")/.."

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
python3 -m venv "$scratch/venv"
# shellcheck source=/dev/null
. "$scratch/venv/bin/activate"
LOADER_CONSTRAINTS=none bash scripts/setup.sh --tests
python=$(python3 -c 'import platform; print(platform.python_version(), platform.machine())')
{
    echo "# The versions scripts/setup.sh installs (--constraint, to uv or pip) and .ci/run tests: every package"
    echo "# of a fresh 'scripts/setup.sh --tests' install, frozen on $(date -u +%F) with Python $python."
    echo "# Refresh: bash scripts/refresh-constraints.sh (a fresh venv, the newest versions"
    echo "# pyproject.toml allows, pip freeze), then .ci/run. LOADER_CONSTRAINTS=none installs the"
    echo "# newest versions instead of these."
    # setuptools stays (torch and llama-index-core require it); pip is the venv's own.
    python3 -m pip freeze --all --exclude-editable --disable-pip-version-check |
        grep -v -E '^(pip|loader)(==| @)'
} >"$scratch/constraints.txt"
mv "$scratch/constraints.txt" constraints.txt
echo "constraints.txt: $(grep -c '==' constraints.txt) pins"
