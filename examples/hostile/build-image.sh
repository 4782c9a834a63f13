#!/usr/bin/env bash
# Builds the hostile test job as a static (musl) binary and packs it into a
# local image `mcjs-hostile:latest` FROM scratch, as the trainer's image is.
# Prints the image id (sha256:...) on stdout; everything else goes to stderr.
#
#   examples/hostile/build-image.sh [TAG]
#
# Honours CARGO_TARGET_DIR. Needs `rustup target add x86_64-unknown-linux-musl`.
set -euo pipefail
tag="${1:-mcjs-hostile:latest}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
target="x86_64-unknown-linux-musl"
target_dir="${CARGO_TARGET_DIR:-$root/target}"

# Tests build images from processes running side by side: one build at a
# time per target directory, so that the binary copied below is the one this
# build made (the trainer's two feature sets share one output path).
mkdir -p "$target_dir"
exec 9>"$target_dir/.mcjs-image-build.lock"
flock 9

if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  rustup target add "$target" >&2
fi
(cd "$root" && cargo build --release --locked -p mcjs-hostile --target "$target" >&2)

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
cp "$target_dir/$target/release/mcjs-hostile" "$ctx/mcjs-hostile"
cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY mcjs-hostile /mcjs-hostile
USER 65532:65532
ENTRYPOINT ["/mcjs-hostile"]
DOCKERFILE
DOCKER_BUILDKIT=0 docker build --quiet --tag "$tag" "$ctx" >&2
docker image inspect --format '{{.Id}}' "$tag"
