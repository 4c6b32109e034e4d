#!/usr/bin/env bash
# Fresh machine to a searchable index of docs/: set-up, a local OpenSearch, the configuration,
# the push, and one question.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
bash scripts/setup.sh --bge   # bge-small-en-v1.5, the second reader beside all-MiniLM-L6-v2
# setup.sh installs into the active venv, else into .venv, which it makes.
# shellcheck source=/dev/null
[[ -n ${VIRTUAL_ENV:-} ]] || . .venv/bin/activate
loader up
loader apply
loader push docs/
# rerank = auto: without a cross-encoder on this machine (none can be downloaded offline) the
# search says so in one line and keeps fusion order; set reranker_model to a local CrossEncoder
# folder to turn it on.
loader search "Do I get a refund if my order is more than 45 minutes late, and how is it paid?"
