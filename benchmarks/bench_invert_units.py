"""Where numba `invert`'s forward-model units go, in CPU time (a shared machine's wall
time is too noisy for this): `invert` against the forward model on the same cube, and two
variants that remove one part of the work each.

The cube: `bench_invert.make_cube` (default 256 x 256 x 64 float64, `FULL_PARAMS`).
Each case: one warm-up call, then ``--repeat`` calls; the figure is the least process CPU
time (all threads) of the calls, in units of the forward model's (`amsa`, numba, at
w_true):

- invert: `invert(..., "numba")` as a user calls it (start from the per-pixel table);
- from w_true: ``w0=w_true`` (no start table; the first step finds the solution);
- max_iter=1: the start table and one step.

Usage::

    python benchmarks/bench_invert_units.py [--side 256] [--repeat 3]

Writes ``benchmarks/results/invert_units.json`` (``--json`` to change).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_invert import finish, geometry, machine_info, make_cube

import lumaxlike


def least_cpu(call, repeat: int) -> float:
    call()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return min(times)


def print_report(report: dict) -> None:
    print("| case | CPU s (least of the repeats) | forward units |")
    print("|---|---|---|")
    for name, row in report["cases"].items():
        print(f"| {name} | {row['cpu_s']:.3f} | {row['forward_units']:.2f} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=256)
    parser.add_argument("--bands", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
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
    }
    cpu = {name: least_cpu(call, args.repeat) for name, call in calls.items()}
    forward = cpu["forward (amsa, numba)"]
    report = {
        "machine": machine_info(),
        "problems": int(refl.size),
        "cases": {
            name: {"cpu_s": seconds, "forward_units": seconds / forward}
            for name, seconds in cpu.items()
        },
    }
    finish(report, print_report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
