#!/bin/sh
# GPU check for a machine with an NVIDIA driver: builds the gpu_probe example and prints
# NVML readings (power, energy counter, P-state, utilisation, SM clock) for N seconds at
# 1 Hz next to nvidia-smi's own, then one `nvidia-smi -q -d POWER`. The two columns
# should agree within a few watts (both read the driver's 1 s power average on Hopper).
#   collectors/examples/gpu-check.sh [seconds]        (default 10; about 1 minute with a cold build)
# Exit status: 0 when the probe ran (even if it found no driver: it says so in one line).
set -eu
cd "$(dirname "$0")/../.."
seconds="${1:-10}"
echo "== driver"
nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv || echo "nvidia-smi failed"
echo "== build"
cargo build -q -p wattson-collectors --example gpu_probe
echo "== probe (${seconds} s)"
"${CARGO_TARGET_DIR:-target}/debug/examples/gpu_probe" "$seconds"
echo "== nvidia-smi -q -d POWER"
nvidia-smi -q -d POWER || true
