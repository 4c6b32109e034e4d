#!/usr/bin/env bash
# Build the project's OpenSearch image without any container registry.
#
#   opensearch/build-image.sh [--force]
#   OPENSEARCH_VARIANT=secure opensearch/build-image.sh [--force]
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
# The secure variant is the test node with the security plugin (opensearch/secure/): k-NN,
# neural-search and opensearch-security, TLS certificates made here with openssl, per-tenant
# document-level security. The security plugin and neural-search are both on Maven Central only
# at 2.19.1.0 (security: 2.11.1.0, 2.19.1.0, 2.19.3.0, 2.19.4.0, 3.4.0.0; neural-search: 2.19.1.0,
# 3.6.0.0), so it is OpenSearch 2.19.1 on a JDK 17, whose integ-test-zip lacks the modules
# lang-painless, lang-mustache, analysis-common and ingest-common: they are assembled from their
# Maven jars.
#
# Environment: OPENSEARCH_VARIANT (main or secure), OPENSEARCH_VERSION (3.6.0),
# OPENSEARCH_IMAGE (loader-opensearch:<version>), OPENSEARCH_JDK (a JDK 21+ on this machine);
# for the secure variant OPENSEARCH_SECURE_VERSION (2.19.1), OPENSEARCH_SECURE_IMAGE
# (loader-opensearch-secure:<version>), OPENSEARCH_SECURE_JDK (the JDK 17 apt's maven brings);
# LOADER_CACHE_DIR (~/.cache/loader), MAVEN_REPO_LOCAL (~/.m2/repository).
set -euo pipefail

variant=${OPENSEARCH_VARIANT:-main}
case $variant in
    main)
        version=${OPENSEARCH_VERSION:-3.6.0}
        image=${OPENSEARCH_IMAGE:-loader-opensearch:${version}}
        jdk=${OPENSEARCH_JDK:-/usr/lib/jvm/temurin-25-jdk-amd64}
        ;;
    secure)
        version=${OPENSEARCH_SECURE_VERSION:-2.19.1}
        image=${OPENSEARCH_SECURE_IMAGE:-loader-opensearch-secure:${version}}
        jdk=${OPENSEARCH_SECURE_JDK:-/usr/lib/jvm/java-17-openjdk-amd64}
        ;;
    *) echo "OPENSEARCH_VARIANT must be main or secure, not $variant" >&2; exit 1 ;;
esac
cache=${LOADER_CACHE_DIR:-${HOME}/.cache/loader}
suite=bookworm
base_image=loader-debian-base:${suite}
here=$(cd "$(dirname "$0")" && pwd)

# An image is reused only when it was built from the files it would be built from now: a digest
# of this directory (Dockerfiles, configuration, entrypoints, pinned artifacts, this script; the
# main image leaves secure/ out) and of the variant, version and JDK is the image's label.
# Otherwise a machine that built the image once would keep an image whose opensearch.yml is old.
inputs=$(
    cd "$here"
    if [[ $variant == main ]]; then
        files=$(find . -type f -not -path './secure/*')
    else
        files=$(find . -type f)
    fi
    echo "$files" | LC_ALL=C sort | xargs sha256sum
    echo "$variant $version $jdk"
)
inputs=$(sha256sum <<<"$inputs" | cut -c1-16)
built_from=$(docker image inspect -f '{{index .Config.Labels "loader.build-inputs"}}' "$image" 2>/dev/null || true)
if [[ ${1:-} != --force && $built_from == "$inputs" ]]; then
    echo "image $image is up to date (pass --force to rebuild)"
    exit 0
fi
[[ -x $jdk/bin/java ]] || { echo "no JDK at $jdk: set OPENSEARCH_JDK (secure: OPENSEARCH_SECURE_JDK)" >&2; exit 1; }
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
if [[ $variant == secure ]]; then
    security_zip=$(fetch "org.opensearch.plugin:opensearch-security:${version}.0:zip")
    plugin_zips=("$knn_zip" "$neural_zip" "$security_zip")
else
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
    plugin_zips=("$knn_zip" "$neural_zip" "$job_scheduler_zip" "$ml_zip")
fi

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
cp "$here/docker-entrypoint.sh" "$context/"
if [[ $variant == secure ]]; then
    cp "$here/secure/Dockerfile" "$here/secure/opensearch.yml" "$context/"
    cp "$here/secure/docker-entrypoint.sh" "$context/secure-entrypoint.sh"
else
    cp "$here/Dockerfile" "$here/opensearch.yml" "$context/"
fi
# Dereferenced: a distribution's JDK (Debian's) links into /etc and /usr/share; broken links
# (its src.zip) are dropped.
cp -a "$jdk" "$context/jdk"
find "$context/jdk" -type l -print0 | while IFS= read -r -d '' link; do
    target=$(readlink -f "$link" || true)
    rm "$link"
    if [[ -n $target && -e $target ]]; then cp -rL "$target" "$link"; fi
done
unzip -q "$core_zip" -d "$context"
mv "$context/opensearch-${version}" "$context/opensearch"

# Some integ-test-zips (2.19.1, 3.4.0) hold only the transport modules; the project needs
# lang-painless (k-NN extends it), lang-mustache (search templates), analysis-common (the english
# analyzer) and ingest-common (the set processor). Each is assembled from its Maven jars.
add_module() {  # name classname extended-plugins coordinate... (the module's jar first)
    local name=$1 classname=$2 extended=$3 dir=$context/opensearch/modules/$1 coordinate
    shift 3
    mkdir -p "$dir"
    for coordinate in "$@"; do cp "$(fetch "$coordinate")" "$dir/"; done
    printf '%s\n' "description=$name module, assembled from Maven Central jars by build-image.sh" \
        "version=$version" "name=$name" "classname=$classname" "java.version=11" \
        "opensearch.version=$version" "extended.plugins=$extended" "has.native.controller=false" \
        >"$dir/plugin-descriptor.properties"
    if [[ -f $here/secure/modules/$name/plugin-security.policy ]]; then
        cp "$here/secure/modules/$name/plugin-security.policy" "$dir/"
    fi
}
if [[ ! -d $context/opensearch/modules/lang-painless ]]; then
    [[ $version == 2.19.1 ]] || { echo "core $version lacks lang-painless & co: list their jars in build-image.sh" >&2; exit 1; }
    add_module lang-painless org.opensearch.painless.PainlessPlugin "" \
        "org.opensearch.plugin:lang-painless:$version:jar" \
        "org.opensearch.plugin:opensearch-scripting-painless-spi:$version:jar" \
        org.antlr:antlr4-runtime:4.13.1:jar org.ow2.asm:asm:9.7:jar org.ow2.asm:asm-util:9.7:jar \
        org.ow2.asm:asm-tree:9.7:jar org.ow2.asm:asm-commons:9.7:jar org.ow2.asm:asm-analysis:9.7:jar
    add_module lang-mustache org.opensearch.script.mustache.MustachePlugin "" \
        "org.opensearch.plugin:lang-mustache-client:$version:jar" \
        com.github.spullara.mustache.java:compiler:0.9.14:jar
    add_module analysis-common org.opensearch.analysis.common.CommonAnalysisPlugin lang-painless \
        "org.opensearch.plugin:analysis-common:$version:jar"
    add_module ingest-common org.opensearch.ingest.common.IngestCommonPlugin lang-painless \
        "org.opensearch.plugin:ingest-common:$version:jar" \
        "org.opensearch:opensearch-grok:$version:jar" "org.opensearch:opensearch-dissect:$version:jar" \
        org.jruby.joni:joni:2.2.1:jar org.jruby.jcodings:jcodings:1.0.61:jar
fi

# Order matters: a plugin is installed after the plugins it extends.
for zip in "${plugin_zips[@]}"; do
    OPENSEARCH_JAVA_HOME=$jdk "$context/opensearch/bin/opensearch-plugin" install --batch \
        "file://$zip" >/dev/null
done

if [[ $variant == secure ]]; then
    # TLS for transport and REST: a CA made for this build (its key is deleted with the context),
    # a node certificate for localhost / 127.0.0.1 and an admin certificate for securityadmin.sh.
    config=$context/opensearch/config
    certs=$context/certs
    mkdir -p "$certs"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/O=loader/OU=loader/CN=loader-test-ca" \
        -keyout "$certs/root-ca-key.pem" -out "$config/root-ca.pem" 2>/dev/null
    for name in node admin; do
        openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$config/$name-key.pem" 2>/dev/null
        openssl req -new -key "$config/$name-key.pem" -subj "/O=loader/OU=loader/CN=$name" \
            -out "$certs/$name.csr"
        extensions=$certs/$name.ext
        if [[ $name == node ]]; then
            printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:node" \
                "extendedKeyUsage=serverAuth,clientAuth" >"$extensions"
        else
            printf '%s\n' "extendedKeyUsage=clientAuth" >"$extensions"
        fi
        openssl x509 -req -in "$certs/$name.csr" -CA "$config/root-ca.pem" -CAkey "$certs/root-ca-key.pem" \
            -CAcreateserial -days 3650 -sha256 -extfile "$extensions" -out "$config/$name.pem" 2>/dev/null
    done
    rm -rf "$certs"
    cp "$here"/secure/security/*.yml "$config/opensearch-security/"
else
    # ml-commons sets PYTORCH_PRECXX11=true, so DJL looks for the "cpu-precxx11" flavour; PyTorch 2.x
    # builds use one C++ ABI throughout, so the cpu libtorch and its matching JNI serve it.
    torch_dir=$context/djl-engines/pytorch/${torch_version}-cpu-precxx11-linux-x86_64
    mkdir -p "$torch_dir"
    unzip -q -j "$torch_zip" 'pytorch/cpu/linux-x86_64/*' -d "$torch_dir"
    unzip -q -p "$torch_jni_jar" jnilib/linux-x86_64/cpu/libdjl_torch.so \
        >"$torch_dir/${djl_version}-libdjl_torch.so"
fi
docker build --quiet --build-arg "BASE_IMAGE=$base_image" --label "loader.build-inputs=$inputs" \
    -t "$image" "$context" >/dev/null
echo "built $image: OpenSearch $version with $(ls "$context/opensearch/plugins" | tr '\n' ' ')"
