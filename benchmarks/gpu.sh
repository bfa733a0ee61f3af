#!/usr/bin/env bash
# The GPU rows of the README in one command, on a machine with a CUDA build of jax:
#     pip install -e ".[test]" "jax[cuda12]"
#     benchmarks/gpu.sh
# Checks that JAX's default device is a GPU, then runs benchmarks/bench_gpu.py (invert
# 1024x1024x64 float32 and float64, fit on 1 M problems, forward model 1000x1000x100;
# compile times and device peak memory) and writes benchmarks/results/gpu.json.
# Extra arguments go to bench_gpu.py (e.g. --json PATH, --repeat N). Checking the
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
