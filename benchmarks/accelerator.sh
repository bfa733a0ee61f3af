#!/usr/bin/env bash
# The accelerator rows in one command, on whatever JAX's default device is (a GPU or a
# TPU), on a machine with jax's accelerator build (README: "On a GPU or TPU"):
#     benchmarks/accelerator.sh
# Runs benchmarks/bench_accelerator.py: its parent never imports JAX (one process at a
# time can hold a TPU); every row runs in a new process, then its first call again in a
# second new process (the persistent compilation cache's effect), one process at a time.
# Writes benchmarks/results/accelerator-<device kind>.json (e.g. accelerator-tpu-v5-lite.json).
# Refuses a CPU (exit 2) unless --allow-cpu. Extra arguments go to bench_accelerator.py,
# e.g. --rows invert_f32,fit --repeat 5; checking the script on a CPU:
#     benchmarks/accelerator.sh --allow-cpu --quick --json /tmp/accelerator.json
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
exec "$PYTHON" benchmarks/bench_accelerator.py "$@"
