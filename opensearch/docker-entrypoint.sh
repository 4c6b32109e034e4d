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
exec /usr/share/opensearch/bin/opensearch "${options[@]}" "$@"
