"""Joint-fit benchmark: a pixel's joint problem (16 bands, w, b, c per band, roughness and
hs shared, 16 observations) against the independent per-band fit of the same data.

The scene: ``--pixels`` (default 2000) pixels x 16 bands x 16 observations, float64,
geometry from `lumaxlike.testing.multi_angle_geometry` (the first two observations near
opposition), truth w uniform in (0.2, 0.8) per pixel and band, b and c per band (b in
0.15-0.4, c in 0.3-0.7), roughness 20 deg and hs 0.06 for all bands, bs0 0.9, hc 0.03,
bc0 0.5; Gaussian noise sigma = 1e-4 [1/sr] (fixed seed). Start: b 0.3, c 0.4, roughness
15 deg, hs 0.08; w at `fit`'s default.

Timed, interleaved per repetition (same load for the ratio), each call warm (a first,
untimed call compiles):

- joint: ``fit(..., free=("w", "b", "c", "roughness", "hs"), shared=("roughness", "hs"),
  refl_sigma=1e-4)``: one problem of 16 x 3 + 2 = 50 parameters per pixel, solved by the
  Schur complement;
- independent: ``fit(..., free=("w", "b", "c", "roughness", "hs"), refl_sigma=1e-4)``:
  16 problems of 5 parameters per pixel (each band its own roughness and hs).

Both solvers (``--solvers``); JAX on the first ``--jax-pixels`` (512) pixels with
chunk_size 256. Reported: pixels/s of each, the ratio joint time / independent time per
repetition (median and best), Levenberg-Marquardt steps (median), and the joint fit's
shared-parameter sigma against the per-band fits'. Results go to
``benchmarks/results/joint.json``.

Regional row (``--regions R``, default 4; numba): the first ``--regional-pixels`` (500)
pixels in R regions of consecutive pixels, ``fit(..., shared=("roughness",),
regions=labels, regional=("hs",))`` (hs one value per region), timed warm against the
joint fit of the same pixels, with its peak traced memory (`tracemalloc`: the NumPy
arrays the fit allocates, inputs excluded) against
`lumaxlike._run.region_groups.region_pixel_bytes`, the estimate the file front end's cap
uses. ``--regional-only`` runs that row alone.

Six-band row (``--six-band-pixels``, default 1500; issue 55 section 6): the layout of
issue 55's regional scene without regions: 6 bands x 16 observations, CBOE on, w per
band in 0.1-0.9, b and c per band, roughness 12, 18, 24 or 30 deg (a quarter of the
pixels each), h_S per pixel log-uniform in 0.01-0.15, noise 1e-4 (refl_sigma given).
Both solvers, default chunks, each call warm and interleaved: the joint fit by default
(the usual start and `fit`'s probe start), with ``starts=1`` (one start), and the
independent per-band fit; reported: each one's seconds, the ratios to the per-band fit,
and its status counts and steps (median, largest). ``--six-band-only`` runs it alone.

Run: ``python benchmarks/bench_joint.py [--pixels N] [--reps R]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from functools import partial
from pathlib import Path

import numpy as np

import lumaxlike
from lumaxlike import HapkeParams
from lumaxlike.testing import multi_angle_geometry

FREE = ("w", "b", "c", "roughness", "hs")
SHARED = ("roughness", "hs")
FIXED = dict(bs0=0.9, hc=0.03, bc0=0.5)
START = HapkeParams(b=0.3, c=0.4, roughness=math.radians(15.0), hs=0.08, **FIXED)


def scene(n_pixels, n_bands=16, n_obs=16, sigma=1e-4, seed=0):
    rng = np.random.default_rng(seed)
    geometry = multi_angle_geometry(n_pixels, n_obs, rng)
    w = rng.uniform(0.2, 0.8, (n_pixels, n_bands))
    b, c = rng.uniform(0.15, 0.4, n_bands), rng.uniform(0.3, 0.7, n_bands)
    refl = np.empty((n_pixels, n_bands, n_obs))
    for k in range(n_bands):
        params = HapkeParams(
            b=float(b[k]), c=float(c[k]), roughness=math.radians(20.0), hs=0.06, **FIXED
        )
        for j in range(n_obs):
            refl[:, k, j] = lumaxlike.amsa(
                w[:, k : k + 1],
                geometry[0][:, j],
                geometry[1][:, j],
                geometry[2][:, j],
                params,
                backend="numba",
            )[:, 0]
    return refl + rng.normal(0.0, sigma, refl.shape), geometry, sigma


def six_band_scene(n_pixels, sigma=1e-4, seed=5):
    """The six-band row's data (module docstring): refl, geometry, sigma."""
    rng = np.random.default_rng(seed)
    n_bands, n_obs = 6, 16
    geometry = multi_angle_geometry(n_pixels, n_obs, rng)
    roughness = np.radians([12.0, 18.0, 24.0, 30.0])[np.arange(n_pixels) * 4 // n_pixels]
    hs = np.exp(rng.uniform(math.log(0.01), math.log(0.15), n_pixels))
    w = rng.uniform(0.1, 0.9, (n_pixels, n_bands))
    b, c = rng.uniform(0.15, 0.4, n_bands), rng.uniform(0.3, 0.7, n_bands)
    refl = np.empty((n_pixels, n_bands, n_obs))
    for i in range(n_pixels):
        for k in range(n_bands):
            params = HapkeParams(
                b=float(b[k]),
                c=float(c[k]),
                roughness=float(roughness[i]),
                hs=float(hs[i]),
                **FIXED,
            )
            refl[i, k] = lumaxlike.amsa(
                np.full((n_obs, 1), w[i, k]), *(g[i] for g in geometry), params, backend="numba"
            )[:, 0]
    return refl + rng.normal(0.0, sigma, refl.shape), geometry, sigma


def six_band_row(n_pixels, reps, solvers):
    """The six-band row (module docstring): per solver, seconds and ratios."""
    refl, geometry, sigma = six_band_scene(n_pixels)
    row = {"pixels": n_pixels, "bands": 6, "observations": 16, "solvers": {}}
    for solver in solvers:
        options = dict(solver=solver, refl_sigma=sigma)

        def run(options=options, **extra):
            return lumaxlike.fit(refl, *geometry, START, free=FREE, **options, **extra)

        runs = {
            "joint": partial(run, shared=SHARED),
            "joint_one_start": partial(run, shared=SHARED, starts=1),
            "independent": run,
        }
        first = {name: timed(call)[1] for name, call in runs.items()}
        times = {name: [] for name in runs}
        results = {}
        for _ in range(reps):
            for name, call in runs.items():
                results[name], wall, _ = timed(call)
                times[name].append(wall)
        entry = {
            "first_call_s": first,
            "seconds": {name: float(np.median(t)) for name, t in times.items()},
            "ratio_over_independent": {
                name: float(np.median([a / b for a, b in zip(t, times["independent"])]))
                for name, t in times.items()
                if name != "independent"
            },
            "status_counts": {name: r.counts() for name, r in results.items()},
            "steps_median_max": {
                name: [float(np.median(r.iterations)), int(r.iterations.max())]
                for name, r in results.items()
            },
        }
        row["solvers"][solver] = entry
        print("six_band", solver, json.dumps(entry, indent=1), flush=True)
    return row


def timed(call):
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pixels", type=int, default=2000)
    parser.add_argument("--jax-pixels", type=int, default=512)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--solvers", default="numba,jax")
    parser.add_argument("--regions", type=int, default=4)
    parser.add_argument("--regional-pixels", type=int, default=500)
    parser.add_argument("--regional-only", action="store_true")
    parser.add_argument("--six-band-pixels", type=int, default=1500)
    parser.add_argument("--six-band-only", action="store_true")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "joint.json"))
    args = parser.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)  # the benchmark process's own setting
    if args.six_band_only:
        row = six_band_row(args.six_band_pixels, args.reps, args.solvers.split(","))
        out = Path(args.out).with_name("joint_six_band.json")
        machine = {"platform": platform.platform(), "cpus": os.cpu_count()}
        out.write_text(json.dumps({"machine": machine, "six_band": row}, indent=1) + "\n")
        return
    refl, geometry, sigma = scene(args.pixels)
    report = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "pixels": args.pixels,
        "bands": 16,
        "observations": 16,
        "solvers": {},
    }
    for solver in [] if args.regional_only else args.solvers.split(","):
        n = args.pixels if solver == "numba" else min(args.jax_pixels, args.pixels)
        data = (refl[:n], *(g[:n] for g in geometry))
        options = dict(
            solver=solver,
            refl_sigma=sigma,
            chunk_size=None if solver == "numba" else 256,
        )
        runs = {
            "joint": lambda: lumaxlike.fit(*data, START, free=FREE, shared=SHARED, **options),  # noqa: B023 (called in this iteration)
            "independent": lambda: lumaxlike.fit(*data, START, free=FREE, **options),  # noqa: B023 (called in this iteration)
        }
        warm = {}
        for name, run in runs.items():
            _, wall, _ = timed(run)
            warm[name] = wall
        times = {name: [] for name in runs}
        results = {}
        for _ in range(args.reps):
            for name, run in runs.items():
                results[name], wall, cpu = timed(run)
                times[name].append((wall, cpu))
        ratios = [j[0] / i[0] for j, i in zip(times["joint"], times["independent"])]
        joint, independent = results["joint"], results["independent"]
        converged = joint.status == lumaxlike.Status.CONVERGED
        entry = {
            "pixels": n,
            "first_call_s": warm,
            "pixels_per_s": {name: n / min(w for w, _ in t) for name, t in times.items()},
            "cpu_s_per_wall_s": {
                name: float(np.median([c / w for w, c in t])) for name, t in times.items()
            },
            "ratio_joint_over_independent": {
                "median": float(np.median(ratios)),
                "best": float(min(ratios)),
            },
            "median_steps": {
                "joint": float(np.median(joint.iterations)),
                "independent": float(np.median(independent.iterations)),
            },
            "converged_fraction": {
                "joint": float(converged.mean()),
                "independent": float(np.mean(independent.status == 0)),
            },
            "shared_sigma_over_per_band": {
                name: float(
                    np.nanmedian(joint.sigma(name)[converged])
                    / np.nanmedian(independent.sigma(name))
                )
                for name in SHARED
            },
        }
        report["solvers"][solver] = entry
        print(solver, json.dumps(entry, indent=1), flush=True)
    if args.regions:
        report["regional"] = regional_row(refl, geometry, sigma, args)
        print("regional", json.dumps(report["regional"], indent=1), flush=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


def regional_row(refl, geometry, sigma, args):
    """The regional fit's time against the joint fit's, and its peak memory (numba)."""
    import tracemalloc

    from lumaxlike._run.region_groups import region_pixel_bytes

    n = min(args.regional_pixels, len(refl))
    data = (refl[:n], *(g[:n] for g in geometry))
    labels = np.arange(n) * args.regions // n
    options = dict(free=FREE, solver="numba", refl_sigma=sigma, shared=("roughness",))
    runs = {
        "regional": lambda: lumaxlike.fit(
            *data, START, regions=labels, regional=("hs",), **options
        ),
        "joint": lambda: lumaxlike.fit(*data, START, **options),
    }
    for run in runs.values():  # compile
        run()
    times = {name: [] for name in runs}
    for _ in range(args.reps):
        for name, run in runs.items():
            result, wall, _ = timed(run)
            times[name].append(wall)
            if name == "regional":
                regional = result
    tracemalloc.start()
    runs["regional"]()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    estimate = region_pixel_bytes(refl.shape[1], refl.shape[2], 3, 2)
    return {
        "pixels": n,
        "regions": args.regions,
        "seconds": {name: float(np.median(t)) for name, t in times.items()},
        "ratio_regional_over_joint": float(
            np.median([r / j for r, j in zip(times["regional"], times["joint"])])
        ),
        "region_iterations": regional.region_iterations.tolist(),
        "region_status": regional.region_status.tolist(),
        "peak_traced_bytes_per_pixel": peak / n,
        "estimated_bytes_per_pixel": estimate,
    }


if __name__ == "__main__":
    main()
