#!/usr/bin/env bash
# Build the project's OpenSearch image without any container registry.
#
#   opensearch/build-image.sh [--force]
#
# 1. Fetches the OpenSearch core (integ-test-zip) and the k-NN, neural-search, job-scheduler and
#    ml-commons plugin zips from Maven Central with `mvn` (cached in ~/.m2, so a second build
#    downloads nothing), each checked against its SHA-256 pinned in opensearch/artifacts.sha256
#    (the plugin zips are published without checksum files, so Maven cannot check them). ml-commons runs the index's embedding model inside the
#    node (server-side query embedding); it extends job-scheduler, so that is installed first.
# 2. Makes a minimal Debian root filesystem with debootstrap from the mirror this machine's apt
#    uses (cached as a tarball) and imports it as the base image.
# 3. Installs the plugins into the distribution with the host's JDK and builds the image from
#    opensearch/Dockerfile with the JDK copied in.
#
# Environment: OPENSEARCH_VERSION (3.6.0), OPENSEARCH_IMAGE (loader-opensearch:<version>),
# OPENSEARCH_JDK (a JDK 21+ on this machine), LOADER_CACHE_DIR (~/.cache/loader),
# MAVEN_REPO_LOCAL (~/.m2/repository).
set -euo pipefail

version=${OPENSEARCH_VERSION:-3.6.0}
image=${OPENSEARCH_IMAGE:-loader-opensearch:${version}}
jdk=${OPENSEARCH_JDK:-/usr/lib/jvm/temurin-25-jdk-amd64}
cache=${LOADER_CACHE_DIR:-${HOME}/.cache/loader}
suite=bookworm
base_image=loader-debian-base:${suite}
here=$(cd "$(dirname "$0")" && pwd)

if [[ ${1:-} != --force ]] && docker image inspect "$image" >/dev/null 2>&1; then
    echo "image $image exists (pass --force to rebuild)"
    exit 0
fi
[[ -x $jdk/bin/java ]] || { echo "no JDK at $jdk: set OPENSEARCH_JDK to a JDK 21+" >&2; exit 1; }
mkdir -p "$cache"

# --- 1. artifacts -------------------------------------------------------------------------
maven_repo=${MAVEN_REPO_LOCAL:-${HOME}/.m2/repository}
pins=$here/artifacts.sha256
fetch() {  # groupId:artifactId:version:packaging[:classifier] -> path in the local Maven repository
    local coordinate=$1 group artifact ver packaging classifier
    IFS=: read -r group artifact ver packaging classifier <<<"$coordinate"
    local relative=${group//.//}/${artifact}/${ver}/${artifact}-${ver}${classifier:+-$classifier}.${packaging}
    local expected
    expected=$(awk -v path="$relative" '$2 == path {print $1}' "$pins")
    [[ -n $expected ]] || { echo "no pinned SHA-256 for $relative in $pins" >&2; exit 1; }
    if [[ ! -f $maven_repo/$relative ]]; then
        mvn --batch-mode --quiet -Dmaven.repo.local="$maven_repo" dependency:get \
            -Dartifact="$coordinate" -Dtransitive=false >&2
    fi
    local actual
    actual=$(sha256sum "$maven_repo/$relative" | awk '{print $1}')
    if [[ $actual != "$expected" ]]; then
        echo "checksum mismatch for $relative: $actual, pinned $expected" >&2
        exit 1
    fi
    echo "$maven_repo/$relative"
}
core_zip=$(fetch "org.opensearch.distribution.integ-test-zip:opensearch:${version}:zip")
knn_zip=$(fetch "org.opensearch.plugin:opensearch-knn:${version}.0:zip")
neural_zip=$(fetch "org.opensearch.plugin:neural-search:${version}.0:zip")
job_scheduler_zip=$(fetch "org.opensearch.plugin:opensearch-job-scheduler:${version}.0:zip")
ml_zip=$(fetch "org.opensearch.plugin:opensearch-ml-plugin:${version}.0:zip")
# ml-commons runs ONNX models with DJL's onnxruntime engine, which does its pre/post-processing
# NDArray maths (mean pooling, normalisation) on DJL's PyTorch engine; that engine downloads
# libtorch and its JNI library on first use, impossible offline. Both come from Maven Central
# instead, unpacked into the engine cache DJL looks in first (ENGINE_CACHE_DIR, see Dockerfile).
# DJL 0.31.1 (in ml-commons 3.6) wants PyTorch 2.5.1; Maven has its JNI built for DJL 0.32.0
# only, which has the same native interface for what ml-commons calls.
djl_version=0.31.1
torch_version=2.5.1
torch_zip=$(fetch "ai.djl.pytorch:pytorch-native-cpu:${torch_version}:jar:linux-x86_64")
torch_jni_jar=$(fetch "ai.djl.pytorch:pytorch-jni:${torch_version}-0.32.0:jar")

# --- 2. base image --------------------------------------------------------------------------
if ! docker image inspect "$base_image" >/dev/null 2>&1; then
    rootfs_tar=$cache/debian-${suite}-minbase.tar
    if [[ ! -f $rootfs_tar ]]; then
        command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install debootstrap" >&2; exit 1; }
        # The mirror this machine's apt is configured with (never written into the repository).
        mirror=$(grep -rhoE '^(URIs:|deb) +[^ ]+' /etc/apt/sources.list.d/ /etc/apt/sources.list 2>/dev/null \
            | awk '{print $2}' | grep -E '/debian/?$' | head -n 1 || true)
        [[ -n $mirror ]] || { echo "cannot find an apt mirror in /etc/apt" >&2; exit 1; }
        rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
        debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
            || { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        tar -C "$rootfs" -cf "$rootfs_tar.tmp" . && mv "$rootfs_tar.tmp" "$rootfs_tar"
        rm -rf "$rootfs"
    fi
    docker import "$rootfs_tar" "$base_image" >/dev/null
fi

# --- 3. distribution and image --------------------------------------------------------------
context=$(mktemp -d "$cache/context.XXXXXX")
trap 'rm -rf "$context"' EXIT
cp "$here/Dockerfile" "$here/opensearch.yml" "$here/docker-entrypoint.sh" "$context/"
cp -a "$jdk" "$context/jdk"
unzip -q "$core_zip" -d "$context"
mv "$context/opensearch-${version}" "$context/opensearch"
# Order matters: a plugin is installed after the plugins it extends.
for zip in "$knn_zip" "$neural_zip" "$job_scheduler_zip" "$ml_zip"; do
    OPENSEARCH_JAVA_HOME=$jdk "$context/opensearch/bin/opensearch-plugin" install --batch \
        "file://$zip" >/dev/null
done
# ml-commons sets PYTORCH_PRECXX11=true, so DJL looks for the "cpu-precxx11" flavour; PyTorch 2.x
# builds use one C++ ABI throughout, so the cpu libtorch and its matching JNI serve it.
torch_dir=$context/djl-engines/pytorch/${torch_version}-cpu-precxx11-linux-x86_64
mkdir -p "$torch_dir"
unzip -q -j "$torch_zip" 'pytorch/cpu/linux-x86_64/*' -d "$torch_dir"
unzip -q -p "$torch_jni_jar" jnilib/linux-x86_64/cpu/libdjl_torch.so \
    >"$torch_dir/${djl_version}-libdjl_torch.so"
docker build --quiet --build-arg "BASE_IMAGE=$base_image" -t "$image" "$context" >/dev/null
echo "built $image: OpenSearch $version with $(ls "$context/opensearch/plugins" | tr '\n' ' ')"
