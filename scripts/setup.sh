#!/usr/bin/env bash
# Installs what MCJS needs on a fresh machine (sourced by test.sh and demo.sh):
# a C compiler, the musl target for the trainer's and the hostile test job's
# static images, a running Docker engine; checks the kernel has openat2.

need() { command -v "$1" >/dev/null 2>&1; }
say() { echo "mcjs-test: $*" >&2; }

if ! need cargo; then
    say "cargo is not installed; install Rust 1.95 with rustup (https://rustup.rs)"
    exit 2
fi
if ! need cc; then
    say "installing a C compiler (gcc) for the fake NVML library and -sys crates"
    apt-get update -qq && apt-get install -y -qq gcc >/dev/null
fi
if need rustup && ! rustup target list --installed | grep -qx x86_64-unknown-linux-musl; then
    say "adding the x86_64-unknown-linux-musl target (static trainer image)"
    rustup target add x86_64-unknown-linux-musl
fi
# The agent reads what jobs write only through openat2 (Linux 5.6+).
kernel="$(uname -r)"; major="${kernel%%.*}"; rest="${kernel#*.}"; minor="${rest%%.*}"
if [ "$major" -lt 5 ] || { [ "$major" -eq 5 ] && [ "$minor" -lt 6 ]; }; then
    say "kernel $kernel has no openat2 (needs Linux 5.6+): the agent cannot read job output safely"
    exit 2
fi
# The agent bounds each run's disk with a loop-mounted ext4 image
# (mcjs_runtime::volume): mkfs.ext4 from e2fsprogs, mount from util-linux.
if ! need mkfs.ext4 || ! need mount; then
    say "installing e2fsprogs and mount (jobs' disks are loop-mounted images of their declared size)"
    apt-get update -qq && apt-get install -y -qq e2fsprogs mount >/dev/null
fi
if ! need docker; then
    say "installing the Docker client and engine (docker.io)"
    apt-get update -qq && apt-get install -y -qq docker.io >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
    say "starting the Docker engine"
    (dockerd >/tmp/mcjs-dockerd.log 2>&1 &)
    for _ in $(seq 1 30); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { say "no Docker engine: see /tmp/mcjs-dockerd.log"; exit 2; }
fi
if ! need chromium || ! need chromedriver; then
    say "installing Debian's chromium and chromium-driver (the dashboard's browser test, over WebDriver)"
    apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null
fi
# Network UPS Tools: the HAL's UPS test drives a real upsd from its
# dummy-ups driver (on line, on battery, low battery).
if [ ! -x /lib/nut/upsd ] || [ ! -x /lib/nut/dummy-ups ]; then
    say "installing Network UPS Tools (nut-server: upsd and the dummy-ups driver, for the UPS test)"
    apt-get update -qq && apt-get install -y -qq nut-server >/dev/null
fi
# PyTorch for the job contract's Python package tests (sdk/python/tests/
# test_torch.py runs examples/pytorch/train.py): Debian's own build (1.13,
# CPU) for Debian's python3, no registry or wheel index needed.
if ! /usr/bin/python3 -c "import torch, numpy" >/dev/null 2>&1; then
    say "installing Debian's python3-torch and python3-numpy (the PyTorch example's tests, about 3 minutes)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch python3-numpy >/dev/null
fi
# pytest runs the job contract's package tests (sdk/python/tests), from
# Debian like the rest of its Python.
if ! /usr/bin/python3 -c "import pytest" >/dev/null 2>&1; then
    say "installing Debian's python3-pytest (the job contract's package tests)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pytest >/dev/null
fi
# The S3-compatible server the demo and the fault suite store into (a real
# S3 endpoint, not a mock): s3s-fs, built once into cargo's bin dir. 0.14.1
# is the last release that builds with Rust 1.95.
if ! need s3s-fs && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/s3s-fs" ]; then
    say "installing the s3s-fs S3 server (cargo install s3s-fs@0.14.1, about 3 minutes)"
    cargo install s3s-fs@0.14.1 --features binary --locked --quiet
fi
