#!/usr/bin/env bash
# Builds the PyTorch example's image without a registry: Debian 12's own
# PyTorch (python3-torch 1.13, CPU) and NumPy, installed into a root file
# system by mmdebstrap from the Debian mirror and imported into the engine,
# then the job contract's package (sdk/python) and examples/pytorch/train.py
# on top. Prints the image id (sha256:...) on stdout; the rest goes to
# stderr.
#
#   examples/pytorch/build-image.sh [TAG]
#
# Cached by content: the root file system under ~/.cache/mcjs/pytorch (keyed
# by this script), the image by a tag keyed by the script, the package and
# the example (mcjs-pytorch:<key>), so a second build with nothing changed
# only looks it up; TAG, if given, names that image too.
# Needs root (mmdebstrap's root mode) and installs mmdebstrap if missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${MCJS_CACHE:-$HOME/.cache/mcjs}/pytorch"
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9

packages="python3-torch,python3-numpy"
suite="bookworm"
base_key=$(printf '%s\n' "$suite" "$packages" "$(sha256sum "$0" | cut -c1-64)" | sha256sum | cut -c1-16)
key=$(cd "$root" && cat "$0" examples/pytorch/train.py $(find sdk/python/src -name '*.py' | sort) | sha256sum | cut -c1-16)
tag="mcjs-pytorch:$key"
# A name of the caller's choosing is given to the image of this content,
# never to an older build under that name.
name_it() {
    if [ -n "${1:-}" ]; then
        docker tag "$tag" "$1" >&2
    fi
    docker image inspect --format '{{.Id}}' "$tag"
}

if docker image inspect "$tag" >/dev/null 2>&1; then
    name_it "${1:-}"
    exit 0
fi

base_tar="$cache/$suite-torch-$base_key.tar"
if [ ! -f "$base_tar" ]; then
    if ! command -v mmdebstrap >/dev/null 2>&1; then
        echo "mcjs: installing mmdebstrap" >&2
        apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >&2
    fi
    echo "mcjs: building Debian $suite with $packages (mmdebstrap, a few minutes once)" >&2
    mmdebstrap --quiet --variant=apt --format=tar --include="$packages" \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        "$suite" "$base_tar.part" >&2
    mv "$base_tar.part" "$base_tar"
fi
base="mcjs-pytorch-base:$base_key"
if ! docker image inspect "$base" >/dev/null 2>&1; then
    docker import "$base_tar" "$base" >&2
fi

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
cp -r "$root/sdk/python/src/mcjs_job" "$ctx/mcjs_job"
cp "$root/examples/pytorch/train.py" "$ctx/train.py"
cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM $base
COPY mcjs_job /usr/lib/python3/dist-packages/mcjs_job
COPY train.py /opt/mcjs/train.py
ENV PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
ENTRYPOINT ["python3", "/opt/mcjs/train.py"]
DOCKERFILE
# The classic builder needs nothing beyond the engine.
DOCKER_BUILDKIT=0 docker build --quiet --tag "$tag" "$ctx" >&2
name_it "${1:-}"
