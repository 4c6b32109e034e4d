#!/usr/bin/env bash
# Fresh machine to a searchable index of docs/: set-up, a local OpenSearch, the configuration,
# the push, and one question.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
bash scripts/setup.sh
loader up
loader apply
loader push docs/
# No trained cross-encoder can be downloaded on an offline machine: rerank is off here; set
# reranker_model to a local CrossEncoder folder to turn it on.
loader search --no-rerank \
    "Do I get a refund if my order is more than 45 minutes late, and how is it paid?"
