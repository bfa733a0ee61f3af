#!/usr/bin/env bash
# The GPU rows of the README in one command, on a machine with a CUDA build of jax:
#     pip install -e ".[test]" "jax[cuda12]"
#     benchmarks/gpu.sh
# Checks that JAX's default device is a GPU, then runs benchmarks/bench_gpu.py: every row
# in its own process under a compile-time guard (a row whose compilation passes
# --compile-limit s, default 300, is stopped and reported; the next row runs): the XLA
# compile time of the rough-surface kernels on the GPU and on the CPU backend, forward
# model 1000x1000x100, invert 1024x1024x64 float32 and float64, normalize, fit on 1 M
# problems, unmix (both routes), sample where lumaxlike has it; device peak memory per
# row. Writes benchmarks/results/gpu.json (unattended: ~15-30 min on one GPU).
# Extra arguments go to bench_gpu.py (e.g. --rows invert,fit --repeat 5). Checking the
# script without a GPU: LUMAXLIKE_GPU_BENCH_CPU=1 benchmarks/gpu.sh --tiny --json /tmp/gpu.json
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
EXTRA=()
if [ "${LUMAXLIKE_GPU_BENCH_CPU:-0}" = 1 ]; then
    EXTRA+=(--allow-cpu)
else
    "$PYTHON" - <<'PY'
import sys
import jax

device = jax.devices()[0]
print(f"jax {jax.__version__}: default device {device} ({device.device_kind})")
if device.platform != "gpu":
    sys.exit('no GPU visible to jax: pip install -e ".[test]" "jax[cuda12]" (and a CUDA driver)')
PY
    if command -v nvidia-smi > /dev/null; then
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    fi
fi
exec "$PYTHON" benchmarks/bench_gpu.py --json benchmarks/results/gpu.json "${EXTRA[@]}" "$@"
