"""`fit` benchmark: throughput of `lumaxlike.fit` (several free parameters per pixel and
band) against a per-problem `scipy.optimize.least_squares` loop.

The scene: 100 k pixels x 16 bands x 16 observations, float64 (1.6 M problems; a problem
is one (pixel, band): its free parameters fitted to its 16 observations). Geometry from
`lumaxlike.testing.multi_angle_geometry` (flat surface, incidence 0-60 deg, emission
0-65 deg at any azimuth; the first two observations of every pixel near opposition, phase
~2 and ~8 deg). Truth: ``HapkeParams(b=0.25, c=0.5, roughness=20 deg, hs=0.06, bs0=0.9,
hc=0.03, bc0=0.5)``, w_true uniform in (0.2, 0.9) per pixel and band; reflectance from
`multi_angle_reflectance` plus Gaussian noise sigma = 1e-4 [1/sr] (fixed seed).

Two free-parameter sets, each measured (``--free`` to choose one):
("w", "b", "c", "roughness") and ("w", "b", "c", "hs"). Start: ``HapkeParams(b=0.3,
c=0.4, roughness=15 deg if free else 20 deg, hs=0.08 if free else 0.06, bs0=0.9,
hc=0.03, bc0=0.5)``; w starts at `fit`'s default (median over the observations of the
one-observation `invert`). Every call: ``lumaxlike.fit(refl, to_sun, to_sensor, normal,
start, free=free, solver=..., refl_sigma=1e-4)``.

Measured, in one process and interleaved (rep 1: numba for each free set, jax for each,
scipy for each; rep 2: ...), so that the ratios are taken under the same machine load:

- lumaxlike, solver="numba", on the whole scene. A warm-up call on a small slice first,
  reported separately as "compile/warm-up": numba generates and compiles the model's
  Jacobian columns per free set (~5-15 s each on 2 cores; the `invert` that gives w's
  start loads its on-disk cache).
- lumaxlike, solver="jax", on a subsample (the first ``--jax-pixels``, 2000, pixels;
  the chunk's problems go through a batch of fixed slots, refilled between rounds of
  steps, so converged ones do not wait for the slowest). The warm-up is the timed call
  itself (chunk_size: fit's default for the subsample, in both): whether a call reaches the tail's
  batch size depends on its data, so JAX compiles everything once, in the warm-up.
- scipy: a per-problem `scipy.optimize.least_squares` loop over ``--scipy-problems``
  (200) problems drawn uniformly from the scene, what a user writes by hand: the
  residual evaluates the model for the problem's 16 observations in plain Python with
  lumaxlike's scalar equations (`lumaxlike._model.equations` runs on `math` when called
  directly; `geometry_terms` computed once per problem, `terms_from_geometry` and
  `reflectance` in every call); default 2-point finite-difference Jacobian; bounds
  `lumaxlike.default_bounds()` of the free parameters; xtol = ftol = gtol = 1e-12; the
  same starting values as lumaxlike (w: the median over observations of the converged
  one-observation `lumaxlike.invert(..., solver="numba")`, else 0.5; computed before the
  loop, not timed, its time is recorded). One process, one core.

Rates are problems per second of wall time; the best (max) of the repetitions is the
headline (load from other processes only slows a run down), the median is reported too.
Ratios lumaxlike/scipy are taken within each repetition (same load) and the median of
those is reported, with best/best beside it. Each timed run also records the process's
CPU time (all threads): "per CPU-second" is problems / CPU-seconds, and "CPU s / wall s"
the cores the run got on average (~2 for numba on an idle 2-core machine; ~1 when other
processes hold a core).

Accuracy, over the problems each solver reports CONVERGED, per free parameter: the median
and 99th percentile of the z-score |value - truth| / sigma, sigma from
`FitResult.sigma(name)` (the covariance scaled by refl_sigma^2; for scipy, the same
(J^T J)^-1 1e-8 from its finite-difference Jacobian at the solution). Agreement: max
|scipy - numba| per parameter on the scipy subsample (problems converged in both), and
max |jax - numba| on the JAX subsample.

Target (not asserted): numba >= 50 k problems/s on 2 cores. For scale, a published GPU
code runs 5-parameter fits on 25 points at about 3 M fits/s on a 2017 consumer GPU.

``--gpu``: where ``jax.devices()[0]`` is a GPU, also solver="jax" on the whole scene
(chunk_size ``--gpu-chunk``, 8192 pixels): problems/s, accuracy and the device's
``peak_bytes_in_use``. Skipped with a message otherwise.

Usage::

    python benchmarks/bench_fit.py                   # full benchmark, ~6-10 min on 2 cores
    python benchmarks/bench_fit.py --pixels 2000 --jax-pixels 200 --scipy-problems 20 --repeat 1   # smoke
    python benchmarks/bench_fit.py --gpu

Writes ``benchmarks/results/fit.json`` (``--json`` to change).
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

import bench_invert
import jax
from bench_invert import _cpu_seconds, finish, fmt_rate, machine_info

import lumaxlike
from lumaxlike import HapkeParams, Status
from lumaxlike._inverse.chunking import call_chunk
from lumaxlike._inverse.fit.arguments import default_chunk
from lumaxlike._model import equations as E
from lumaxlike._params import FIELD_NAMES
from lumaxlike.testing import multi_angle_geometry, multi_angle_reflectance

RESULTS = bench_invert.RESULTS
TARGET_NUMBA = 50_000.0  # problems/s on 2 cores: the target
REFERENCE_GPU_FITS_PER_S = (
    3e6  # a published GPU code's scale: 5-parameter models, 25 points, 2017 consumer GPU
)
NOISE_SIGMA = 1e-4  # [1/sr]
TRUTH = HapkeParams(b=0.25, c=0.5, roughness=math.radians(20.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5)
FREE_SETS = {"roughness": ("w", "b", "c", "roughness"), "hs": ("w", "b", "c", "hs")}
W_RANGE = (0.2, 0.9)
NUMBA_WARMUP_PIXELS = 256
# scipy's defaults (1e-8) stop short of the minimum here: up to ~0.03 sigma (~1e-3 in c)
# away from where lumaxlike converges (tol 1e-10 on every step); 1e-12 brings scipy to
# ~1e-6 sigma of it for ~20 % more residual calls, so the baseline is timed at a
# comparable accuracy (measured on 60 problems of this scene).
SCIPY_TOLERANCES = {"xtol": 1e-12, "ftol": 1e-12, "gtol": 1e-12}


# ---------------------------------------------------------------------------------------
# Scene and parameters


def make_scene(n_pixels: int, n_bands: int, n_obs: int, seed: int = 0) -> dict:
    """The benchmark scene: refl (pixels, bands, observations) with noise, geometry
    (pixels, observations, 3) each, w_true (pixels, bands)."""
    rng = np.random.default_rng(seed)
    to_sun, to_sensor, normal = multi_angle_geometry(n_pixels, n_obs, rng)
    w_true = rng.uniform(*W_RANGE, (n_pixels, n_bands))
    refl = multi_angle_reflectance(w_true, to_sun, to_sensor, normal, TRUTH)
    refl = refl + rng.normal(0.0, NOISE_SIGMA, refl.shape)
    return {
        "refl": refl,
        "to_sun": to_sun,
        "to_sensor": to_sensor,
        "normal": normal,
        "w_true": w_true,
    }


def start_params(free) -> HapkeParams:
    """The starting values (and fixed parameters) for the free set `free`."""
    return HapkeParams(
        b=0.3,
        c=0.4,
        roughness=math.radians(15.0 if "roughness" in free else 20.0),
        hs=0.08 if "hs" in free else 0.06,
        bs0=0.9,
        hc=0.03,
        bc0=0.5,
    )


def truth_of(name: str, w_true: np.ndarray) -> np.ndarray | float:
    return w_true if name == "w" else float(getattr(TRUTH, name))


def pixels_of(scene: dict, piece: slice) -> list:
    return [scene[k][piece] for k in ("refl", "to_sun", "to_sensor", "normal")]


def accuracy(values: dict, sigma: dict, w_true: np.ndarray, converged: np.ndarray) -> dict:
    """Per free parameter: median and 99th percentile of |value - truth| / sigma, and the
    median |value - truth|, over the `converged` problems."""
    out = {}
    for name, value in values.items():
        error = np.abs(value - truth_of(name, w_true))[converged]
        z = error / sigma[name][converged]
        z = z[np.isfinite(z)]
        out[name] = {
            "median_z": float(np.median(z)) if z.size else None,
            "p99_z": float(np.percentile(z, 99)) if z.size else None,
            "median_abs_error": float(np.median(error)) if error.size else None,
            "median_sigma": float(np.median(sigma[name][converged])) if error.size else None,
        }
    return out


# ---------------------------------------------------------------------------------------
# lumaxlike


def jax_warmup_pixels(chunk: int, n_pixels: int) -> int:
    """Pixels for a JAX warm-up that compiles the first-round shapes of a `fit` over
    `n_pixels` pixels with chunk_size `chunk`: one chunk of that call
    (`chunking.call_chunk`; a call of one chunk keeps its shape, and so does the `invert`
    that gives each chunk's w start)."""
    return call_chunk("jax", n_pixels, chunk)


def warm_up_fit(scene: dict, free, solver: str, n_pixels: int, chunk_size=None) -> dict:
    """One `fit` call on the first `n_pixels` pixels (compile / cache load)."""
    start = time.perf_counter()
    lumaxlike.fit(
        *pixels_of(scene, slice(0, n_pixels)),
        start_params(free),
        free=free,
        solver=solver,
        refl_sigma=NOISE_SIGMA,
        chunk_size=chunk_size,
    )
    n_bands = scene["refl"].shape[1]
    return {"warmup_s": time.perf_counter() - start, "warmup_problems": n_pixels * n_bands}


def time_fit(scene: dict, free, solver: str, n_pixels: int, chunk_size=None):
    """One timed `fit` on the first `n_pixels` pixels; (summary, result)."""
    piece = slice(0, n_pixels)
    pieces = pixels_of(scene, piece)
    problems = pieces[0].shape[0] * pieces[0].shape[1]
    cpu, start = _cpu_seconds(), time.perf_counter()
    result = lumaxlike.fit(
        *pieces,
        start_params(free),
        free=free,
        solver=solver,
        refl_sigma=NOISE_SIGMA,
        chunk_size=chunk_size,
    )
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    converged = result.status == Status.CONVERGED
    summary = {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "pixels": n_pixels,
        "problems": problems,
        "problems_per_s": problems / seconds,
        "problems_per_cpu_s": problems / cpu,
        "chunk_size": chunk_size,
        "converged_fraction": float(converged.mean()),
        "status_counts": result.counts(),
        "mean_iterations": float(result.iterations[converged].mean()) if converged.any() else None,
        "accuracy": accuracy(
            result.values, {n: result.sigma(n) for n in free}, scene["w_true"][piece], converged
        ),
    }
    return summary, result


def agreement(
    values_a: dict, ok_a: np.ndarray, values_b: dict, ok_b: np.ndarray, sigma: dict
) -> dict:
    """Max |a - b| per parameter (and in units of b's sigma) over problems ok in both."""
    both = ok_a & ok_b
    out = {"problems_compared": int(both.sum())}
    for name in values_a:
        difference = np.abs(values_a[name] - values_b[name])[both]
        in_sigma = difference / sigma[name][both]
        out[name] = {
            "max_abs_difference": float(difference.max()) if difference.size else None,
            "max_difference_in_sigma": float(np.nanmax(in_sigma)) if in_sigma.size else None,
        }
    return out


# ---------------------------------------------------------------------------------------
# scipy baseline


def sample_problems(scene: dict, n: int, seed: int) -> dict:
    """n (pixel, band) problems drawn uniformly (sorted): refl (n, K), geometry (n, K, 3)."""
    n_pixels, n_bands, _ = scene["refl"].shape
    rng = np.random.default_rng(seed)
    flat = np.sort(rng.choice(n_pixels * n_bands, size=min(n, n_pixels * n_bands), replace=False))
    pixel, band = np.divmod(flat, n_bands)
    return {
        "pixel": pixel,
        "band": band,
        "refl": scene["refl"][pixel, band],
        "to_sun": scene["to_sun"][pixel],
        "to_sensor": scene["to_sensor"][pixel],
        "normal": scene["normal"][pixel],
        "w_true": scene["w_true"][pixel, band],
    }


def scipy_w_start(sample: dict, params: HapkeParams) -> np.ndarray:
    """lumaxlike's rule for w's start: median over the observations of the converged
    one-observation `invert` (numba), else 0.5."""
    single = lumaxlike.invert(
        sample["refl"],
        sample["to_sun"],
        sample["to_sensor"],
        sample["normal"],
        params,
        solver="numba",
    )
    w = np.where(single.status == Status.CONVERGED, single.w, np.nan)
    with np.errstate(all="ignore"):
        median = np.nanmedian(np.where(np.isfinite(w).any(axis=1, keepdims=True), w, 0.5), axis=1)
    lower, upper = lumaxlike.default_bounds()["w"]
    return np.clip(np.where(np.isfinite(median), median, 0.5), lower, upper)


def scipy_baseline(sample: dict, free) -> dict:
    """A per-problem `scipy.optimize.least_squares` loop, the model in plain Python."""
    from scipy.optimize import least_squares

    params = start_params(free)
    t0 = time.perf_counter()
    w_start = scipy_w_start(sample, params)
    start_seconds = time.perf_counter() - t0
    fixed = {name: float(getattr(params, name)) for name in FIELD_NAMES}
    bounds = lumaxlike.default_bounds()
    lower, upper = (
        np.array([np.inf if bounds[n][i] == math.inf else bounds[n][i] for n in free])
        for i in (0, 1)
    )
    n, n_obs = sample["refl"].shape
    values = np.full((n, len(free)), np.nan)
    success = np.zeros(n, bool)
    scipy_status = np.zeros(n, np.int64)
    jacobians = []
    evaluations = jacobian_evaluations = 0

    cpu, start = _cpu_seconds(), time.perf_counter()
    for k in range(n):
        vectors = [
            [[float(v) for v in sample[key][k, j]] for key in ("to_sun", "to_sensor", "normal")]
            for j in range(n_obs)
        ]
        geometry = [E.geometry_terms(*three) for three in vectors]  # once per problem
        observed = [float(v) for v in sample["refl"][k]]

        def residual(x, geometry=geometry, observed=observed):
            p = dict(fixed)
            p.update(zip(free, (float(v) for v in x)))
            out = []
            for g, r_obs in zip(geometry, observed):
                terms = E.terms_from_geometry(g, *(p[name] for name in FIELD_NAMES), None, False)
                out.append(E.reflectance(p["w"], terms) - r_obs)
            return out

        x0 = [float(w_start[k]) if name == "w" else fixed[name] for name in free]
        solution = least_squares(residual, x0=x0, bounds=(lower, upper), **SCIPY_TOLERANCES)
        values[k] = solution.x
        success[k] = solution.success
        scipy_status[k] = solution.status
        jacobians.append(solution.jac)
        evaluations += solution.nfev
        jacobian_evaluations += solution.njev
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu

    # sigma as lumaxlike defines it: sqrt(diag((J^T J)^-1)) refl_sigma, J from scipy's
    # finite differences at the solution (not timed).
    sigma = np.full((n, len(free)), np.nan)
    for k, jac in enumerate(jacobians):
        with np.errstate(all="ignore"):
            try:
                sigma[k] = np.sqrt(np.diag(np.linalg.inv(jac.T @ jac))) * NOISE_SIGMA
            except np.linalg.LinAlgError:
                pass
    named = {name: values[:, j] for j, name in enumerate(free)}
    named_sigma = {name: sigma[:, j] for j, name in enumerate(free)}
    codes, counts = np.unique(scipy_status, return_counts=True)
    summary = {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "problems": int(n),
        "problems_per_s": n / seconds,
        "problems_per_cpu_s": n / cpu,
        "start_seconds": start_seconds,
        "converged_fraction": float(success.mean()),
        "scipy_status_counts": {int(c): int(m) for c, m in zip(codes, counts)},
        "mean_function_evaluations": evaluations / n,  # scipy's nfev: without the Jacobian's
        "mean_jacobian_evaluations": jacobian_evaluations / n,
        # residual calls in all: nfev + njev x (free parameters) for the 2-point Jacobian
        "mean_residual_calls": (evaluations + jacobian_evaluations * len(free)) / n,
        "accuracy": accuracy(named, named_sigma, sample["w_true"], success),
    }
    return summary, named, success


# ---------------------------------------------------------------------------------------
# Summaries


def summarize(runs: list[dict]) -> dict:
    """Best and median throughput over repeated runs, and the last run's details."""
    rates = [r["problems_per_s"] for r in runs]
    summary = dict(runs[-1])
    summary.update(
        problems_per_s=max(rates),
        median_problems_per_s=statistics.median(rates),
        all_problems_per_s=rates,
        repeats=len(runs),
        problems_per_cpu_s=max(r["problems_per_cpu_s"] for r in runs),
    )
    return summary


def ratios(runs: dict) -> dict:
    """{f"{solver}/scipy": {same-rep ratios, their median, best/best}} for one free set."""
    out = {}
    base = runs.get("scipy") or []
    for solver in ("numba", "jax"):
        mine = runs.get(solver) or []
        if not mine or not base:
            continue
        same_rep = [a["problems_per_s"] / b["problems_per_s"] for a, b in zip(mine, base)]
        best = max(r["problems_per_s"] for r in mine) / max(r["problems_per_s"] for r in base)
        out[f"{solver}/scipy"] = {
            "median_same_rep": statistics.median(same_rep),
            "same_rep": same_rep,
            "best_over_best": best,
        }
    return out


def fmt_z(a: dict) -> str:
    if a.get("median_z") is None:
        return "- | -"
    return f"{a['median_z']:.2f} | {a['p99_z']:.2f}"


def print_report(report: dict) -> None:
    machine = report["machine"]
    print(
        f"\nmachine: {machine['cpu']}, {machine['cores_available']} cores, numba threads "
        f"{machine['numba_threads']}, jax {machine['versions']['jax']} ({machine['jax_device']})"
    )
    s = report["scene"]
    print(
        f"scene: {s['pixels']:,} pixels x {s['bands']} bands x {s['observations']} observations float64 = "
        f"{s['problems']:,} problems; noise sigma {s['noise_sigma']:g} 1/sr\n"
    )
    print(
        "| free | solver | problems | compile/warm-up s | run s | problems/s (best) | median | per CPU-second "
        "| CPU s / wall s | converged | mean iterations |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, by_solver in report["results"].items():
        for solver, r in by_solver.items():
            if not r or "problems_per_s" not in r:
                continue
            warm = "-" if r.get("warmup_s") is None else f"{r['warmup_s']:.2f}"
            iters = "-" if r.get("mean_iterations") is None else f"{r['mean_iterations']:.1f}"
            if solver == "scipy":
                iters = f"{r['mean_jacobian_evaluations']:.1f} Jacobians, {r['mean_residual_calls']:.0f} residual calls"
            print(
                f"| {label} | {solver} | {r['problems']:,} | {warm} | {r['seconds']:.2f} | "
                f"{fmt_rate(r['problems_per_s'])} | {fmt_rate(r['median_problems_per_s'])} | "
                f"{fmt_rate(r['problems_per_cpu_s'])} | {r['cpu_seconds'] / r['seconds']:.2f} | "
                f"{r['converged_fraction']:.2%} | {iters} |"
            )
    print("\nstatus counts (last run):")
    for label, by_solver in report["results"].items():
        for solver, r in by_solver.items():
            if r and "status_counts" in r:
                counts = {k: v for k, v in r["status_counts"].items() if v}
                print(f"- {label} {solver}: {counts}")
            elif r and "scipy_status_counts" in r:
                print(f"- {label} scipy (least_squares status: count): {r['scipy_status_counts']}")
    print("\naccuracy over CONVERGED problems, z = |value - truth| / sigma:\n")
    print("| free | solver | parameter | median z | p99 z | median abs error | median sigma |")
    print("|---|---|---|---|---|---|---|")
    for label, by_solver in report["results"].items():
        for solver, r in by_solver.items():
            if not r or "accuracy" not in r:
                continue
            for name, a in r["accuracy"].items():
                error = "-" if a["median_abs_error"] is None else f"{a['median_abs_error']:.2e}"
                sig = "-" if a["median_sigma"] is None else f"{a['median_sigma']:.2e}"
                print(f"| {label} | {solver} | {name} | {fmt_z(a)} | {error} | {sig} |")
    print("\nagreement (max over problems converged in both):\n")
    print("| free | pair | problems | parameter | max abs difference | max in sigma |")
    print("|---|---|---|---|---|---|")
    for label, pairs in report["agreement"].items():
        for pair, a in pairs.items():
            if not a:
                continue
            for name, d in a.items():
                if name == "problems_compared" or d["max_abs_difference"] is None:
                    continue
                print(
                    f"| {label} | {pair} | {a['problems_compared']} | {name} | {d['max_abs_difference']:.1e} | "
                    f"{d['max_difference_in_sigma']:.1e} |"
                )
    print("\n| free | ratio | median of same-rep ratios | best / best | target |")
    print("|---|---|---|---|---|")
    for label, table in report["ratios"].items():
        for key, value in table.items():
            print(
                f"| {label} | {key} | {value['median_same_rep']:,.1f}x | {value['best_over_best']:,.1f}x | |"
            )
        numba = report["results"][label].get("numba")
        if numba:
            rate = numba["problems_per_s"]
            verdict = "met" if rate >= TARGET_NUMBA else "NOT met"
            print(
                f"| {label} | numba problems/s | {fmt_rate(numba['median_problems_per_s'])} | {fmt_rate(rate)} | "
                f">= {TARGET_NUMBA / 1e3:g} k/s: {verdict} |"
            )
    for label, g in (report.get("gpu") or {}).items():
        if not g or "problems_per_s" not in g:
            print(f"\nGPU ({label}): {'-' if not g else g.get('error')}")
            continue
        peak = (
            "-" if g.get("device_peak_bytes") is None else f"{g['device_peak_bytes'] / 1e9:.2f} GB"
        )
        print(
            f"\nGPU {g['device']} ({label}): {g['pixels']:,} pixels, {fmt_rate(g['problems_per_s'])} "
            f"(a published GPU code: ~{REFERENCE_GPU_FITS_PER_S / 1e6:g} M fits/s, 5 parameters on 25 points, 2017 GPU), "
            f"compile {g['warmup_s']:.1f} s, converged {g['converged_fraction']:.2%}, device peak {peak}"
        )


# ---------------------------------------------------------------------------------------
# GPU


def run_gpu(scene: dict, free, chunk: int):
    """solver="jax" on the whole scene on the GPU; None without a GPU."""
    device = jax.devices()[0]
    if device.platform != "gpu":
        return None
    n_pixels = scene["refl"].shape[0]
    chunk = min(chunk, n_pixels)
    warm = warm_up_fit(scene, free, "jax", jax_warmup_pixels(chunk, n_pixels), chunk)
    run, _ = time_fit(scene, free, "jax", n_pixels, chunk)
    stats = device.memory_stats() or {}
    return {
        "device": str(device),
        **warm,
        **run,
        "device_peak_bytes": stats.get("peak_bytes_in_use"),
    }


# ---------------------------------------------------------------------------------------


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def parse_free(text: str) -> tuple:
    free = tuple(name.strip() for name in text.split(",") if name.strip())
    return FREE_SETS.get(text, free)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pixels", type=int, default=100_000, help="pixels (default 100000)")
    parser.add_argument("--bands", type=int, default=16, help="bands (default 16)")
    parser.add_argument(
        "--observations", type=int, default=16, help="observations per pixel (default 16)"
    )
    parser.add_argument(
        "--free",
        action="append",
        type=parse_free,
        default=None,
        help="free parameters, comma-separated (e.g. w,b,c,hs), or 'roughness' / 'hs' for the two "
        "standard sets; repeat for several (default: both standard sets)",
    )
    parser.add_argument(
        "--repeat", type=int, default=2, help="timed runs per solver, interleaved (default 2)"
    )
    parser.add_argument(
        "--jax-pixels", type=int, default=2000, help="JAX subsample, pixels (default 2000)"
    )
    parser.add_argument(
        "--scipy-problems", type=int, default=200, help="scipy subsample, problems (default 200)"
    )
    parser.add_argument(
        "--solvers", default="numba,jax", help="lumaxlike solvers to time (default numba,jax)"
    )
    parser.add_argument("--no-scipy", action="store_true")
    parser.add_argument("--gpu", action="store_true", help="also JAX on the whole scene (if a GPU)")
    parser.add_argument(
        "--gpu-chunk",
        type=int,
        default=8192,
        help="chunk_size (pixels) of the GPU run (default 8192)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=RESULTS / "fit.json")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    free_sets = args.free or list(FREE_SETS.values())
    solvers = [s for s in args.solvers.split(",") if s]
    settings = vars(args) | {"json": str(args.json), "free": [list(f) for f in free_sets]}
    report = {"machine": machine_info(), "settings": settings}
    log(f"generating {args.pixels} x {args.bands} x {args.observations} float64 scene ...")
    scene = make_scene(args.pixels, args.bands, args.observations, args.seed)
    n_pixels = args.pixels
    report["scene"] = {
        "pixels": n_pixels,
        "bands": args.bands,
        "observations": args.observations,
        "dtype": "float64",
        "problems": n_pixels * args.bands,
        "noise_sigma": NOISE_SIGMA,
        "w_range": list(W_RANGE),
        "truth": {
            n: float(getattr(TRUTH, n)) for n in ("b", "c", "roughness", "hs", "bs0", "hc", "bc0")
        },
    }
    labels = {free: ",".join(free) for free in free_sets}
    jax_pixels = min(args.jax_pixels, n_pixels)
    # fit's own default chunk for the subsample (one chunk of it where it fits)
    jax_chunk = default_chunk(None, args.bands, args.observations, jax_pixels, "jax")
    sizes = {"numba": (n_pixels, None), "jax": (jax_pixels, jax_chunk)}
    sample = None if args.no_scipy else sample_problems(scene, args.scipy_problems, args.seed + 2)

    warm = {free: {} for free in free_sets}
    for free in free_sets:
        for solver in solvers:
            if solver == "numba":
                warm[free][solver] = warm_up_fit(
                    scene, free, "numba", min(NUMBA_WARMUP_PIXELS, n_pixels)
                )
            else:
                # the timed call itself: whether a call compiles the tail's batch size
                # depends on its data, so only the same call compiles them all
                warm[free][solver] = warm_up_fit(scene, free, "jax", jax_pixels, jax_chunk)
            log(f"{labels[free]} {solver}: warm-up {warm[free][solver]['warmup_s']:.2f} s")

    runs = {
        free: {name: [] for name in [*solvers, *([] if args.no_scipy else ["scipy"])]}
        for free in free_sets
    }
    agree = {free: {} for free in free_sets}
    for rep in range(args.repeat):
        tag = f"[{rep + 1}/{args.repeat}]"
        last = {}
        for solver in solvers:
            for free in free_sets:
                summary, result = time_fit(scene, free, solver, *sizes[solver])
                runs[free][solver].append(summary)
                last[(free, solver)] = result
                log(
                    f"{tag} {labels[free]} {solver}: {fmt_rate(summary['problems_per_s'])} "
                    f"({summary['seconds']:.1f} s, converged {summary['converged_fraction']:.1%})"
                )
        if not args.no_scipy:
            for free in free_sets:
                summary, values, success = scipy_baseline(sample, free)
                runs[free]["scipy"].append(summary)
                log(
                    f"{tag} {labels[free]} scipy: {fmt_rate(summary['problems_per_s'])} ({summary['seconds']:.1f} s)"
                )
                numba = last.get((free, "numba"))
                if numba is not None:  # on the same problems, from this rep's full-scene numba run
                    at = (sample["pixel"], sample["band"])
                    agree[free]["scipy-numba"] = agreement(
                        values,
                        success,
                        {n: numba[n][at] for n in free},
                        numba.status[at] == Status.CONVERGED,
                        {n: numba.sigma(n)[at] for n in free},
                    )
        for free in free_sets:
            numba, jax_result = last.get((free, "numba")), last.get((free, "jax"))
            if numba is not None and jax_result is not None:
                piece = slice(0, jax_pixels)
                agree[free]["jax-numba"] = agreement(
                    jax_result.values,
                    jax_result.status == Status.CONVERGED,
                    {n: numba[n][piece] for n in free},
                    numba.status[piece] == Status.CONVERGED,
                    {n: numba.sigma(n)[piece] for n in free},
                )
        del last

    report["results"] = {
        labels[free]: {
            name: {**warm[free].get(name, {}), **summarize(r)} for name, r in by_solver.items() if r
        }
        for free, by_solver in runs.items()
    }
    report["agreement"] = {labels[free]: a for free, a in agree.items()}
    report["ratios"] = {labels[free]: ratios(by_solver) for free, by_solver in runs.items()}
    report["target_numba_problems_per_s"] = TARGET_NUMBA
    report["reference_gpu_fits_per_s"] = REFERENCE_GPU_FITS_PER_S
    if args.gpu:
        device = jax.devices()[0]
        if device.platform != "gpu":
            print(f"--gpu: no GPU (jax.devices()[0] is {device}); skipped")
            report["gpu"] = None
        else:
            report["gpu"] = {}
            for free in free_sets:
                try:
                    report["gpu"][labels[free]] = run_gpu(scene, free, args.gpu_chunk)
                except Exception as error:  # noqa: BLE001 - report and go on (e.g. out of device memory)
                    report["gpu"][labels[free]] = {"error": f"{type(error).__name__}: {error}"}
                    print(f"--gpu {labels[free]}: failed: {type(error).__name__}: {error}")
                    continue
                g = report["gpu"][labels[free]]
                log(f"gpu {labels[free]}: {fmt_rate(g['problems_per_s'])}")
    finish(report, print_report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
