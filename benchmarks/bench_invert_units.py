"""Where numba `invert`'s forward-model units go, in CPU time (a shared machine's wall
time is too noisy for this): `invert` against the forward model on the same cube, and two
variants that remove one part of the work each.

The cube: `bench_invert.make_cube` (default 256 x 256 x 64 float64, `FULL_PARAMS`).
Each case: one warm-up call, then ``--repeat`` calls; the figure is the least process CPU
time (all threads) of the calls, in units of the forward model's (`amsa`, numba, at
w_true):

- invert: `invert(..., "numba")` as a user calls it (start from the per-pixel table);
- from w_true: ``w0=w_true`` (no start table; the first step finds the solution);
- max_iter=1: the start table and one step;
- kernel alone: the numba solver's kernel on the whole cube as one chunk, writing into
  outputs allocated (and first touched) before the timing: `invert` minus its output
  allocation and first touch.

Every case runs with numba's threads at the machine's count (2 on CI), then again with 1
thread, in the same run: with one thread the CPU time is the work alone; with two it
also holds the time a thread spends waiting (spinning, with the OpenMP threading layer)
at the end of each chunk's parallel loop for the other, which grows with the machine's
load and with the number of chunks (`invert` runs one chunk here, the numba solver's
default of 4.2 M problems; the forward model one parallel loop).

Usage::

    python benchmarks/bench_invert_units.py [--side 256] [--repeat 5]

Writes ``benchmarks/results/invert_units.json`` (``--json`` to change).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numba
import numpy as np
from bench_invert import finish, geometry, machine_info, make_cube

import lumaxlike
from lumaxlike._inverse.albedo.invert import albedo_bounds, default_tolerance
from lumaxlike._inverse.albedo.numba_solver import solve_albedo_numba


def least_cpu(call, repeat: int) -> float:
    call()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return min(times)


def kernel_call(refl, vectors, params):
    """The numba kernel on the whole cube as one chunk, into outputs allocated and first
    touched here (not in the timed call)."""
    n_bands = refl.shape[-1]
    flat = np.ascontiguousarray(refl.reshape(-1, n_bands))
    geometry = [
        np.ascontiguousarray(np.broadcast_to(g, refl.shape[:-1] + (3,)).reshape(-1, 3))
        for g in vectors
    ]
    dtypes = {"w": float, "status": np.int8, "iterations": np.int32, "residual": float}
    out = {name: np.zeros(flat.shape, dtype) for name, dtype in dtypes.items()}
    tol, bounds = default_tolerance(np.float64), albedo_bounds(np.float64)
    return lambda: solve_albedo_numba(
        flat, *geometry, params, None, 50, tol, bounds, out=out, keep_slope=False
    )


def print_report(report: dict) -> None:
    columns = list(report["threads"])
    print("| case | " + " | ".join(f"{t}: CPU s, forward units" for t in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name in report["threads"][columns[0]]:
        cells = [report["threads"][t][name] for t in columns]
        row = " | ".join(f"{c['cpu_s']:.3f}, {c['forward_units']:.2f}" for c in cells)
        print(f"| {name} | {row} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=256)
    parser.add_argument("--bands", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, default=HERE / "results" / "invert_units.json")
    args = parser.parse_args(argv)
    cube = make_cube(args.side, args.bands)
    vectors, params, refl = geometry(cube), cube["params"], cube["refl"]
    calls = {
        "forward (amsa, numba)": lambda: lumaxlike.amsa(
            cube["w_true"], *vectors, params, backend="numba"
        ),
        "invert": lambda: lumaxlike.invert(refl, *vectors, params, "numba"),
        "invert from w_true (no start table)": lambda: lumaxlike.invert(
            refl, *vectors, params, "numba", w0=cube["w_true"]
        ),
        "invert, max_iter=1 (start table + one step)": lambda: lumaxlike.invert(
            refl, *vectors, params, "numba", max_iter=1
        ),
        "kernel alone (outputs allocated and touched before)": kernel_call(refl, vectors, params),
    }
    threads = {}
    for n_threads in dict.fromkeys((numba.config.NUMBA_NUM_THREADS, 1)):
        numba.set_num_threads(n_threads)
        cpu = {name: least_cpu(call, args.repeat) for name, call in calls.items()}
        forward = cpu["forward (amsa, numba)"]
        threads[f"{n_threads} thread{'s' if n_threads > 1 else ''}"] = {
            name: {"cpu_s": seconds, "forward_units": seconds / forward}
            for name, seconds in cpu.items()
        }
    report = {"machine": machine_info(), "problems": int(refl.size), "threads": threads}
    finish(report, print_report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
