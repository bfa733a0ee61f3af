"""`unmix` benchmark: throughput of both routes against per-pixel scipy loops.

The scene: side x side pixels (1000 x 1000; ``--quick``: 200 x 200) x 64 bands x 4
endmembers, float64. Library: four smooth synthetic albedo spectra (a sloped continuum
with one Gaussian absorption each, in (0.05, 0.95)), densities 2.7-4.4 g/cm^3, grain sizes
40-110 um. Mass fractions: Dirichlet(1, 1, 1, 4 times) per pixel, one endmember absent in
a fifth of the pixels. Geometry from `lumaxlike.testing.random_geometry` (incidence 0-80
deg, emission 0-70 deg, normals tilted up to 30 deg: a few percent of pixels are below the
horizon and come back INVALID_GEOMETRY / NONFINITE_INPUT). Model: ``HapkeParams(b=0.3,
c=0.4, roughness=0.3, hs=0.06, bs0=0.9)``. Reflectance from `lumaxlike.amsa` plus
Gaussian noise sigma = 1e-4 [1/sr]; every call passes ``refl_sigma=1e-4``.

Measured in one process (best of ``--repeats`` runs after a warm-up on a small slice that
compiles or loads every kernel):

- one-step, numba: ``unmix(..., solver="numba", route="one_step")`` on the whole scene.
- two-step, numba: the whole route (``invert`` + the w-space programme), and the w-space
  step alone ("after inversion": `numba_unmix.two_step_numba` and the covariance on the
  inverted w, chunked as `unmix` chunks), the figure the two-step target is about.
- both routes with solver="jax" on the first ``--jax-pixels`` pixels (JAX on a CPU is
  much slower than numba; its place is a GPU).
- scipy, one-step: a per-pixel `scipy.optimize.least_squares` loop over ``--scipy-pixels``
  pixels drawn from the scene, what a user writes by hand: the residual evaluates the
  model in plain Python with lumaxlike's scalar equations (`pixel_terms` once per pixel,
  `reflectance` per band and call), weighted by 1/sigma, plus one row 1e6 (sum f - 1) for
  the sum constraint; fractions bounded to [0, 1]; 2-point finite-difference Jacobian;
  xtol = ftol = gtol = 1e-12; start 1/4 each. One core.
- scipy, two-step: a per-pixel `scipy.optimize.nnls` loop over ``--nnls-pixels`` pixels on
  the same inverted, 1/sigma_w-weighted w, with the sum-to-one row (weight 1e6) appended.
  One core.

Rates are pixels per second of wall time; ratios lumaxlike / scipy use the best runs.
Accuracy: max |fraction - truth| over CONVERGED pixels (noise-limited) and the median
z-score |fraction - truth| / sigma; agreement of scipy and JAX with numba on their samples.
Peak memory: the peak RSS of each timed numba call (Linux VmHWM, reset before it;
includes the interpreter, libraries and the inputs), with the chunk size.

Targets (2 cores, not asserted): one-step numba >= 100 k pixels/s, two-step
>= 1 M pixels/s after inversion. Writes ``benchmarks/results/unmix.json`` (``--json``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.optimize

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_invert
from bench_invert import finish, fmt_rate, machine_info

import lumaxlike
from lumaxlike import HapkeParams, Status
from lumaxlike._memory import PeakRSS
from lumaxlike._model import equations as E
from lumaxlike._unmix.mixing import cross_section_fractions, cross_section_per_mass, mixed_albedo
from lumaxlike._unmix.numba_unmix import two_step_numba
from lumaxlike._unmix.simplex_qp import max_qp_steps
from lumaxlike._unmix.unmix import ALBEDO_TOLERANCE, _finish, default_chunk_pixels
from lumaxlike.testing import random_geometry

RESULTS = bench_invert.RESULTS
PARAMS = HapkeParams(b=0.3, c=0.4, roughness=0.3, hs=0.06, bs0=0.9)
SIGMA = 1e-4
N_END, N_BANDS = 4, 64
SUM_WEIGHT = 1e6  # the scipy baselines' sum-to-one row (chi units: dominates the columns, ~1e3-1e4)
TARGETS = {"one_step numba": 1e5, "two_step after inversion": 1e6}


def make_library(seed=0) -> lumaxlike.Endmembers:
    rng = np.random.default_rng(seed)
    wavelength = np.linspace(0.0, 1.0, N_BANDS)
    albedo = np.empty((N_END, N_BANDS))
    for j in range(N_END):
        continuum = rng.uniform(0.5, 0.9) + rng.uniform(-0.2, 0.2) * wavelength
        depth, centre, width = (
            rng.uniform(0.2, 0.4),
            0.15 + 0.7 * j / (N_END - 1),
            rng.uniform(0.08, 0.2),
        )
        albedo[j] = continuum - depth * np.exp(-(((wavelength - centre) / width) ** 2))
    return lumaxlike.Endmembers(
        names=tuple(f"mineral_{j}" for j in range(N_END)),
        albedo=np.clip(albedo, 0.05, 0.95),
        density=rng.uniform(2.7, 4.4, N_END),
        grain_size=rng.uniform(40.0, 110.0, N_END),
    )


def make_scene(side: int, endmembers, seed=1) -> dict:
    rng = np.random.default_rng(seed)
    n = side * side
    geometry = random_geometry(n, rng)
    mass = rng.dirichlet(np.ones(N_END), n)
    absent = rng.uniform(size=n) < 0.2
    mass[absent, rng.integers(0, N_END, absent.sum())] = 0.0
    mass /= mass.sum(axis=-1, keepdims=True)
    per_mass = cross_section_per_mass(
        endmembers.density, endmembers.grain_size, endmembers.extinction_efficiency
    )
    w = mixed_albedo(cross_section_fractions(mass, per_mass), endmembers.albedo)
    refl = lumaxlike.amsa(w, *geometry, PARAMS, backend="numba") + rng.normal(
        0.0, SIGMA, (n, N_BANDS)
    )
    return {"refl": refl, "geometry": geometry, "mass": mass}


def subset(scene: dict, index) -> dict:
    return {
        "refl": scene["refl"][index],
        "geometry": [g[index] for g in scene["geometry"]],
        "mass": scene["mass"][index],
    }


def call_unmix(scene, endmembers, solver, route):
    return lumaxlike.unmix(
        scene["refl"], *scene["geometry"], endmembers, PARAMS, solver, route=route, refl_sigma=SIGMA
    )


def timed(function, repeats: int) -> tuple[list[float], object, int]:
    """Wall times of `repeats` calls, the last result, and the largest peak RSS [bytes]."""
    times, peak = [], 0
    result = None
    for _ in range(repeats):
        with PeakRSS() as rss:
            start = time.perf_counter()
            result = function()
            times.append(time.perf_counter() - start)
        peak = max(peak, rss.peak)
    return times, result, peak


def accuracy(result, mass) -> dict:
    ok = result.status == Status.CONVERGED
    error = np.abs(result.fractions[ok] - mass[ok])
    with np.errstate(invalid="ignore", divide="ignore"):
        z = error / np.sqrt(np.diagonal(result.covariance[ok], axis1=-2, axis2=-1))
    free = ~result.at_bound[ok]
    return {
        "converged_fraction": float(ok.mean()),
        "counts": result.counts(),
        "max_abs_error": float(error.max()) if error.size else None,
        "median_z": float(np.median(z[free])) if free.any() else None,
        "absent_at_bound_fraction": float(result.at_bound[ok][mass[ok] == 0.0].mean())
        if (mass[ok] == 0.0).any()
        else None,
    }


def w_space_step(inverted, endmembers, n_pixels):
    """The two-step route after the inversion, chunked as `unmix` chunks (numba)."""
    chunk = default_chunk_pixels(N_BANDS, N_END)
    status = np.where(
        np.all(inverted.status == Status.CONVERGED, axis=-1), Status.CONVERGED, Status.UNREACHABLE
    )
    for first in range(0, n_pixels, chunk):
        piece = slice(first, min(first + chunk, n_pixels))
        solve = status[piece] == Status.CONVERGED
        solved = two_step_numba(
            inverted.w[piece],
            inverted.sigma[piece],
            solve,
            endmembers.albedo,
            True,
            max_qp_steps(N_END),
        )
        _finish(
            solved,
            status[piece].astype(np.int8),
            np.zeros(solve.shape, np.int32),
            endmembers,
            True,
            True,
            N_BANDS,
        )


def scipy_one_step(sample, endmembers) -> tuple[float, np.ndarray]:
    albedo = endmembers.albedo
    fractions = np.full((sample["refl"].shape[0], N_END), np.nan)
    start = time.perf_counter()
    for i in range(sample["refl"].shape[0]):
        sun, sensor, normal = (tuple(g[i]) for g in sample["geometry"])
        legendre, use_legendre = PARAMS.legendre_coefficients(np)
        terms = E.pixel_terms(
            sun, sensor, normal, *(float(v) for v in PARAMS.scalars()), legendre, use_legendre
        )
        if not np.isfinite(terms.scale) or not np.all(np.isfinite(sample["refl"][i])):
            continue
        observed = sample["refl"][i]

        def residual(f, terms=terms, observed=observed):
            w = f @ albedo
            model = [E.reflectance(float(w[k]), terms) for k in range(N_BANDS)]
            return np.append((np.array(model) - observed) / SIGMA, SUM_WEIGHT * (f.sum() - 1.0))

        fit = scipy.optimize.least_squares(
            residual,
            np.full(N_END, 1.0 / N_END),
            bounds=(0.0, 1.0),
            xtol=1e-12,
            ftol=1e-12,
            gtol=1e-12,
        )
        fractions[i] = fit.x
    return time.perf_counter() - start, fractions


def scipy_two_step(w, sigma_w, albedo) -> tuple[float, np.ndarray]:
    fractions = np.full((w.shape[0], N_END), np.nan)
    start = time.perf_counter()
    for i in range(w.shape[0]):
        weight = 1.0 / sigma_w[i]
        matrix = np.vstack([albedo.T * weight[:, None], SUM_WEIGHT * np.ones(N_END)])
        fractions[i] = scipy.optimize.nnls(matrix, np.append(w[i] * weight, SUM_WEIGHT))[0]
    return time.perf_counter() - start, fractions


def print_report(report: dict) -> None:
    machine = report["machine"]
    print(
        f"\nmachine: {machine['cpu']}, {machine['cores_available']} cores, numba threads {machine['numba_threads']}"
    )
    scene = report["scene"]
    print(
        f"scene: {scene['side']} x {scene['side']} x {N_BANDS} bands x {N_END} endmembers, float64\n"
    )
    print("| run | pixels | best s | pixels/s | peak RSS MB | max abs error | median z |")
    print("|---|---|---|---|---|---|---|")
    for name, r in report["results"].items():
        acc = r.get("accuracy") or {}
        peak = f"{r['peak_rss'] / 1e6:.0f}" if r.get("peak_rss") else "-"
        error = f"{acc['max_abs_error']:.1e}" if acc.get("max_abs_error") is not None else "-"
        z = f"{acc['median_z']:.2f}" if acc.get("median_z") is not None else "-"
        print(
            f"| {name} | {r['pixels']:,} | {r['best_s']:.3f} | {fmt_rate(r['rate'])} | {peak} | {error} | {z} |"
        )
    print()
    for name, value in report["ratios"].items():
        print(f"{name}: {value:,.0f} x")
    for name, value in report["agreement"].items():
        print(f"max |{name}|: {value:.1e}")
    for name, target in TARGETS.items():
        rate = report["results"][name]["rate"]
        print(
            f"target {name} >= {fmt_rate(target)}: {fmt_rate(rate)} ({'met' if rate >= target else 'NOT met'})"
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 x 200 pixels and small samples")
    parser.add_argument("--side", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--jax-pixels", type=int, default=None)
    parser.add_argument("--scipy-pixels", type=int, default=None)
    parser.add_argument("--nnls-pixels", type=int, default=None)
    parser.add_argument("--json", type=Path, default=RESULTS / "unmix.json")
    args = parser.parse_args(argv)
    side = args.side or (200 if args.quick else 1000)
    jax_pixels = args.jax_pixels or (1000 if args.quick else 20_000)
    scipy_pixels = args.scipy_pixels or (10 if args.quick else 100)
    nnls_pixels = args.nnls_pixels or (500 if args.quick else 5000)
    report = {
        "machine": machine_info(),
        "settings": vars(args) | {"json": str(args.json)},
        "scene": {"side": side, "bands": N_BANDS, "endmembers": N_END, "sigma": SIGMA},
    }
    endmembers = make_library()
    scene = make_scene(side, endmembers)
    n = side * side
    rng = np.random.default_rng(2)
    warm = subset(scene, slice(0, 256))
    for route in ("one_step", "two_step"):  # compile / load every kernel
        call_unmix(warm, endmembers, "numba", route)
    results = {}

    def record(name, times, pixels, result=None, mass=None, peak=None):
        results[name] = {
            "pixels": pixels,
            "times_s": times,
            "best_s": min(times),
            "rate": pixels / min(times),
            "peak_rss": peak,
            "accuracy": accuracy(result, mass) if result is not None else None,
        }
        print(f"{name}: {fmt_rate(pixels / min(times))}", file=sys.stderr)

    times, one_step, peak = timed(
        lambda: call_unmix(scene, endmembers, "numba", "one_step"), args.repeats
    )
    record("one_step numba", times, n, one_step, scene["mass"], peak)
    times, two_step, peak = timed(
        lambda: call_unmix(scene, endmembers, "numba", "two_step"), args.repeats
    )
    record("two_step numba (with invert)", times, n, two_step, scene["mass"], peak)
    inverted = lumaxlike.invert(
        scene["refl"],
        *scene["geometry"],
        PARAMS,
        solver="numba",
        refl_sigma=SIGMA,
        tol=ALBEDO_TOLERANCE,
    )
    times, _, peak = timed(lambda: w_space_step(inverted, endmembers, n), args.repeats)
    record("two_step after inversion", times, n, peak=peak)

    jax_scene = subset(scene, slice(0, min(jax_pixels, n)))
    agreement = {}
    for route in ("one_step", "two_step"):
        call_unmix(jax_scene, endmembers, "jax", route)  # compile
        times, result, _ = timed(
            lambda route=route: call_unmix(jax_scene, endmembers, "jax", route), 1
        )
        record(f"{route} jax", times, jax_scene["refl"].shape[0], result, jax_scene["mass"])
        reference = one_step if route == "one_step" else two_step
        agreement[f"{route} jax - numba"] = float(
            np.nanmax(np.abs(result.fractions - reference.fractions[: len(result.fractions)]))
        )

    sample = rng.choice(n, min(scipy_pixels, n), replace=False)
    seconds, scipy_cross = scipy_one_step(subset(scene, sample), endmembers)
    results["one_step scipy least_squares"] = {
        "pixels": len(sample),
        "times_s": [seconds],
        "best_s": seconds,
        "rate": len(sample) / seconds,
        "peak_rss": None,
        "accuracy": None,
    }
    both = np.all(np.isfinite(scipy_cross), axis=-1) & (one_step.status[sample] == Status.CONVERGED)
    agreement["one_step scipy - numba (cross-section fractions)"] = float(
        np.max(np.abs(scipy_cross[both] - one_step.cross_section[sample][both]))
        if both.any()
        else np.nan
    )
    solved = np.flatnonzero(np.all(inverted.status == Status.CONVERGED, axis=-1))
    sample = rng.choice(solved, min(nnls_pixels, solved.size), replace=False)
    seconds, nnls_cross = scipy_two_step(
        inverted.w[sample], inverted.sigma[sample], endmembers.albedo
    )
    results["two_step scipy nnls"] = {
        "pixels": len(sample),
        "times_s": [seconds],
        "best_s": seconds,
        "rate": len(sample) / seconds,
        "peak_rss": None,
        "accuracy": None,
    }
    ok = two_step.status[sample] == Status.CONVERGED
    agreement[
        "two_step scipy nnls - numba (cross-section fractions; nnls's sum row is weighted, not exact)"
    ] = float(np.max(np.abs(nnls_cross[ok] - two_step.cross_section[sample][ok])))
    report["results"] = results
    report["ratios"] = {
        "one_step numba / scipy least_squares": results["one_step numba"]["rate"]
        / results["one_step scipy least_squares"]["rate"],
        "two_step after inversion / scipy nnls": results["two_step after inversion"]["rate"]
        / results["two_step scipy nnls"]["rate"],
    }
    report["agreement"] = agreement
    report["chunk_pixels"] = default_chunk_pixels(N_BANDS, N_END)
    report["input_bytes"] = int(scene["refl"].nbytes + sum(g.nbytes for g in scene["geometry"]))
    finish(report, print_report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
