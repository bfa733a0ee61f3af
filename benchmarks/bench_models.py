"""Benchmark: `invert`'s rate for every model configuration, in one run.

The cube: 256 x 256 pixels x 32 bands float64 (2.1 M problems), per-pixel geometry from
the tests' `random_geometry`, roughness 20 deg and both opposition effects, w_true uniform
in (0.05, 0.95), noise-free reflectance from each configuration's own model. For each
configuration (multiple scattering x H-function, and the single-lobe phase functions;
porosity K = 1.5 except the default's K = 1) and each solver: a warm-up run on the same chunk shape (compiles; numba loads its
cache), then `--repeat` timed runs interleaved over configurations, so that ratios are
taken under the same machine load. Reported: problems/s (median), its ratio to the
default model's in the same run, mean iterations, max |w - w_true| over converged
problems.

The empirical photometric functions (`PhotometricFunction`: Lambert, Lommel-Seeliger,
Lunar-Lambert, Minnaert, Shkuratov 2011) are timed the same way on the same cube, their
albedo A drawn like w; they invert in closed form (0 iterations), so their rate is that
of reading the geometry and one division per problem.

The target (not asserted): the exact H-function costs at most 3x the Hapke 2002
approximation in `invert`, i.e. rate(amsa-exact) >= rate(amsa-hapke2002) / 3.

Usage::

    python benchmarks/bench_models.py                 # ~3-6 min on 2 cores
    python benchmarks/bench_models.py --side 64 --repeat 1   # smoke

Writes ``benchmarks/results/models.json`` (``--json`` to change).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_invert import machine_info  # noqa: E402

import lumaxlike  # noqa: E402
from lumaxlike.testing import random_geometry  # noqa: E402

CONFIGURATIONS = [  # (multiple scattering, H-function, phase function)
    ("amsa", "hapke2002", "dhg"),
    ("imsa", "hapke2002", "dhg"),
    ("amsa", "hapke1981", "dhg"),
    ("imsa", "hapke1981", "dhg"),
    ("amsa", "exact", "dhg"),
    ("imsa", "exact", "dhg"),
    ("amsa", "hapke2002", "hg"),
    ("amsa", "hapke2002", "cornette_shanks"),
]


#: (``"photometric"``, kind, "") -> the `PhotometricFunction` timed
PHOTOMETRIC = {
    "lambert": lumaxlike.PhotometricFunction("lambert"),
    "lommel_seeliger": lumaxlike.PhotometricFunction("lommel_seeliger"),
    "lunar_lambert": lumaxlike.PhotometricFunction("lunar_lambert", limb_darkening=0.6),
    "minnaert": lumaxlike.PhotometricFunction("minnaert", minnaert_k=0.7),
    "shkuratov": lumaxlike.PhotometricFunction("shkuratov", mu1=0.6, m=0.4, mu2=3.0, eta=0.5),
}
CONFIGURATIONS += [("photometric", kind, "") for kind in PHOTOMETRIC]


def params_for(multiple_scattering: str, h_function: str, phase_function: str):
    if multiple_scattering == "photometric":
        return PHOTOMETRIC[h_function]
    default = (multiple_scattering, h_function, phase_function) == CONFIGURATIONS[0]
    return lumaxlike.HapkeParams(
        b=0.21,
        c=0.45,
        roughness=math.radians(20.0),
        hs=0.06,
        bs0=1.0,
        hc=0.05,
        bc0=0.5,
        porosity_k=1.0 if default else 1.5,
        asymmetry=0.0 if phase_function == "dhg" else -0.3,
        multiple_scattering=multiple_scattering,
        h_function=h_function,
        phase_function=phase_function,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=256, help="pixels per side (default 256)")
    parser.add_argument("--bands", type=int, default=32, help="bands (default 32)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per case (default 3)")
    parser.add_argument(
        "--json", type=Path, default=Path(__file__).parent / "results" / "models.json"
    )
    args = parser.parse_args(argv)

    rng = np.random.default_rng(12)
    n_pixels = args.side * args.side
    geometry = random_geometry(n_pixels, rng)
    w_true = rng.uniform(0.05, 0.95, (n_pixels, args.bands))
    cases = {}
    for configuration in CONFIGURATIONS:
        params = params_for(*configuration)
        refl = lumaxlike.reflectance(w_true, *geometry, params, backend="numba")
        for solver in ("numba", "jax"):
            start = time.perf_counter()
            chunk = lumaxlike.invert(
                refl[: 1 << 13], *(g[: 1 << 13] for g in geometry), params, solver=solver
            )
            cases[(configuration, solver)] = {
                "refl": refl,
                "params": params,
                "warmup_s": time.perf_counter() - start,
                "times": [],
                "chunk_status": chunk.counts(),
            }
    for _ in range(args.repeat):
        for (_configuration, solver), case in cases.items():
            start = time.perf_counter()
            result = lumaxlike.invert(case["refl"], *geometry, case["params"], solver=solver)
            case["times"].append(time.perf_counter() - start)
            converged = result.status == lumaxlike.Status.CONVERGED
            case["max_error"] = float(np.max(np.abs(result.w - w_true)[converged]))
            case["mean_iterations"] = float(result.iterations[converged].mean())
            case["converged"] = float(converged.mean())

    problems = n_pixels * args.bands
    rows = []
    for (configuration, solver), case in cases.items():
        rate = problems / statistics.median(case["times"])
        default_rate = problems / statistics.median(cases[(CONFIGURATIONS[0], solver)]["times"])
        rows.append(
            {
                "multiple_scattering": configuration[0],
                "h_function": configuration[1],
                "phase_function": configuration[2],
                "solver": solver,
                "problems_per_s": rate,
                "vs_default": rate / default_rate,
                "times_s": case["times"],
                "warmup_s": case["warmup_s"],
                "mean_iterations": case["mean_iterations"],
                "converged": case["converged"],
                "max_abs_w_error": case["max_error"],
            }
        )
        print(
            f"{configuration[0]:11s} {configuration[1]:15s} {configuration[2]:16s} {solver:6s} {rate / 1e6:7.2f} M/s "
            f"({rate / default_rate:5.2f} x default)  {case['mean_iterations']:.2f} steps  "
            f"max|dw| {case['max_error']:.1e}  warm-up {case['warmup_s']:.1f} s"
        )
    report = {
        "cube": {"pixels": n_pixels, "bands": args.bands, "dtype": "float64"},
        "repeat": args.repeat,
        "machine": machine_info(),
        "rows": rows,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
