"""Calls of several sizes in one process: which compile. `fit` and `invert` with
solver="jax", one call per pixel count, each timed, with the XLA compiles it ran.

The JAX solvers compile a set of programs per chunk shape. A call smaller than one chunk
is one chunk rounded up to a power of two up to 64 pixels and to a multiple of 64 above
(`lumaxlike._inverse.chunking.call_chunk`), so calls whose chunks round to one size share
their programs: a region of interest of 50 pixels after one of 40 compiles nothing.

One fresh process (this one), lumaxlike's JAX cache off (``LUMAXLIKE_JAX_CACHE=0``: what
a process compiles, not what it loads from disk). The problems are the benchmarks' own:

- fit: `bench_fit`'s scene, 16 bands x 16 observations, free ("w", "b", "c",
  "roughness"), float64, the default chunk_size (512 pixels);
- invert: `bench_invert`'s cube, 64 bands, float64, the default chunk_size (4096
  pixels).

Per call: pixels, the chunk it ran (pixels), wall seconds, and the XLA compiles it ran
(JAX's ``backend_compile_duration`` events, elementwise helper programs included).

    python benchmarks/bench_call_sizes.py [--sizes 40 50 64 100 120] [--json FILE]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

os.environ["LUMAXLIKE_JAX_CACHE"] = "0"  # before lumaxlike is used: compiles, not loads

import jax

jax.config.update("jax_enable_x64", True)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_fit
import bench_invert
from bench_invert import RESULTS, finish, machine_info

import lumaxlike
from lumaxlike._inverse.albedo.invert import solver_chunk_pixels
from lumaxlike._inverse.chunking import call_chunk
from lumaxlike._inverse.fit.arguments import default_chunk

FREE = bench_fit.FREE_SETS["roughness"]
_compiles = [0]


def _on_duration(event, duration_secs, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        _compiles[0] += 1


def timed(call) -> dict:
    before = _compiles[0]
    start = time.perf_counter()
    call()
    return {"seconds": time.perf_counter() - start, "compiles": _compiles[0] - before}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[40, 50, 64, 100, 120])
    parser.add_argument("--json", type=Path, default=RESULTS / "call_sizes.json")
    args = parser.parse_args(argv)
    jax.monitoring.register_event_duration_secs_listener(_on_duration)
    scene = bench_fit.make_scene(max(args.sizes), 16, 16)
    cube = bench_invert.make_cube(math.isqrt(max(args.sizes) - 1) + 1, 64)  # side^2 >= sizes
    invert_largest = solver_chunk_pixels("jax", 64, cube["refl"].dtype)
    rows = []
    for n in args.sizes:

        def fit_call(n=n):
            lumaxlike.fit(
                *bench_fit.pixels_of(scene, slice(0, n)),
                bench_fit.start_params(FREE),
                free=FREE,
                solver="jax",
                refl_sigma=bench_fit.NOISE_SIGMA,
            )

        def invert_call(n=n):
            pieces = [cube[k][:n] for k in ("refl", "to_sun", "to_sensor", "normal")]
            lumaxlike.invert(*pieces, cube["params"], "jax")

        rows.append(
            {
                "operation": "fit",
                "pixels": n,
                "chunk": default_chunk(None, 16, 16, n, "jax"),
                **timed(fit_call),
            }
        )
        rows.append(
            {
                "operation": "invert",
                "pixels": n,
                "chunk": call_chunk("jax", n, invert_largest),
                **timed(invert_call),
            }
        )
        for row in rows[-2:]:
            print(
                f"{row['operation']:6s} {row['pixels']:5d} pixels, chunk {row['chunk']:5d}: "
                f"{row['seconds']:7.3f} s, {row['compiles']} compiles",
                flush=True,
            )
    report = {"machine": machine_info(), "sizes": args.sizes, "rows": rows}
    finish(report, lambda report: None, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
