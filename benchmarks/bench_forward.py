"""Benchmark: the forward model `lumaxlike.amsa` on a hyperspectral cube.

The cube (defaults): 1000 x 1000 = 1 M pixels x 100 bands, float64 (1e8 reflectances),
per-pixel geometry from the tests' `random_geometry` (incidence 0-80 deg, emission 0-70 deg,
normals tilted up to 30 deg: ~2 % of pixels have the source or the observer below the
local horizon and give NaN), w uniform in (0.05, 0.95), Hapke parameters with roughness
and both opposition effects (the tests' `FULL_PARAMS`). Pixels are passed flat,
(pixels, bands) and (pixels, 3): `amsa` flattens any pixel shape to that anyway.

Measured:

- numba (`backend="numba"`, `prange` over pixels, numba's default thread count): the
  compile time of the kernel (first call, on a few pixels, with an empty numba cache
  unless ``--numba-cache``), then the best of ``--repeat`` runs on the whole cube.
- JAX on CPU (`backend="jax"`, jitted): the XLA compile time for the cube's shape
  (ahead-of-time ``lower().compile()`` of the same jitted function `amsa` calls), then
  the best of ``--repeat`` runs of the public ``amsa`` on NumPy inputs (includes the
  host-to-device copies and the `(3,)`-broadcasts) and of the jitted kernel alone on
  arrays already on the device.
- refmod (``refmod.hapke.amsa.amsa``, another JAX Hapke package), when installed, on the
  first ``--refmod-problems // bands`` pixels of the same cube with all their bands,
  flattened to one geometry per reflectance value (its API takes a scalar w per pixel),
  phase function as its Legendre series b_n = (2n+1) b^n (times c for odd n), n <= 15, in
  float64 (``jax.enable_x64``): as published (an un-jitted ``vmap``, run eagerly) and
  wrapped in ``jax.jit``. Each warmed up once, then best of ``--repeat``. Ratios are
  lumaxlike's evaluations per second over refmod's. refmod's model differs from
  lumaxlike's (series p(g); a roughness denominator; an epsilon in B_CB): the largest
  relative difference in r is reported, not hidden.

Targets (not asserted): numba within 1 s and JAX within 3 s for the default
cube on 2 cores.

Usage::

    python benchmarks/bench_forward.py                            # ~1-2 min on 2 cores
    python benchmarks/bench_forward.py --pixels 10000 --bands 10  # smoke

Writes ``benchmarks/results/forward.json`` (``--json`` to change).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
TARGET_SECONDS = {"numba": 1.0, "jax": 3.0}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pixels", type=int, default=1_000_000, help="number of pixels (default 1000 x 1000)"
    )
    parser.add_argument("--bands", type=int, default=100, help="bands per pixel (default 100)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="timed runs per backend; the best counts (default 3)"
    )
    parser.add_argument(
        "--refmod-problems",
        type=int,
        default=1_000_000,
        help="reflectances in refmod's subsample (default 1e6; 0 or --no-refmod skips it)",
    )
    parser.add_argument("--no-refmod", action="store_true")
    parser.add_argument(
        "--numba-cache",
        action="store_true",
        help="use lumaxlike's on-disk kernel cache (default: an empty one, so compile time is cold)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=RESULTS / "forward.json")
    return parser.parse_args(argv)


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None and not ARGS.numba_cache:
    # before lumaxlike is imported: a fresh cache directory, so the kernel compiles cold
    os.environ["LUMAXLIKE_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-forward-cache-")

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(ROOT / "tests"))
from helpers import FULL_PARAMS, random_geometry

import lumaxlike
from lumaxlike._model import forward


def machine_info() -> dict:
    import numba

    model = platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(
                line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in ("lumaxlike", "numpy", "jax", "jaxlib", "numba", "refmod"):
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return {
        "cpu": model,
        "cores_available": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "numba_threads": numba.get_num_threads(),
        "jax_device": str(jax.devices()[0]),
        "python": platform.python_version(),
        "versions": versions,
        "load_average_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def make_cube(pixels: int, bands: int, seed: int):
    rng = np.random.default_rng(seed)
    geometry = random_geometry(pixels, rng)
    w = rng.uniform(0.05, 0.95, (pixels, bands))
    return w, geometry


def measure(call) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, all threads) of one call."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


# ---------------------------------------------------------------------------------------
# The timed cases: lumaxlike, the breakdown of where its time goes, refmod


def lumaxlike_cases(w, geometry, params) -> tuple[dict, dict, dict]:
    """{name: call}, compile times, and the public calls' results (for the cross-checks)."""
    from lumaxlike._model import numba_model
    from lumaxlike._model.numba_threads import run_in_blocks

    cases, compile_s, results = {}, {}, {}

    # numba: the kernel's compile (cold cache unless --numba-cache), on a few pixels
    start = time.perf_counter()
    lumaxlike.amsa(w[:16], *(g[:16] for g in geometry), params, backend="numba")
    compile_s["numba"] = time.perf_counter() - start
    cases["numba"] = lambda: lumaxlike.amsa(w, *geometry, params, backend="numba")
    results["numba"] = cases["numba"]()

    # breakdown: the kernel alone into a preallocated (already touched) output, on all
    # bands and on one band (the per-pixel terms, computed once per pixel, dominate that)
    legendre, use_legendre = params.legendre_coefficients(np)
    scalars = np.array([float(v) for v in params.scalars()])
    prepared = [np.require(a, np.float64, ("C", "W")) for a in geometry]
    one_band = np.ascontiguousarray(w[:, :1])
    out, out_one = np.empty(w.shape), np.empty(one_band.shape)

    def numba_kernel(w_, out_):
        return lambda: run_in_blocks(
            numba_model._amsa_pixels_kernel,
            w_.shape[0],
            w_,
            *prepared,
            scalars,
            legendre,
            use_legendre,
            out_,
        )

    cases["numba_kernel"] = numba_kernel(w, out)
    cases["numba_kernel_one_band"] = numba_kernel(one_band, out_one)

    # JAX: XLA's compile for the cube's shape (ahead of time, the function `amsa` jits)
    with jax.enable_x64(True):
        device = [jax.device_put(a) for a in (w, *geometry)]
        device_one = [jax.device_put(one_band), *device[1:]]
        start = time.perf_counter()
        forward._amsa_flat.lower(*device, params).compile()
        compile_s["jax"] = time.perf_counter() - start

    def in_x64(call):
        def run():
            with jax.enable_x64(True):
                return call()

        return run

    cases["jax"] = lambda: jax.block_until_ready(
        lumaxlike.amsa(w, *geometry, params, backend="jax")
    )
    cases["jax_kernel"] = in_x64(lambda: forward._amsa_flat(*device, params).block_until_ready())
    cases["jax_kernel_one_band"] = in_x64(
        lambda: forward._amsa_flat(*device_one, params).block_until_ready()
    )
    cases["jax_copy_w_to_device"] = in_x64(lambda: jax.device_put(w).block_until_ready())
    results["jax"] = np.asarray(cases["jax"]())  # also fills amsa's jit cache (AOT does not)
    for name in ("jax_kernel", "jax_kernel_one_band"):
        cases[name]()
    return cases, compile_s, results


def refmod_available() -> bool:
    try:
        import refmod.hapke.amsa  # noqa: F401
    except ImportError:
        return False
    return True


def refmod_legendre(params, n_max: int = 15) -> np.ndarray:
    """Legendre coefficients of lumaxlike's double HG: b_n = (2n+1) b^n, times c for odd n."""
    n = np.arange(n_max + 1, dtype=np.float64)
    b_n = (2.0 * n + 1.0) * float(params.b) ** n
    b_n[1::2] *= float(params.c)
    return b_n


def refmod_cases(
    w, geometry, params, problems: int, lumaxlike_r: np.ndarray
) -> tuple[dict, dict, dict]:
    """refmod's `amsa` as published (eager vmap) and jitted, on the first pixels of the cube."""
    from refmod.hapke.amsa import amsa as refmod_amsa

    bands = w.shape[1]
    pixels = max(1, problems // bands)
    with jax.enable_x64(True):
        flat_w = jnp.asarray(w[:pixels].reshape(-1))
        flat_geometry = [jnp.asarray(np.repeat(g[:pixels], bands, axis=0)) for g in geometry]
        b_n = jnp.asarray(refmod_legendre(params))
    scalars = {
        "roughness": float(params.roughness),
        "h_sh": float(params.hs),
        "b0_sh": float(params.bs0),
        "h_cb": float(params.hc),
        "b0_cb": float(params.bc0),
    }
    jitted = jax.jit(lambda w_, i, e, n: refmod_amsa(w_, b_n, i, e, n, **scalars))
    cases = {
        "refmod_eager": lambda: _x64(
            lambda: refmod_amsa(flat_w, b_n, *flat_geometry, **scalars).block_until_ready()
        ),
        "refmod_jit": lambda: _x64(lambda: jitted(flat_w, *flat_geometry).block_until_ready()),
    }
    warmup_s = {}
    for name, call in cases.items():
        start = time.perf_counter()
        r = call()
        warmup_s[name] = time.perf_counter() - start
    r = np.asarray(r).reshape(pixels, bands)
    ours = lumaxlike_r[:pixels]
    both = np.isfinite(r) & np.isfinite(ours)
    info = {
        "problems": int(flat_w.size),
        "pixels": pixels,
        "max_relative_model_difference": float(np.max(np.abs(r[both] / ours[both] - 1)))
        if both.any()
        else None,
        "refmod_finite_where_lumaxlike_nan": int((np.isfinite(r) & np.isnan(ours)).sum()),
        "refmod_nan_where_lumaxlike_finite": int((np.isnan(r) & np.isfinite(ours)).sum()),
    }
    return cases, warmup_s, info


def _x64(call):
    with jax.enable_x64(True):
        return call()


# ---------------------------------------------------------------------------------------
# Report


ROWS = [  # (case, label, compile key, target key)
    ("numba", "lumaxlike numba (amsa)", "numba", "numba"),
    ("jax", "lumaxlike jax (amsa)", "jax", "jax"),
    ("jax_kernel", "lumaxlike jax (kernel)", None, None),
    ("refmod_eager", "refmod amsa (as published)", "refmod_eager", None),
    ("refmod_jit", "refmod amsa (jax.jit)", "refmod_jit", None),
]


def print_report(report: dict) -> None:
    s, r = report["settings"], report["results"]
    n = s["pixels"] * s["bands"]
    cores = report["machine"]["cores_available"]
    print(
        f"\nforward model, {s['pixels']:,} pixels x {s['bands']} bands = {n:,} evaluations, float64, roughness + "
        f"SHOE + CBOE, per-pixel geometry; {cores} cores ({report['machine']['cpu']}), load average "
        f"{report['machine']['load_average_start'][0]:.1f} at start, {report['machine']['load_average_end'][0]:.1f} at end"
    )
    print(
        "best of {repeat} interleaved runs; 'cpu s' = CPU time of that run (all threads): on a busy machine "
        "cpu s / cores estimates the wall time of an idle one".format(repeat=s["repeat"])
    )
    refmod = r["cases"].get("refmod_eager") is not None
    header = f"{'':28s}{'compile s':>10s}{'wall s':>8s}{'cpu s':>8s}{'M eval/s':>10s}"
    print(
        header
        + (f"{'x refmod (published/jit)':>26s}" if refmod else "")
        + "  target (wall per 1e8 evaluations)"
    )
    for case, label, compile_key, target_key in ROWS:
        row = r["cases"].get(case)
        if row is None:
            continue
        compile_s = r["compile_s"].get(compile_key) if compile_key else None
        text = f"{label:28s}" + (f"{compile_s:10.2f}" if compile_s is not None else " " * 10)
        text += f"{row['wall_s']:8.3f}{row['cpu_s']:8.2f}{row['evaluations_per_s'] / 1e6:10.1f}"
        if refmod and not case.startswith("refmod"):
            text += f"{row['x_refmod_published']:15.0f}x /{row['x_refmod_jit']:6.1f}x"
        elif refmod:
            text += " " * 26
        if target_key:
            per_1e8 = row["wall_s"] * 1e8 / n
            estimate = row["cpu_s"] / cores * 1e8 / n
            verdict = "met" if per_1e8 <= TARGET_SECONDS[target_key] else "MISSED"
            text += f"  {verdict}: {per_1e8:.2f} s <= {TARGET_SECONDS[target_key]:.0f} s (idle estimate {estimate:.2f} s)"
        print(text)
    if refmod:
        info = r["refmod"]
        print(
            f"(refmod: {info['problems']:,} evaluations, compile column = warm-up; its model differs from "
            f"lumaxlike's by up to {info['max_relative_model_difference']:.1%} in r; finite where lumaxlike is NaN "
            f"(invalid geometry) {info['refmod_finite_where_lumaxlike_nan']:,}, NaN where lumaxlike is finite "
            f"{info['refmod_nan_where_lumaxlike_finite']:,})"
        )
    print(
        f"numba vs jax: max relative difference {r['numba_vs_jax_max_rel']:.1e} (largest near the local horizon, "
        f"~1e-16 / cos i); NaN (invalid geometry) {r['nan_fraction']:.1%}"
    )

    c, per_band = r["cases"], max(1, s["pixels"] * (s["bands"] - 1))

    def split(kernel, one_band, public, extra):
        band = c[kernel]["wall_s"] - c[one_band]["wall_s"]
        return (
            f"per-pixel terms {c[one_band]['wall_s']:.3f} s ({c[one_band]['wall_s'] / s['pixels'] * 1e9:.0f} ns/pixel), "
            f"per-band {band:.3f} s ({band / per_band * 1e9:.1f} ns/evaluation), "
            f"amsa's own {c[public]['wall_s'] - c[kernel]['wall_s']:.3f} s{extra}"
        )

    print("where the wall time goes:")
    print(
        "  numba: "
        + split(
            "numba_kernel", "numba_kernel_one_band", "numba", " (output allocation + first touch)"
        )
    )
    print(
        "  jax:   "
        + split(
            "jax_kernel",
            "jax_kernel_one_band",
            "jax",
            f" (copying w to the device alone {c['jax_copy_w_to_device']['wall_s']:.3f} s)",
        )
    )


def main(argv=None) -> int:
    args = ARGS if argv is None and ARGS is not None else parse_args(argv)
    report = {
        "machine": machine_info(),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
    }
    params = FULL_PARAMS
    w, geometry = make_cube(args.pixels, args.bands, args.seed)
    print("compiling and warming up ...", file=sys.stderr)
    cases, compile_s, outputs = lumaxlike_cases(w, geometry, params)
    results = {"compile_s": compile_s}
    finite = np.isfinite(outputs["jax"])
    results["numba_vs_jax_max_rel"] = float(
        np.max(np.abs(outputs["numba"][finite] / outputs["jax"][finite] - 1))
    )
    results["nan_agreement"] = bool(np.array_equal(np.isnan(outputs["numba"]), ~finite))
    results["nan_fraction"] = float((~finite).mean())
    if not args.no_refmod and args.refmod_problems > 0 and refmod_available():
        refmod, warmup_s, results["refmod"] = refmod_cases(
            w, geometry, params, args.refmod_problems, outputs["jax"]
        )
        cases.update(refmod)
        compile_s.update(warmup_s)
    del outputs
    # interleaved, so that every case sees the same machine load
    times = {name: [] for name in cases}
    for rep in range(args.repeat):
        print(f"run {rep + 1}/{args.repeat} ...", file=sys.stderr)
        for name, call in cases.items():
            times[name].append(measure(call))
    results["cases"] = {}
    for name, runs in times.items():
        wall, cpu = min(runs)
        problems = results["refmod"]["problems"] if name.startswith("refmod") else w.size
        results["cases"][name] = {
            "wall_s": wall,
            "cpu_s": cpu,
            "runs": runs,
            "evaluations_per_s": problems / wall,
        }
    if "refmod_eager" in results["cases"]:
        for row in results["cases"].values():
            row["x_refmod_published"] = (
                row["evaluations_per_s"] / results["cases"]["refmod_eager"]["evaluations_per_s"]
            )
            row["x_refmod_jit"] = (
                row["evaluations_per_s"] / results["cases"]["refmod_jit"]["evaluations_per_s"]
            )
    report["results"] = results
    report["machine"]["load_average_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    print_report(report)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
