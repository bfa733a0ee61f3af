"""`unmix` with free grain sizes and npFe0 against today's fixed-grain `unmix`, per pixel.

The scene: side x side pixels (default 32 x 32) x 64 bands (0.45-1.9 um, inside iron's
n, k table) x 4 endmembers from the shipped optical constants (olivine and orthopyroxene
of Pollack et al. 1994, the Mg0.4 and Mg0.8 pyroxene glasses of Dorschner et al. 1995;
densities 3.32, 3.3, 3.6, 3.3 g/cm^3). Per pixel: mass fractions Dirichlet(3, 3, 3, 3),
grain sizes within 1/1.2-1.2 of (60, 40, 80, 30) um, npFe0 0.05-0.3 wt %; w from
`lumaxlike.slab_albedo`, mixed by Hapke's rule, reflectance from `lumaxlike.amsa` with
``HapkeParams(b=0.3, c=0.4, roughness=0.3)`` at `lumaxlike.testing.random_geometry`, plus
Gaussian noise sigma = 1e-4 [1/sr]; every call passes ``refl_sigma=1e-4``. The
endmembers start at the central grain sizes and 0.1 wt % npFe0.

Timed in one process (best of ``--repeat`` runs after a warm-up that compiles every
kernel), pixels per second:

- fixed: ``unmix(..., solver)``, the one-step route with the endmembers' w at the given
  grain sizes and npFe0 (today's unmix on the same cube);
- free: ``unmix(..., solver, free=("grain_size", "npfe"))`` with ``starts=1`` and with
  ``--starts`` (default 3) starts;

numba on the whole scene, JAX on its first ``--jax-pixels`` pixels (JAX on a CPU is not
its place); numba with each of ``--threads`` (default 1 and 2). The ratio free / fixed of
the time per pixel is the issue's figure (issue 55, one start: <= 6). Accuracy: the CONVERGED share and the median |fraction - truth|.

Writes a temporary JSON report, ``--out PATH``, or (``--save``) the stored
``benchmarks/results/unmix_optical.json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_invert import finish, machine_info

import lumaxlike
from lumaxlike import HapkeParams, Status
from lumaxlike.testing import random_geometry

RESULTS = Path(__file__).parent / "results"
PARAMS = HapkeParams(b=0.3, c=0.4, roughness=0.3)
SIGMA = 1e-4
NAMES = (
    "olivine",
    "orthopyroxene",
    "pyroxene_glass_mg040_dorschner1995",
    "pyroxene_glass_mg080_dorschner1995",
)
DENSITY = np.array([3.32, 3.3, 3.6, 3.3])
GRAIN = np.array([60.0, 40.0, 80.0, 30.0])  # um
WAVELENGTHS = np.linspace(0.45, 1.9, 64)  # um
FREE = ("grain_size", "npfe")
TARGET_RATIO = 6.0


def make_scene(side: int, seed: int = 1) -> dict:
    """The reflectance, geometry and truth of side x side pixels (module docstring)."""
    rng = np.random.default_rng(seed)
    count = side * side
    constants = [lumaxlike.optical_constants(name) for name in NAMES]
    mass = rng.dirichlet([3.0] * len(NAMES), count)
    grain = GRAIN * np.exp(rng.uniform(-np.log(1.2), np.log(1.2), (count, len(NAMES))))
    npfe = rng.uniform(0.0005, 0.003, count)
    w = np.stack(
        [
            lumaxlike.slab_albedo(
                *c.interpolate(WAVELENGTHS),
                WAVELENGTHS,
                grain[:, j, None],
                npfe_fraction=npfe[:, None],
                host_density=DENSITY[j],
            )
            for j, c in enumerate(constants)
        ],
        axis=1,
    )
    per_mass = mass / (DENSITY * grain)
    fractions = per_mass / per_mass.sum(axis=-1, keepdims=True)
    geometry = random_geometry(count, rng)
    refl = lumaxlike.amsa(np.einsum("nj,njk->nk", fractions, w), *geometry, PARAMS, backend="numba")
    refl = np.asarray(refl) + rng.normal(0.0, SIGMA, refl.shape)
    endmembers = lumaxlike.Endmembers.from_optical_constants(
        constants,
        GRAIN,
        WAVELENGTHS,
        names=NAMES,
        density=DENSITY,
        npfe_fraction=0.001,
        grain_size_bounds=(5.0, 500.0),
    )
    return {"refl": refl, "geometry": geometry, "mass": mass, "endmembers": endmembers}


def call(scene, solver, pixels, **free):
    """`unmix` on the first `pixels` pixels of the scene."""
    return lumaxlike.unmix(
        scene["refl"][:pixels],
        *(g[:pixels] for g in scene["geometry"]),
        scene["endmembers"],
        PARAMS,
        solver,
        refl_sigma=SIGMA,
        **free,
    )


def measure(scene, solver, pixels, repeat, **free) -> dict:
    """Best rate [pixels/s] of `repeat` timed calls after a warm-up, and the accuracy."""
    call(scene, solver, pixels, **free)  # compile (JAX: for this chunk shape)
    times = []
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call(scene, solver, pixels, **free)
        times.append(time.perf_counter() - start)
    assert result is not None
    ok = result.status == Status.CONVERGED
    error = np.abs(result.fractions[ok] - scene["mass"][:pixels][ok])
    codes, counts = np.unique(result.status, return_counts=True)
    return {
        "pixels": pixels,
        "best_s": min(times),
        "pixels_per_s": pixels / min(times),
        "converged": float(ok.mean()),
        "status_counts": {Status(c).name: int(n) for c, n in zip(codes, counts)},
        "mean_iterations": float(np.mean(result.iterations)),
        "median_abs_error": float(np.median(error)) if error.size else None,
    }


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=32, help="pixels per side (default 32)")
    parser.add_argument("--jax-pixels", type=int, default=256, help="JAX's pixels (256)")
    parser.add_argument("--starts", type=int, default=3, help="the many-start run's starts")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs; best counts")
    parser.add_argument(
        "--solvers", default="numba,jax", help="comma-separated (default numba,jax)"
    )
    parser.add_argument(
        "--threads", default="1,2", help="numba's thread counts, comma-separated (default 1,2)"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--save",
        action="store_const",
        const=RESULTS / "unmix_optical.json",
        dest="out",
        help="write the stored results, benchmarks/results/unmix_optical.json",
    )
    where.add_argument("--out", type=Path, help="write the JSON report here (default: temporary)")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = Path(tempfile.gettempdir()) / "lumaxlike-bench-unmix-optical.json"
    scene = make_scene(args.side)
    total = args.side * args.side
    runs: dict = {}
    runs_of = [
        (solver, threads)
        for solver in args.solvers.split(",")
        for threads in (args.threads.split(",") if solver == "numba" else [None])
    ]
    for solver, threads in runs_of:
        pixels = total if solver == "numba" else min(total, args.jax_pixels)
        if threads is not None:
            numba.set_num_threads(int(threads))
        name = solver if threads is None else f"{solver}_{threads}_threads"
        runs[name] = {
            "fixed": measure(scene, solver, pixels, args.repeat),
            "free": measure(scene, solver, pixels, args.repeat, free=FREE),
            f"free_starts_{args.starts}": measure(
                scene, solver, pixels, args.repeat, free=FREE, starts=args.starts
            ),
        }
        fixed = runs[name]["fixed"]["pixels_per_s"]
        runs[name]["ratio_free"] = fixed / runs[name]["free"]["pixels_per_s"]
        runs[name][f"ratio_free_starts_{args.starts}"] = (
            fixed / runs[name][f"free_starts_{args.starts}"]["pixels_per_s"]
        )
    report = {
        "benchmark": "unmix_optical",
        "shape": [args.side, args.side, WAVELENGTHS.size],
        "endmembers": list(NAMES),
        "starts": args.starts,
        "target_ratio_numba": TARGET_RATIO,
        "runs": runs,
        "machine": machine_info(),
    }

    def show(report):
        for solver, run in report["runs"].items():
            for name, value in run.items():
                if isinstance(value, dict):
                    print(
                        f"{solver:6s} {name:16s} {value['pixels']:7d} px "
                        f"{value['pixels_per_s']:10.1f} px/s converged {value['converged']:.3f} "
                        f"median |dM| {value['median_abs_error']} {value['status_counts']} "
                        f"iterations {value['mean_iterations']:.1f}"
                    )
                else:
                    print(f"{solver:6s} {name:22s} {value:.2f}")

    finish(report, show, args.out)
    return args.out


if __name__ == "__main__":
    raise SystemExit(main())
