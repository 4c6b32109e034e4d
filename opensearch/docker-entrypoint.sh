#!/bin/bash
# Like the official image: every environment variable whose name looks like a setting
# (lower case, with dots, e.g. discovery.type=single-node) becomes an -E option, so the same
# `docker run -e ...` and testcontainers configuration work on this image.
set -euo pipefail
options=()
while IFS= read -r -d '' entry; do
    name=${entry%%=*}
    if [[ $name =~ ^[a-z0-9_]+\.[a-z0-9_.-]+$ ]]; then
        options+=("-E${name}=${entry#*=}")
    fi
done < <(env -0)
# DJL (ml-commons) keeps its engines' native libraries in ENGINE_CACHE_DIR. OpenSearch lets the ml
# plugin write only under the data path, and DJL extracts the tokenizers and onnxruntime libraries
# there at first use; libtorch, which it would download, is linked in from the image. Done at each
# start, so it also works when a volume is mounted on the data path.
if [[ -n ${ENGINE_CACHE_DIR:-} && -d /usr/share/opensearch/djl-engines/pytorch ]]; then
    mkdir -p "$ENGINE_CACHE_DIR"
    ln -sfn /usr/share/opensearch/djl-engines/pytorch "$ENGINE_CACHE_DIR/pytorch"
fi
exec /usr/share/opensearch/bin/opensearch "${options[@]}" "$@"
