#!/usr/bin/env bash
# Builds the Yellowstone gRPC Geyser plugin for the local chain, so that the
# program index can be tested over Yellowstone gRPC
# (orchestrator/localnet/tests/yellowstone.rs). Prints the plugin's path.
#
#   scripts/yellowstone-plugin.sh [--src DIR]
#
# The plugin is a Rust dynamic library the chain loads and calls through a
# Rust trait object, so it must be built with this rustc and against the
# chain's own `agave-geyser-plugin-interface` (surfpool-core 1.6.1: 4.2.2).
# Yellowstone's release for agave 4.2 pins 4.2.0: the pins are moved to
# 4.2.2 and its rust-toolchain file is dropped. The plugin is not on
# crates.io: its source comes from GitHub (or --src, a checkout of the tag).
# About 10 minutes on 2 cores when surfpool's crates are already built
# elsewhere, longer from nothing; the result is cached.
set -euo pipefail
cd "$(dirname "$0")/.."

TAG='v15.1.2+solana.4.2.0'
AGAVE='4.2.2'
cache="${MCJS_CACHE:-$HOME/.cache/mcjs}"
src="$cache/yellowstone-src"
target="$cache/yellowstone-target"
plugin="$target/debug/libyellowstone_grpc_geyser.so"

given=""
while [ $# -gt 0 ]; do
	case "$1" in
	--src) given="$2"; shift 2 ;;
	*) echo "usage: scripts/yellowstone-plugin.sh [--src DIR]" >&2; exit 2 ;;
	esac
done

if [ ! -f "$src/.mcjs-patched" ]; then
	rm -rf "$src"
	if [ -n "$given" ]; then
		cp -r "$given" "$src"
	else
		git clone -q --depth 1 --branch "$TAG" https://github.com/rpcpool/yellowstone-grpc "$src" >&2
	fi
	# The plugin's build script reads its git version.
	[ -d "$src/.git" ] || (cd "$src" && git init -q && git add -A &&
		git -c user.name=mcjs -c user.email=mcjs@localhost commit -qm "$TAG")
	rm -f "$src/rust-toolchain.toml"
	sed -i "s/\"=4\.2\.0\"/\"=$AGAVE\"/" "$src/Cargo.toml"
	# Only the plugin and its messages: the workspace's other members bring
	# Node.js bindings and tools the test does not use.
	python3 - "$src/Cargo.toml" <<'EOF'
import re, sys
path = sys.argv[1]
text = open(path).read()
text = re.sub(r'members = \[[^\]]*\]',
              'members = ["yellowstone-grpc-geyser", "yellowstone-grpc-proto"]', text, count=1)
open(path, "w").write(text)
EOF
	touch "$src/.mcjs-patched"
fi

if [ ! -f "$plugin" ]; then
	echo "mcjs: building the Yellowstone gRPC plugin ($TAG, agave $AGAVE) in $target" >&2
	(cd "$src" && CARGO_TARGET_DIR="$target" cargo build -q -p yellowstone-grpc-geyser --lib >&2)
fi
echo "$plugin"
