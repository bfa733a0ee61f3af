"""Benchmark: photometric normalisation's rate against the inversion's, in one run.

The cube of ``bench_invert.py`` (per-pixel geometry from the tests' `random_geometry`,
roughness 20 deg and both opposition effects, float64; default 512 x 512 x 64 = 16.8 M
problems). For each solver: a warm-up of `invert` and `normalize` on one chunk, then
``--repeat`` timed runs of each, interleaved (invert, normalize, invert, ...), so the
ratio is taken under the same machine load. Also timed: `normalize` with a binned
roughness map (``--bins`` distinct values, one per pixel), the LROC WAC case.

Reported per solver: problems/s of `invert` and of `normalize` (median), their ratio
(the target, not asserted: normalize within 20 % of invert, ratio >= 0.8), the
binned-map rate, and max |normalised - r at the standard geometry from w_true| over
converged problems.

Usage::

    python benchmarks/bench_normalize.py                          # a few minutes on 2 cores
    python benchmarks/bench_normalize.py --side 64 --repeat 1     # smoke

Writes ``benchmarks/results/normalize.json`` (``--json`` to change).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_invert import finish, geometry, machine_info, make_cube  # noqa: E402

import lumaxlike  # noqa: E402
from lumaxlike._normalize.standard import DEFAULT_STANDARD, standard_vectors  # noqa: E402


def run(function, cube, solver, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = function(cube["refl"], *geometry(cube), cube["params"], solver, **kwargs)
    return time.perf_counter() - start, result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=512, help="pixels per side (default 512)")
    parser.add_argument("--bands", type=int, default=64, help="bands (default 64)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per case (default 5)")
    parser.add_argument(
        "--bins",
        type=int,
        default=16,
        help="distinct roughness values of the map case (default 16)",
    )
    parser.add_argument(
        "--solvers", default="numba,jax", help="comma-separated (default numba,jax)"
    )
    parser.add_argument(
        "--json", type=Path, default=Path(__file__).parent / "results" / "normalize.json"
    )
    args = parser.parse_args(argv)

    cube = make_cube(args.side, args.bands)
    n_pixels = cube["refl"].shape[0]
    problems = cube["refl"].size
    truth = lumaxlike.amsa(
        cube["w_true"], *standard_vectors(*DEFAULT_STANDARD), cube["params"], backend="numba"
    )
    rng = np.random.default_rng(1)
    bins = np.radians(np.linspace(15.0, 25.0, args.bins))
    roughness_map = bins[rng.integers(0, args.bins, n_pixels)]
    solvers = args.solvers.split(",")
    cases = {
        (solver, kind): []
        for solver in solvers
        for kind in ("invert", "normalize", "normalize_binned_map")
    }
    warmup = {}
    for solver in solvers:
        piece = {k: (v[: 1 << 12] if isinstance(v, np.ndarray) else v) for k, v in cube.items()}
        start = time.perf_counter()
        run(lumaxlike.invert, piece, solver)
        run(lumaxlike.normalize, piece, solver)
        warmup[solver] = time.perf_counter() - start
    accuracy = {}
    for _ in range(args.repeat):
        for solver in solvers:
            seconds, _ = run(lumaxlike.invert, cube, solver)
            cases[(solver, "invert")].append(seconds)
            seconds, result = run(lumaxlike.normalize, cube, solver)
            cases[(solver, "normalize")].append(seconds)
            converged = result.status == lumaxlike.Status.CONVERGED
            accuracy[solver] = float(np.max(np.abs(result.reflectance - truth)[converged]))
    for solver in solvers:  # twice each, the first a warm-up (JAX compiles the groups' chunk shape)
        for attempt in range(2):
            seconds, _ = run(
                lumaxlike.normalize, cube, solver, param_maps={"roughness": roughness_map}
            )
            if attempt:
                cases[(solver, "normalize_binned_map")].append(seconds)

    rows = {}
    for solver in solvers:
        rates = {
            kind: problems / statistics.median(cases[(solver, kind)])
            for kind in ("invert", "normalize", "normalize_binned_map")
        }
        rows[solver] = {
            **{f"{kind}_problems_per_s": rate for kind, rate in rates.items()},
            "normalize_vs_invert": rates["normalize"] / rates["invert"],
            "binned_map_vs_invert": rates["normalize_binned_map"] / rates["invert"],
            "times_s": {
                kind: cases[(solver, kind)]
                for kind in ("invert", "normalize", "normalize_binned_map")
            },
            "warmup_s": warmup[solver],
            "max_abs_error_vs_truth": accuracy[solver],
        }
    report = {
        "machine": machine_info(),
        "settings": {
            "side": args.side,
            "bands": args.bands,
            "repeat": args.repeat,
            "bins": args.bins,
            "standard_deg": [math.degrees(a) for a in DEFAULT_STANDARD],
            "dtype": "float64",
        },
        "problems": problems,
        "results": rows,
    }

    def print_report(report):
        for solver, row in report["results"].items():
            print(
                f"{solver:6s} invert {row['invert_problems_per_s'] / 1e6:6.2f} M/s  normalize "
                f"{row['normalize_problems_per_s'] / 1e6:6.2f} M/s ({row['normalize_vs_invert']:.2f} x invert; "
                f"target >= 0.8)  binned map ({args.bins} values) {row['normalize_binned_map_problems_per_s'] / 1e6:6.2f}"
                f" M/s ({row['binned_map_vs_invert']:.2f} x)  max|r - r_true| {row['max_abs_error_vs_truth']:.1e}"
            )

    finish(report, print_report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
