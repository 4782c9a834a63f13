#!/usr/bin/env bash
# The hardware challenge's GPU backend on a real card: the HAL's NVML reads (the GPUs' PCI
# addresses, their attestation evidence; orchestrator/hal/examples/nvml_check.rs), then the
# GPU's answers against the CPU backend's and the card's figures for bounds::MEASURED
# (orchestrator/challenge/examples/gpu_check.rs). Writes challenge-gpu.txt into $OUT (the
# device tool's return folder) or bench/results.
#
# On a lent GPU machine (no Rust toolchain there), build here and carry the binaries:
#   cargo build --release -p mcjs-challenge --features gpu --example gpu_check
#   cargo build --release -p mcjs-hal --example nvml_check
#   mkdir -p target-device && cp "$CARGO_TARGET_DIR"/release/examples/{gpu,nvml}_check target-device/
#   device: bash bench/gpu-challenge.sh      (carry: target-device)
# Anywhere with CUDA and a toolchain: GPU_CHECK=path/to/gpu_check NVML_CHECK=path/to/nvml_check
# bash bench/gpu-challenge.sh
set -euo pipefail
bin=${GPU_CHECK:-target-device/gpu_check}
nvml_bin=${NVML_CHECK:-target-device/nvml_check}
out=${OUT:-bench/results}
mkdir -p "$out"
[ -x "$bin" ] || { echo "gpu-challenge: no binary at $bin (see the header of $0)" >&2; exit 1; }

# cudarc's 12.x bindings open libnvrtc.so / libcublas.so (or .so.12). Where only CUDA 13's
# .so.13 files exist (the toolkit without its dev links, or pip's nvidia wheels), link them
# under the unversioned names, and put their folders on the loader's path for what they
# load in turn (cublasLt, nvrtc-builtins).
links=$(mktemp -d)
search=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu)
if command -v python3 >/dev/null; then
  while read -r dir; do search+=("$dir/nvidia"); done < <(python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null || true)
fi
path=$links
for lib in nvrtc cublas; do
  found=$(find "${search[@]}" -name "lib$lib.so*" 2>/dev/null | sort | head -1 || true)
  if [ -n "$found" ]; then
    ln -sf "$found" "$links/lib$lib.so"
    path="$path:$(dirname "$found")"
    echo "lib$lib: $found"
  else
    echo "lib$lib: not found under ${search[*]}" >&2
  fi
done
export LD_LIBRARY_PATH="$path:${LD_LIBRARY_PATH:-}"

{
  echo "# $(date -u +%FT%TZ) bench/gpu-challenge.sh"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,pci.bus_id --format=csv 2>&1 || true
  nvidia-smi conf-compute -f 2>&1 || true
  if [ -x "$nvml_bin" ]; then "$nvml_bin" || echo "nvml_check: exit $?"; else echo "nvml_check: no binary at $nvml_bin"; fi
  "$bin" "$@"
} 2>&1 | tee "$out/challenge-gpu.txt"
exit "${PIPESTATUS[0]}"
