"""Benchmark: throughput of `lumaxlike.invert` against the baselines a user has.

The cube: 512 x 512 pixels x 64 bands, float64 (16.8 M scalar problems, one w per pixel
and band), per-pixel geometry from the tests' `random_geometry` (incidence 0-80 deg,
emission 0-70 deg, normals tilted up to 30 deg: ~2 % of pixels have the source or the
observer below the local horizon), Hapke parameters with roughness and both opposition
effects (`FULL_PARAMS`), noise-free reflectance `amsa(w_true, ..., backend="numba")` with
w_true uniform in (0.05, 0.95).

Measured, in one process and interleaved (rep 1: numba, jax, refmod; rep 2: ...), so
that the ratios are taken under the same machine load:

- lumaxlike, solver="numba" and solver="jax": a warm-up run on one chunk of the cube
  (JAX compiles per chunk shape, so the warm-up uses the chunk shape of the timed run;
  numba loads its on-disk cache), reported separately; then the timed run on the whole
  cube (all problems count, including the ~2 % with invalid geometry, which exit at once).
- scipy: a per-problem `scipy.optimize.least_squares(residual, x0=0.5, bounds=(0, 1))`
  loop on a subsample of solvable problems, the model evaluated in plain Python (the
  scalar `lumaxlike._model.equations`, `math` primitives): what a user writes by hand.
  Two variants: "scipy" evaluates the whole model, `reflectance(w, pixel_terms(geometry))`,
  in every residual call; "scipy-hoisted" computes `pixel_terms` once per problem (the
  faster, conservative baseline).
- refmod (another JAX Hapke package), `refmod.hapke.inverse.invert_amsa` on a uniform
  subsample of problems flattened to (pixel x band,) with the geometry repeated per
  problem (its API takes one geometry per reflectance value), double-HG phase function
  given as Legendre coefficients b_n = (2n+1) b^n (times c for odd n), n = 0..15, run in
  float64 (`jax.enable_x64`). A warm-up call of the same shape compiles first. Its
  accuracy is against lumaxlike's w_true, so it includes the models' differences (refmod
  sums the phase function's Legendre series to n = 15 where lumaxlike uses the closed form).

Each timed run also records the process's CPU time (all threads): "per CPU-second" is
problems / CPU-seconds, a measure of efficiency that load from other processes on a
shared machine disturbs less than wall time (the timed numbers are wall time), and its
system part: in a virtual machine whose freed memory goes back to the host (a balloon),
the first touch of fresh pages (`invert`'s outputs) can cost ~2 s per GB there, the
"half-speed" runs (plain NumPy `np.ones` shows the same).

Accuracy: max |w - w_true| over the problems each solver reports converged.
Forward model: `amsa` on the whole cube at w_true, per backend, timed right after each
`invert` run ("forward-numba", "forward-jax": evaluations/s); ``forward_units`` is
invert's time per problem in units of one evaluation's, per repetition, and its median.

Targets (not asserted): numba >= 40x refmod, JAX on CPU >= 35x refmod.

``--gpu``: where ``jax.devices()[0]`` is a GPU, also a 1024 x 1024 x 64 float32 cube
through solver="jax": problems/s and the device's ``peak_bytes_in_use``.

Usage::

    python benchmarks/bench_invert.py                  # full benchmark, ~2-4 min on 2 cores
    python benchmarks/bench_invert.py --side 128 --repeat 1 --scipy-problems 200   # smoke
    python benchmarks/bench_invert.py --gpu

Writes ``benchmarks/results/invert.json`` (``--json`` to change).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import jax
from helpers import FULL_PARAMS, random_geometry

import lumaxlike
from lumaxlike._inverse.albedo.invert import solver_chunk_pixels
from lumaxlike._inverse.chunking import call_chunk
from lumaxlike._model import equations
from lumaxlike.testing import synthetic_cube

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"numba": 40.0, "jax": 35.0}  # lumaxlike / refmod: the targets
# scipy's defaults (1e-8) stop up to 3e-4 away in w here; 1e-12 brings it to ~1e-8 for
# ~10 % more function evaluations, so the baseline is timed at a comparable accuracy.
SCIPY_TOLERANCES = {"xtol": 1e-12, "ftol": 1e-12, "gtol": 1e-12}


# ---------------------------------------------------------------------------------------
# Machine and data


def machine_info() -> dict:
    """CPU model, cores, numba threads, load and library versions."""
    import numba

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = {"python": platform.python_version()}
    for name in (
        "lumaxlike",
        "numpy",
        "scipy",
        "jax",
        "jaxlib",
        "numba",
        "optimistix",
        "equinox",
        "refmod",
    ):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    info = {
        "cpu": model,
        "cores": os.cpu_count(),
        "cores_available": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "numba_threads": numba.get_num_threads(),
        "jax_device": str(jax.devices()[0]),
        "platform": platform.platform(),
        "versions": versions,
    }
    try:
        import psutil

        info["memory_bytes"] = psutil.virtual_memory().total
    except ImportError:
        pass
    info["git_commit"] = _git_commit()
    if hasattr(os, "getloadavg"):
        info["load_average_start"] = os.getloadavg()
    return info


def _git_commit() -> str | None:
    """HEAD of the checkout the benchmark runs from, "+dirty" with uncommitted changes."""
    import subprocess

    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def make_cube(side: int, bands: int, dtype=np.float64, seed: int = 0) -> dict:
    """The benchmark cube (`lumaxlike.testing.synthetic_cube` with the tests' geometry and
    FULL_PARAMS), with ``w_true``, flattened to (pixels, bands) / (pixels, 3)."""
    cube = synthetic_cube(
        side, bands, dtype, params=FULL_PARAMS, seed=seed, geometry=random_geometry, truth=True
    )
    n = side * side
    flat = {
        key: cube[key].reshape(n, -1) for key in ("refl", "to_sun", "to_sensor", "normal", "w_true")
    }
    flat["params"] = cube["params"]
    return flat


def geometry(cube):
    return cube["to_sun"], cube["to_sensor"], cube["normal"]


def _cpu_seconds() -> float:
    """CPU time of this process, all threads (user + system) [s]."""
    return time.process_time()


def _system_seconds() -> float:
    """System (kernel) CPU time of this process [s]: page faults on fresh memory land here."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


# ---------------------------------------------------------------------------------------
# lumaxlike


def warm_up_lumaxlike(cube, solver: str, chunk_size=None) -> dict:
    """Compile (JAX) or load the cache (numba) on the first chunk's pixels of `cube`."""
    n_bands = cube["refl"].shape[1]
    largest = chunk_size or solver_chunk_pixels(solver, n_bands, cube["refl"].dtype)
    chunk = call_chunk(solver, cube["refl"].shape[0], largest)  # the timed run's chunks
    piece = slice(0, chunk)  # exactly one chunk: the timed run's chunk shape
    start = time.perf_counter()
    lumaxlike.invert(
        cube["refl"][piece],
        *(g[piece] for g in geometry(cube)),
        cube["params"],
        solver,
        chunk_size=chunk_size,
    )
    warmup_problems = cube["refl"][piece].shape[0] * n_bands  # the chunk may be padded
    return {"warmup_s": time.perf_counter() - start, "warmup_problems": warmup_problems}


def time_lumaxlike(cube, solver: str, chunk_size=None) -> dict:
    """One timed `invert` of the whole cube; throughput and accuracy."""
    refl = cube["refl"]
    cpu, system, start = _cpu_seconds(), _system_seconds(), time.perf_counter()
    result = lumaxlike.invert(refl, *geometry(cube), cube["params"], solver, chunk_size=chunk_size)
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    system = _system_seconds() - system
    converged = result.status == lumaxlike.Status.CONVERGED
    error = np.abs(result.w.astype(np.float64) - cube["w_true"])[converged]
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "system_seconds": system,
        "problems": refl.size,
        "problems_per_s": refl.size / seconds,
        "problems_per_cpu_s": refl.size / cpu,
        "converged_fraction": float(converged.mean()),
        "status_counts": result.counts(),
        "mean_iterations": float(result.iterations[converged].mean()),
        "max_abs_w_error": float(error.max()),
    }


def warm_up_forward(cube, backend: str) -> dict:
    """Compile (JAX) or load (numba) the forward model at the timed call's shape."""
    start = time.perf_counter()
    lumaxlike.amsa(cube["w_true"], *geometry(cube), cube["params"], backend=backend)
    return {"warmup_s": time.perf_counter() - start}


def time_forward(cube, backend: str) -> dict:
    """One forward-model evaluation of the whole cube at w_true (`amsa`): evaluations/s."""
    w = cube["w_true"]
    cpu, system, start = _cpu_seconds(), _system_seconds(), time.perf_counter()
    lumaxlike.amsa(w, *geometry(cube), cube["params"], backend=backend)
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    system = _system_seconds() - system
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "system_seconds": system,
        "problems": w.size,
        "problems_per_s": w.size / seconds,
        "problems_per_cpu_s": w.size / cpu,
    }


def forward_units(invert_runs: list[dict], forward_runs: list[dict]) -> dict:
    """`invert`'s time per problem in units of one forward evaluation's, per repetition
    (the two timed back to back), and their median: in wall time and in CPU time (all
    threads; less disturbed by other processes on a shared machine)."""
    units = [f["problems_per_s"] / i["problems_per_s"] for i, f in zip(invert_runs, forward_runs)]
    cpu = [i["cpu_seconds"] / f["cpu_seconds"] for i, f in zip(invert_runs, forward_runs)]
    return {
        "median": statistics.median(units),
        "all": units,
        "cpu_median": statistics.median(cpu),
        "cpu_all": cpu,
    }


# ---------------------------------------------------------------------------------------
# Baselines


def sample_problems(cube, n: int, seed: int, solvable_only: bool) -> dict:
    """n (pixel, band) problems drawn uniformly, flattened: refl (n,), geometry (n, 3)."""
    n_pixels, n_bands = cube["refl"].shape
    rng = np.random.default_rng(seed)
    if solvable_only:
        candidates = np.flatnonzero(np.isfinite(cube["refl"]).ravel())
        flat = rng.choice(candidates, size=min(n, candidates.size), replace=False)
    else:
        flat = rng.choice(n_pixels * n_bands, size=min(n, n_pixels * n_bands), replace=False)
    flat.sort()
    pixel, band = np.divmod(flat, n_bands)
    return {
        "refl": cube["refl"][pixel, band].astype(np.float64),
        "to_sun": cube["to_sun"][pixel].astype(np.float64),
        "to_sensor": cube["to_sensor"][pixel].astype(np.float64),
        "normal": cube["normal"][pixel].astype(np.float64),
        "w_true": cube["w_true"][pixel, band],
    }


def _python_terms(to_sun, to_sensor, normal, params):
    """`equations.pixel_terms` in plain Python (math primitives) for one problem."""
    legendre = [0.0] * (equations.N_LEGENDRE + 1)
    return equations.pixel_terms(
        [float(v) for v in to_sun],
        [float(v) for v in to_sensor],
        [float(v) for v in normal],
        *(float(p) for p in params.scalars()),
        legendre,
        False,
    )


def scipy_baseline(sample: dict, params, hoisted: bool) -> dict:
    """A per-problem `scipy.optimize.least_squares` loop with the model in plain Python.

    ``hoisted=False``: every residual call evaluates ``reflectance(w, pixel_terms(...))``;
    ``hoisted=True``: ``pixel_terms`` once per problem, ``reflectance`` per call.
    """
    from scipy.optimize import least_squares

    refl = sample["refl"]
    w = np.empty_like(refl)
    converged = np.zeros(refl.shape, bool)
    evaluations = 0
    start = time.perf_counter()
    for k in range(refl.size):
        r_obs = float(refl[k])
        args = (sample["to_sun"][k], sample["to_sensor"][k], sample["normal"][k], params)
        if hoisted:
            terms = _python_terms(*args)

            def residual(x, terms=terms, r_obs=r_obs):
                return [equations.reflectance(float(x[0]), terms) - r_obs]
        else:

            def residual(x, args=args, r_obs=r_obs):
                return [equations.reflectance(float(x[0]), _python_terms(*args)) - r_obs]

        fit = least_squares(residual, x0=[0.5], bounds=(0.0, 1.0), **SCIPY_TOLERANCES)
        w[k] = fit.x[0]
        converged[k] = fit.success
        evaluations += fit.nfev
    seconds = time.perf_counter() - start
    error = np.abs(w - sample["w_true"])[converged]
    return {
        "seconds": seconds,
        "problems": int(refl.size),
        "problems_per_s": refl.size / seconds,
        "converged_fraction": float(converged.mean()),
        "mean_function_evaluations": evaluations / refl.size,
        "max_abs_w_error": float(error.max()) if error.size else None,
    }


def refmod_legendre(params, n_max: int = 15) -> np.ndarray:
    """Legendre coefficients of lumaxlike's double HG: b_n = (2n+1) b^n, times c for odd n."""
    n = np.arange(n_max + 1, dtype=np.float64)
    b_n = (2.0 * n + 1.0) * float(params.b) ** n
    b_n[1::2] *= float(params.c)
    return b_n


def refmod_available() -> bool:
    try:
        import refmod.hapke.inverse  # noqa: F401
    except ImportError:
        return False
    return True


def refmod_call(sample: dict, params):
    """One `refmod.hapke.inverse.invert_amsa` call on the sample (float64); returns w."""
    import jax.numpy as jnp
    from refmod.hapke.inverse import invert_amsa

    with jax.enable_x64(True):
        arrays = [
            jnp.asarray(sample[k], jnp.float64) for k in ("refl", "to_sun", "to_sensor", "normal")
        ]
        w = invert_amsa(
            arrays[0],
            jnp.asarray(refmod_legendre(params)),
            arrays[1],
            arrays[2],
            arrays[3],
            roughness=float(params.roughness),
            h_sh=float(params.hs),
            b0_sh=float(params.bs0),
            h_cb=float(params.hc),
            b0_cb=float(params.bc0),
        )
        return np.asarray(w.block_until_ready())


def refmod_self_error(sample: dict, params) -> dict:
    """refmod's own accuracy: invert refmod's forward model of w_true (no model mismatch)."""
    import jax.numpy as jnp
    from refmod.hapke.amsa import amsa as refmod_amsa

    with jax.enable_x64(True):
        refl = refmod_amsa(
            jnp.asarray(sample["w_true"]),
            jnp.asarray(refmod_legendre(params)),
            *(jnp.asarray(sample[k]) for k in ("to_sun", "to_sensor", "normal")),
            roughness=float(params.roughness),
            h_sh=float(params.hs),
            b0_sh=float(params.bs0),
            h_cb=float(params.hc),
            b0_cb=float(params.bc0),
        )
        refl = np.asarray(refl)
    w = refmod_call({**sample, "refl": refl}, params)
    valid = np.isfinite(refl)
    error = np.abs(w - sample["w_true"])[valid]
    both = valid & np.isfinite(sample["refl"])
    model_difference = np.abs(refl - sample["refl"])[both] / sample["refl"][both]
    return {
        "self_max_abs_w_error": float(error.max()),
        "self_median_abs_w_error": float(np.median(error)),
        "self_fraction_error_above_1e-6": float((error > 1e-6).mean()),
        "max_relative_model_difference": float(model_difference.max()),
        "finite_disagreement": int((np.isfinite(refl) != np.isfinite(sample["refl"])).sum()),
    }


def warm_up_refmod(sample, params) -> dict:
    start = time.perf_counter()
    refmod_call(sample, params)
    return {"warmup_s": time.perf_counter() - start}


def time_refmod(sample: dict, params) -> dict:
    """Throughput of refmod on the sample; accuracy where the reflectance is finite."""
    cpu, system, start = _cpu_seconds(), _system_seconds(), time.perf_counter()
    w = refmod_call(sample, params)
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    system = _system_seconds() - system
    valid = np.isfinite(sample["refl"])
    error = np.abs(w - sample["w_true"])[valid & np.isfinite(w)]
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "system_seconds": system,
        "problems": int(w.size),
        "problems_per_s": w.size / seconds,
        "problems_per_cpu_s": w.size / cpu,
        "finite_fraction": float(np.isfinite(w[valid]).mean()),
        "max_abs_w_error": float(error.max()) if error.size else None,
        "median_abs_w_error": float(np.median(error)) if error.size else None,
    }


# ---------------------------------------------------------------------------------------
# Summaries


def summarize(runs: list[dict]) -> dict:
    """Median and best throughput over repeated runs, and the last run's details."""
    rates = [r["problems_per_s"] for r in runs]
    summary = dict(runs[-1])
    summary.update(
        problems_per_s=statistics.median(rates),
        best_problems_per_s=max(rates),
        all_problems_per_s=rates,
        repeats=len(runs),
    )
    if all("problems_per_cpu_s" in r for r in runs):
        summary["problems_per_cpu_s"] = statistics.median(r["problems_per_cpu_s"] for r in runs)
        summary["all_cpu_seconds"] = [r["cpu_seconds"] for r in runs]
        summary["all_system_seconds"] = [r["system_seconds"] for r in runs]
    return summary


def ratio_table(lumaxlike_rates: dict, baselines: dict) -> dict:
    """{f"{solver}/{baseline}": rate ratio} for every pair with numbers."""
    return {
        f"{solver}/{name}": lumaxlike_rates[solver] / base["problems_per_s"]
        for solver in lumaxlike_rates
        for name, base in baselines.items()
        if base is not None
    }


def fmt_rate(rate: float) -> str:
    return f"{rate / 1e6:.3f} M/s" if rate >= 1e5 else f"{rate:,.0f} /s"


def print_report(report: dict) -> None:
    machine = report["machine"]
    print(
        f"\nmachine: {machine['cpu']}, {machine['cores_available']} cores, numba threads "
        f"{machine['numba_threads']}, jax {machine['versions']['jax']} ({machine['jax_device']})"
    )
    cube = report["cube"]
    print(
        f"cube: {cube['side']} x {cube['side']} x {cube['bands']} {cube['dtype']} = {cube['problems']:,} problems\n"
    )
    print(
        "| solver | problems | compile/warm-up s | run s | problems/s (median) | best | per CPU-second | max abs w error |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, r in report["results"].items():
        if r is None:
            continue
        warm = "-" if r.get("warmup_s") is None else f"{r['warmup_s']:.2f}"
        error = "-" if r.get("max_abs_w_error") is None else f"{r['max_abs_w_error']:.1e}"
        best = fmt_rate(r.get("best_problems_per_s", r["problems_per_s"]))
        per_cpu = fmt_rate(r["problems_per_cpu_s"]) if "problems_per_cpu_s" in r else "-"
        print(
            f"| {name} | {r['problems']:,} | {warm} | {r['seconds']:.2f} | "
            f"{fmt_rate(r['problems_per_s'])} | {best} | {per_cpu} | {error} |"
        )
    refmod = report["results"].get("refmod")
    if refmod:
        print(
            f"\nrefmod accuracy: on lumaxlike's reflectance max |dw| {refmod['max_abs_w_error']:.1e} "
            f"(median {refmod['median_abs_w_error']:.1e}; the models differ by up to "
            f"{refmod['max_relative_model_difference']:.1%} in r); on its own forward model max |dw| "
            f"{refmod['self_max_abs_w_error']:.1e} (median {refmod['self_median_abs_w_error']:.1e})"
        )
    if report.get("forward_units"):
        print(
            "\n| solver | invert per problem, in forward evaluations (median over repetitions): "
            "wall time | CPU time |"
        )
        print("|---|---|---|")
        for solver, units in report["forward_units"].items():
            print(f"| {solver} | {units['median']:.2f} | {units['cpu_median']:.2f} |")
    print("\n| ratio (median rates) | value | target |")
    print("|---|---|---|")
    for key, value in report["ratios"].items():
        solver, base = key.split("/")
        target = TARGETS.get(solver) if base == "refmod" else None
        verdict = (
            "" if target is None else f">= {target:g}x: {'met' if value >= target else 'NOT met'}"
        )
        print(f"| {key} | {value:,.1f}x | {verdict} |")
    if report.get("gpu"):
        g = report["gpu"]
        peak = (
            "-" if g.get("device_peak_bytes") is None else f"{g['device_peak_bytes'] / 1e9:.2f} GB"
        )
        print(
            f"\nGPU {g['device']}: {g['side']}x{g['side']}x{g['bands']} float32, {fmt_rate(g['problems_per_s'])}, "
            f"compile {g['warmup_s']:.1f} s, max abs w error {g['max_abs_w_error']:.1e}, device peak {peak}"
        )


# ---------------------------------------------------------------------------------------
# GPU


def run_gpu(side: int = 1024, bands: int = 64, chunk_size=None, seed: int = 0):
    """1024 x 1024 x 64 float32 through solver="jax" on the GPU; None without a GPU."""
    device = jax.devices()[0]
    if device.platform != "gpu":
        print(f"--gpu: no GPU (jax.devices()[0] is {device}); skipped")
        return None
    cube = make_cube(side, bands, np.float32, seed)
    warm = warm_up_lumaxlike(cube, "jax", chunk_size)
    run = time_lumaxlike(cube, "jax", chunk_size)
    stats = device.memory_stats() or {}
    return {
        "device": str(device),
        "side": side,
        "bands": bands,
        "dtype": "float32",
        **warm,
        **run,
        "device_peak_bytes": stats.get("peak_bytes_in_use"),
    }


# ---------------------------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", type=int, default=512, help="pixels per side (default 512)")
    parser.add_argument("--bands", type=int, default=64, help="bands (default 64)")
    parser.add_argument(
        "--repeat", type=int, default=5, help="timed runs per solver, interleaved (default 5)"
    )
    parser.add_argument(
        "--scipy-problems", type=int, default=2000, help="scipy subsample (default 2000)"
    )
    parser.add_argument(
        "--refmod-problems", type=int, default=200_000, help="refmod subsample (default 200k)"
    )
    parser.add_argument(
        "--chunk-size", type=int, default=None, help="invert's chunk_size (default: its own)"
    )
    parser.add_argument(
        "--solvers", default="numba,jax", help="lumaxlike solvers to time (default numba,jax)"
    )
    parser.add_argument("--no-scipy", action="store_true")
    parser.add_argument("--no-refmod", action="store_true")
    parser.add_argument(
        "--gpu", action="store_true", help="also the 1024x1024x64 float32 GPU run (if a GPU)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=RESULTS / "invert.json")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    solvers = [s for s in args.solvers.split(",") if s]
    report = {"machine": machine_info(), "settings": vars(args) | {"json": str(args.json)}}
    print(f"generating {args.side} x {args.side} x {args.bands} float64 cube ...", file=sys.stderr)
    cube = make_cube(args.side, args.bands, np.float64, args.seed)
    report["cube"] = {
        "side": args.side,
        "bands": args.bands,
        "dtype": "float64",
        "problems": cube["refl"].size,
        "finite_fraction": float(np.isfinite(cube["refl"]).mean()),
    }
    use_refmod = not args.no_refmod and refmod_available()
    refmod_sample = (
        sample_problems(cube, args.refmod_problems, args.seed + 1, solvable_only=False)
        if use_refmod
        else None
    )

    warm = {}
    for solver in solvers:
        warm[solver] = warm_up_lumaxlike(cube, solver, args.chunk_size)
        print(f"{solver}: warm-up {warm[solver]['warmup_s']:.2f} s", file=sys.stderr)
        warm[f"forward-{solver}"] = warm_up_forward(cube, solver)
    if use_refmod:
        warm["refmod"] = warm_up_refmod(refmod_sample, cube["params"])
        print(f"refmod: warm-up {warm['refmod']['warmup_s']:.2f} s", file=sys.stderr)

    runs = {name: [] for name in warm}
    for rep in range(args.repeat):
        for solver in solvers:
            runs[solver].append(time_lumaxlike(cube, solver, args.chunk_size))
            print(
                f"[{rep + 1}/{args.repeat}] {solver}: {fmt_rate(runs[solver][-1]['problems_per_s'])}",
                file=sys.stderr,
            )
            runs[f"forward-{solver}"].append(time_forward(cube, solver))
        if use_refmod:
            runs["refmod"].append(time_refmod(refmod_sample, cube["params"]))
            print(
                f"[{rep + 1}/{args.repeat}] refmod: {fmt_rate(runs['refmod'][-1]['problems_per_s'])}",
                file=sys.stderr,
            )

    results = {name: {**warm[name], **summarize(r)} for name, r in runs.items()}
    # invert's time per problem in forward evaluations of the same backend, same repetition
    report["forward_units"] = {s: forward_units(runs[s], runs[f"forward-{s}"]) for s in solvers}
    if use_refmod:
        results["refmod"].update(refmod_self_error(refmod_sample, cube["params"]))
    if not use_refmod:
        results["refmod"] = None
        report["refmod_note"] = "refmod not importable or --no-refmod"
    if not args.no_scipy:
        sample = sample_problems(cube, args.scipy_problems, args.seed + 2, solvable_only=True)
        for name, hoisted in (("scipy", False), ("scipy-hoisted", True)):
            results[name] = scipy_baseline(sample, cube["params"], hoisted)
            print(f"{name}: {fmt_rate(results[name]['problems_per_s'])}", file=sys.stderr)
    report["results"] = results
    baselines = {
        name: results.get(name)
        for name in ("refmod", "scipy", "scipy-hoisted")
        if results.get(name)
    }
    report["ratios"] = ratio_table({s: results[s]["problems_per_s"] for s in solvers}, baselines)
    if args.gpu:
        del cube
        report["gpu"] = run_gpu(chunk_size=args.chunk_size, seed=args.seed)
    finish(report, print_report, args.json)
    return 0


def finish(report: dict, print_report, path: Path) -> None:
    """Record the load at the end, print the report and write it as JSON to `path`."""
    if hasattr(os, "getloadavg"):
        report["machine"]["load_average_end"] = os.getloadavg()
    print_report(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=_json_default) + "\n")
    print(f"\nwrote {path}", file=sys.stderr)


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (Path, tuple)):
        return str(value)
    return str(value)


if __name__ == "__main__":
    raise SystemExit(main())
