"""The accelerator rows: lumaxlike's JAX path on JAX's default device (a GPU or a TPU),
each row in its own processes, one process at a time.

Run by `benchmarks/accelerator.sh`. The parent process never imports JAX (one process at
a time can hold a TPU): it asks a child for the device, then runs every row in two new
processes in turn, both with the row's own, initially empty, lumaxlike cache folder
(``LUMAXLIKE_CACHE_DIR``, which holds JAX's persistent compilation cache):

1. the row's measurement: the first call's time ("first_call_s": compilation and one
   run), ``--repeat`` timed calls (median: "seconds", "problems_per_s"),
   "compile_s" = first call - median; the device-resident rate (inputs already on the
   device as JAX arrays, outputs left there where the public API allows it,
   ``block_until_ready``) beside the host-to-host one (NumPy in and out); the converged
   fraction; the accuracy against a float64 reference computed on the host (numba) on a
   subsample ("reference_problems");
2. the same row's first call in a second new process ("second_process"): with the
   persistent compilation cache the first process wrote, its compile time
   ("compile_s" = its first call - the first process's median) should be about 0.

Each process also counts what it compiled ("compiles": XLA's compile requests and their
seconds, JAX's persistent-cache hits and misses, lumaxlike's stored programs loaded,
compiled and written): a second process should miss nothing and compile nothing.

Rows (problem construction from `lumaxlike.testing` and the public functions only, so
that the rows measure whatever solvers the package has):

- forward: `amsa(backend="jax")`, float32, 1000 x 1000 pixels x 100 bands;
  device-resident through `jax.jit` around `amsa` (documented: it returns JAX arrays
  under a transformation);
- invert float32 and float64: `synthetic_cube` 1024 x 1024 x 64 (`default_params`:
  roughness, both opposition effects), solver="jax"; accuracy: the fraction of the
  problems the float64 numba reference solves whose w is within 1e-5 of it. float64 is
  refused on a TPU (`lumaxlike/_model/device_precision.py`): the row records the
  refusal, then measures the emulated float64 with ``LUMAXLIKE_EMULATED_FLOAT64=1``;
- fit float32: 1 M problems (62 500 pixels x 16 bands), 16 observations
  (`multi_angle_geometry`), w, b, c, roughness free, noise 1e-4; accuracy: converged
  fractions against numba float64's on the subsample, and the largest difference in
  units of the reference's sigma;
- unmix one-step float32: 500 x 500 pixels, 64 bands, 4 endmembers
  (`bench_unmix.make_library`/`make_scene`); accuracy: the largest mass-fraction
  difference from numba's;
- normalize float32: the invert cube; accuracy: the largest relative difference of the
  normalised reflectance from numba float64's;
- sample float32: 512 pixels x 8 bands (4096 problems), w, b, c free, 16 observations,
  noise 3e-4, the defaults (4 chains x 1000 draws); the rate in problems/s and the
  chains' ESS (per problem the smallest bulk or tail ESS over the parameters: median,
  and the fraction of problems at >= 400), R-hat and the 95 % interval's coverage of
  the true w (sample has no CPU float64 reference: its draws depend on the device's
  arithmetic; the coverage is the accuracy).

Without an accelerator the parent refuses (exit 2) unless ``--allow-cpu`` (for checking
the script); ``--quick`` shrinks every row to seconds.

Usage::

    benchmarks/accelerator.sh                                  # on a GPU or TPU machine
    python benchmarks/bench_accelerator.py --allow-cpu --quick --json /tmp/acc.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ROWS = ("forward", "invert_f32", "invert_f64", "fit", "unmix", "normalize", "sample")
FULL = {
    "forward": (1000, 100),
    "invert": (1024, 64),
    "fit": (62_500, 16, 16),
    "unmix": 500,
    "normalize": (1024, 64),
    "sample": (512, 8),
    "reference_pixels": 4096,
}
QUICK = {
    "forward": (32, 8),
    "invert": (32, 8),
    "fit": (64, 2, 16),
    "unmix": 8,
    "normalize": (32, 8),
    "sample": (2, 2),
    "reference_pixels": 64,
}
FIT_FREE = ("w", "b", "c", "roughness")
FIT_SIGMA = 1e-4
SAMPLE_SIGMA = 3e-4
FLOAT64_ENV = "LUMAXLIKE_EMULATED_FLOAT64"  # lumaxlike._model.device_precision


# ---------------------------------------------------------------------------------------
# the child: one row


def timed_calls(call, repeat: int) -> dict:
    """The first call's time, then `repeat` timed calls (median, best)."""
    start = time.perf_counter()
    call()
    first = time.perf_counter() - start
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    median = statistics.median(seconds) if seconds else math.nan
    return {
        "first_call_s": first,
        "seconds": median,
        "best_seconds": min(seconds) if seconds else math.nan,
        "compile_s": max(first - median, 0.0) if seconds else math.nan,
    }


def on_device(*arrays):
    """The arrays as JAX arrays on the default device, transfers finished."""
    import jax

    moved = [jax.device_put(a) for a in arrays]
    jax.block_until_ready(moved)
    return moved


def finished(value):
    """`value`'s JAX arrays finished (`block_until_ready`); whether any output was one."""
    import jax

    leaves = [x for x in jax.tree.leaves(vars(value) if hasattr(value, "__dict__") else value)]
    devices = [x for x in leaves if isinstance(x, jax.Array)]
    jax.block_until_ready(devices)
    return bool(devices)


def subsample(n: int, count: int) -> np.ndarray:
    return np.sort(np.random.default_rng(7).choice(n, min(n, count), replace=False))


def forward_row(sizes, repeat, quick):
    import jax

    import lumaxlike
    from lumaxlike.testing import default_params, random_geometry

    side, bands = sizes["forward"]
    rng = np.random.default_rng(1)
    n = side * side
    w = rng.uniform(0.05, 0.95, (n, bands)).astype(np.float32)
    geometry = [g.astype(np.float32) for g in random_geometry(n, rng)]
    params = default_params()
    out = {}

    def host():
        out["r"] = lumaxlike.amsa(w, *geometry, params, backend="jax")

    row = timed_calls(host, repeat)
    if repeat == 0:  # the first call alone (a second process)
        return row
    resident = jax.jit(lambda *a: lumaxlike.amsa(*a, params, backend="jax"))
    device_inputs = on_device(w, *geometry)
    row["device_resident"] = timed_calls(
        lambda: resident(*device_inputs).block_until_ready(), repeat
    )
    row["device_resident"]["outputs"] = "device (jax.jit around amsa)"
    pick = subsample(n, sizes["reference_pixels"])
    picked = [g[pick].astype(np.float64) for g in geometry]
    reference = lumaxlike.amsa(w[pick].astype(np.float64), *picked, params, backend="numba")
    ok = np.isfinite(reference) & (reference > 0)
    relative = np.abs(out["r"][pick][ok] - reference[ok]) / reference[ok]
    row.update(
        problems=w.size,
        unit="evaluations",
        dtype="float32",
        accuracy={"max_relative_error": float(relative.max()), "reference": "numba float64"},
    )
    return row


def cube_for(side, bands, dtype):
    from lumaxlike.testing import default_params, synthetic_cube

    cube = synthetic_cube(side, bands, dtype, params=default_params(), seed=0)
    n = side * side
    return {k: cube[k].reshape(n, -1) for k in ("refl", "to_sun", "to_sensor", "normal")}, cube[
        "params"
    ]


def host_and_device(call, inputs, repeat):
    """Timed calls with NumPy inputs, then with the inputs on the device; the last
    host-to-host result."""
    out = {}

    def host():
        out["result"] = call(*inputs)

    row = timed_calls(host, repeat)
    if repeat == 0:  # the first call alone (a second process)
        return row, out["result"]
    device_inputs = on_device(*inputs)
    kept = {}

    def resident():
        kept["device_outputs"] = finished(call(*device_inputs))

    try:
        row["device_resident"] = timed_calls(resident, repeat)
        row["device_resident"]["outputs"] = (
            "device" if kept["device_outputs"] else "host (the public API returns NumPy arrays)"
        )
    except (TypeError, ValueError) as error:  # the public API refuses JAX arrays
        row["device_resident"] = {"error": f"{type(error).__name__}: {error}"}
    return row, out["result"]


def invert_row(sizes, repeat, quick, dtype):
    import lumaxlike

    refusal = None
    if dtype == np.float64:
        refusal = float64_refusal()
        os.environ[FLOAT64_ENV] = "1"  # measure the emulated float64 anyway
    side, bands = sizes["invert"]
    arrays, params = cube_for(side, bands, dtype)
    inputs = [arrays[k] for k in ("refl", "to_sun", "to_sensor", "normal")]

    def call(*a):
        return lumaxlike.invert(*a, params, "jax")

    row, result = host_and_device(call, inputs, repeat)
    if repeat == 0:
        return row
    # NumPy in and out again, the results written into the last call's arrays (``out=``):
    # no fresh host memory to fault in
    kept = {"result": lumaxlike.invert(*inputs, params, "jax")}

    def into_out():
        kept["result"] = lumaxlike.invert(*inputs, params, "jax", out=kept["result"])

    row["host_to_host_out"] = timed_calls(into_out, repeat)
    row["host_to_host_out"]["problems_per_s"] = (
        arrays["refl"].size / row["host_to_host_out"]["seconds"]
    )
    pick = subsample(side * side, sizes["reference_pixels"])
    reference = lumaxlike.invert(*(a[pick].astype(np.float64) for a in inputs), params, "numba")
    solved = reference.status == lumaxlike.Status.CONVERGED
    difference = np.abs(result.w[pick].astype(np.float64) - reference.w)[solved]
    row.update(
        problems=arrays["refl"].size,
        dtype=np.dtype(dtype).name,
        converged_fraction=float(np.mean(result.status == lumaxlike.Status.CONVERGED)),
        float64_refused_on_this_device=refusal,
        accuracy={
            "reference": "invert numba float64",
            "reference_converged_fraction": float(solved.mean()),
            "within_1e-5_fraction": float(np.mean(difference <= 1e-5)),
            "max_abs_w_difference": float(np.nanmax(difference)),
        },
    )
    return row


def float64_refusal():
    """lumaxlike's answer to a float64 JAX call on this device: its error, or None."""
    import lumaxlike
    from lumaxlike.testing import default_params, random_geometry

    os.environ.pop(FLOAT64_ENV, None)
    geometry = random_geometry(1, np.random.default_rng(0))
    try:
        lumaxlike.invert(np.full((1, 1), 0.05), *geometry, default_params(), "jax")
    except ValueError as error:
        return str(error)
    return None


def normalize_row(sizes, repeat, quick):
    import lumaxlike

    side, bands = sizes["normalize"]
    arrays, params = cube_for(side, bands, np.float32)
    inputs = [arrays[k] for k in ("refl", "to_sun", "to_sensor", "normal")]

    def call(*a):
        return lumaxlike.normalize(*a, params, "jax")

    row, result = host_and_device(call, inputs, repeat)
    if repeat == 0:
        return row
    pick = subsample(side * side, sizes["reference_pixels"])
    reference = lumaxlike.normalize(*(a[pick].astype(np.float64) for a in inputs), params, "numba")
    solved = reference.status == lumaxlike.Status.CONVERGED
    got = result.reflectance[pick].astype(np.float64)[solved]
    relative = np.abs(got - reference.reflectance[solved]) / np.abs(reference.reflectance[solved])
    row.update(
        problems=arrays["refl"].size,
        dtype="float32",
        converged_fraction=float(np.mean(result.status == lumaxlike.Status.CONVERGED)),
        accuracy={
            "reference": "normalize numba float64",
            "reference_converged_fraction": float(solved.mean()),
            "max_relative_difference": float(np.nanmax(relative)),
        },
    )
    return row


def fit_scene(pixels, bands, observations):
    """`bench_fit`'s scene from `lumaxlike.testing`: refl (pixels, bands, obs) with noise
    FIT_SIGMA, geometry (pixels, obs, 3), float64."""
    import lumaxlike
    from lumaxlike.testing import multi_angle_geometry, multi_angle_reflectance

    truth = lumaxlike.HapkeParams(
        b=0.25, c=0.5, roughness=math.radians(20.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5
    )
    rng = np.random.default_rng(0)
    geometry = multi_angle_geometry(pixels, observations, rng)
    w_true = rng.uniform(0.2, 0.9, (pixels, bands))
    refl = multi_angle_reflectance(w_true, *geometry, truth)
    return [refl + rng.normal(0.0, FIT_SIGMA, refl.shape), *geometry]


def fit_row(sizes, repeat, quick):
    import lumaxlike

    pixels, bands, observations = sizes["fit"]
    scene = fit_scene(pixels, bands, observations)
    start = lumaxlike.HapkeParams(
        b=0.3, c=0.4, roughness=math.radians(15.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5
    )
    options = dict(free=FIT_FREE, refl_sigma=FIT_SIGMA)

    def call(*a):
        return lumaxlike.fit(*a, start, solver="jax", **options)

    row, result = host_and_device(call, [a.astype(np.float32) for a in scene], repeat)
    if repeat == 0:
        return row
    pick = subsample(pixels, max(1, sizes["reference_pixels"] // bands))
    reference = lumaxlike.fit(*(a[pick] for a in scene), start, solver="numba", **options)
    solved = reference.status == lumaxlike.Status.CONVERGED
    both = solved & (result.status[pick] == lumaxlike.Status.CONVERGED)
    z = {
        name: float(
            np.max(
                np.abs(result.values[name][pick] - reference.values[name])[both]
                / reference.sigma(name)[both],
                initial=0.0,
            )
        )
        for name in FIT_FREE
    }
    row.update(
        problems=pixels * bands,
        dtype="float32",
        converged_fraction=float(np.mean(result.status == lumaxlike.Status.CONVERGED)),
        accuracy={
            "reference": "fit numba float64",
            "reference_converged_fraction": float(solved.mean()),
            "subsample_converged_fraction": float(
                np.mean(result.status[pick] == lumaxlike.Status.CONVERGED)
            ),
            "max_difference_in_reference_sigma": z,
        },
    )
    return row


def unmix_row(sizes, repeat, quick):
    sys.path.insert(0, str(HERE))
    import bench_unmix

    import lumaxlike

    side = sizes["unmix"]
    endmembers = bench_unmix.make_library()
    scene = bench_unmix.make_scene(side, endmembers)
    inputs = [a.astype(np.float32) for a in (scene["refl"], *scene["geometry"])]
    options = dict(route="one_step", refl_sigma=bench_unmix.SIGMA)

    def call(*a):
        return lumaxlike.unmix(*a, endmembers, bench_unmix.PARAMS, "jax", **options)

    row, result = host_and_device(call, inputs, repeat)
    if repeat == 0:
        return row
    pick = subsample(side * side, sizes["reference_pixels"])
    picked = [a[pick] for a in (scene["refl"], *scene["geometry"])]
    reference = lumaxlike.unmix(*picked, endmembers, bench_unmix.PARAMS, "numba", **options)
    solved = reference.status == lumaxlike.Status.CONVERGED
    both = solved & (result.status[pick] == lumaxlike.Status.CONVERGED)
    difference = np.abs(result.fractions[pick] - reference.fractions)[both]
    row.update(
        problems=side * side,
        unit="pixels",
        dtype="float32",
        converged_fraction=float(np.mean(result.status == lumaxlike.Status.CONVERGED)),
        accuracy={
            "reference": "unmix numba float64",
            "reference_converged_fraction": float(solved.mean()),
            "max_abs_fraction_difference": float(np.max(difference, initial=0.0)),
        },
    )
    return row


def sample_row(sizes, repeat, quick):
    import lumaxlike
    from lumaxlike.testing import multi_angle_geometry, multi_angle_reflectance

    pixels, bands = sizes["sample"]
    params = lumaxlike.HapkeParams(b=0.3, c=0.4)
    rng = np.random.default_rng(12)
    geometry = multi_angle_geometry(pixels, 16, rng)
    w_true = rng.uniform(0.2, 0.8, (pixels, bands))
    refl = multi_angle_reflectance(w_true, *geometry, params)
    refl = refl + SAMPLE_SIGMA * rng.standard_normal(refl.shape)
    inputs = [a.astype(np.float32) for a in (refl, *geometry)]
    chains = dict(num_samples=100, num_warmup=50) if quick else {}

    def call(*a):
        return lumaxlike.sample(*a, params, free=("w", "b", "c"), refl_sigma=SAMPLE_SIGMA, **chains)

    row, result = host_and_device(call, inputs, repeat)
    if repeat == 0:
        return row
    ess = np.min(
        [np.minimum(result.ess[n], result.ess_tail[n]) for n in result.free], axis=0
    ).ravel()
    rhat = np.max([result.rhat[n] for n in result.free], axis=0).ravel()
    low, high = result.quantiles["w"][..., 0], result.quantiles["w"][..., -1]
    row.update(
        problems=pixels * bands,
        dtype="float32",
        converged_fraction=float(np.mean(result.status == lumaxlike.Status.CONVERGED)),
        chains={"num_chains": 4, **({"num_samples": 1000, "num_warmup": 300} | chains)},
        ess={
            "median_min_ess": float(np.nanmedian(ess)),
            "fraction_at_least_400": float(np.mean(ess >= 400)),
            "problems_per_s_at_least_400": float(np.mean(ess >= 400))
            * pixels
            * bands
            / row["seconds"],
            "median_max_rhat": float(np.nanmedian(rhat)),
        },
        accuracy={"w_95_coverage": float(np.mean((low <= w_true) & (w_true <= high)))},
    )
    return row


def count_compiles() -> dict:
    """Counters, filled as this process runs, of its XLA compiles ("backend_compiles":
    JAX's compile requests, persistent-cache loads included, and their seconds), of
    JAX's persistent cache ("cache_hits", "cache_misses") and of lumaxlike's stored
    programs (`jax_executables.store_events`: "loaded", "compiled", "written"); read
    them with `compile_counts`."""
    import jax

    counts = {"backend_compiles": 0, "backend_compile_s": 0.0, "cache_hits": 0, "cache_misses": 0}

    def on_event(event, **_):
        for name in ("cache_hits", "cache_misses"):
            if event == f"/jax/compilation_cache/{name}":
                counts[name] += 1

    def on_duration(event, duration, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            counts["backend_compiles"] += 1
            counts["backend_compile_s"] += duration

    jax.monitoring.register_event_listener(on_event)
    jax.monitoring.register_event_duration_secs_listener(on_duration)
    return counts


def compile_counts(counts: dict) -> dict:
    """`count_compiles`' counters now, with lumaxlike's stored programs'."""
    from lumaxlike._model.jax_executables import store_events

    return {**counts, "stored_programs": dict(store_events)}


def run_child(row_name: str, sizes: dict, repeat: int, quick: bool, first_only: bool) -> dict:
    """One row in this process (a child): its measurement, or the first call alone."""
    import jax

    device = jax.devices()[0]
    counts = count_compiles()
    rows = {
        "forward": forward_row,
        "invert_f32": lambda *a: invert_row(*a, np.float32),
        "invert_f64": lambda *a: invert_row(*a, np.float64),
        "fit": fit_row,
        "unmix": unmix_row,
        "normalize": normalize_row,
        "sample": sample_row,
    }
    row = rows[row_name](sizes, 0 if first_only else repeat, quick)
    if first_only:
        return {"first_call_s": row["first_call_s"], "compiles": compile_counts(counts)}
    row["compiles"] = compile_counts(counts)
    row["problems_per_s"] = row["problems"] / row["seconds"]
    resident = row.get("device_resident", {})
    if "seconds" in resident:
        resident["problems_per_s"] = row["problems"] / resident["seconds"]
    stats = device.memory_stats() or {}
    row["device_peak_bytes"] = stats.get("peak_bytes_in_use")
    return row


def describe_device() -> dict:
    import jax

    device = jax.devices()[0]
    return {
        "platform": device.platform,
        "device_kind": device.device_kind,
        "device": str(device),
        "device_count": jax.device_count(),
        "jax": jax.__version__,
    }


# ---------------------------------------------------------------------------------------
# the parent: never imports JAX


def child_command(args, *extra) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--repeat", str(args.repeat)]
    sizes = [f"--size={size}" for size in args.size]
    return command + (["--quick"] if args.quick else []) + sizes + list(extra)


def row_sizes(quick: bool, overrides: list[str]) -> dict:
    """The rows' sizes (`FULL` or `QUICK`) with ``--size ROW=A[xB[xC]]`` overrides, e.g.
    ``sample=64x8`` (pixels x bands) or ``unmix=256`` (side)."""
    sizes = dict(QUICK if quick else FULL)
    for override in overrides:
        name, _, value = override.partition("=")
        if name not in sizes or not value:
            raise SystemExit(
                f"--size {override!r}: expected ROW=A[xB...], ROW one of {sorted(sizes)}"
            )
        numbers = tuple(int(v) for v in value.split("x"))
        sizes[name] = numbers if isinstance(sizes[name], tuple) else numbers[0]
    return sizes


def in_child(command, env, timeout) -> dict:
    """A child's JSON answer (its last stdout line), or an error with its output's tail."""
    with tempfile.TemporaryDirectory(prefix="lumaxlike-accelerator-") as folder:
        out = Path(folder) / "out.json"
        start = time.perf_counter()
        try:
            done = subprocess.run(
                command + ["--json", str(out)],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"stopped after {timeout:.0f} s"}
        wall = time.perf_counter() - start
        if done.returncode != 0 or not out.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
            return {"error": f"failed (exit {done.returncode})", "log_tail": tail}
        return json.loads(out.read_text()) | {"process_wall_s": wall}


def run_row(name: str, args) -> dict:
    """Row `name`: its measurement in a new process, then its first call in a second new
    process sharing the first's (new) persistent compilation cache."""
    with tempfile.TemporaryDirectory(prefix="lumaxlike-accelerator-cache-") as cache:
        env = dict(os.environ, LUMAXLIKE_CACHE_DIR=cache)
        env.pop(FLOAT64_ENV, None)
        row = in_child(child_command(args, "--child", name), env, args.row_timeout)
        if "error" in row:
            return row
        second = in_child(
            child_command(args, "--child", name, "--first-only"), env, args.row_timeout
        )
        if "first_call_s" in second:
            second["compile_s"] = max(second["first_call_s"] - row["seconds"], 0.0)
        row["second_process"] = second
    return row


def device_kind_slug(kind: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in kind.lower()).strip("-") or "unknown"


def print_row(name: str, row: dict) -> None:
    if "error" in row:
        print(f"  {name}: {row['error']}", file=sys.stderr, flush=True)
        return
    resident = row.get("device_resident", {})
    second = row.get("second_process", {})
    into_out = row.get("host_to_host_out", {}).get("problems_per_s")
    print(
        f"  {name}: {row['problems_per_s']:.3g}/s host to host, "
        f"{resident.get('problems_per_s', math.nan):.3g}/s device-resident"
        + ("" if into_out is None else f", {into_out:.3g}/s into out=")
        + "; compile "
        f"{row['compile_s']:.1f} s, second process {second.get('compile_s', math.nan):.1f} s; "
        f"converged {row.get('converged_fraction', math.nan):.4f}",
        file=sys.stderr,
        flush=True,
    )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated of {ROWS}")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls per row (default 3)")
    parser.add_argument("--quick", action="store_true", help="small sizes (checking the script)")
    parser.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="ROW=AxB",
        help="a row's size instead of the default, e.g. sample=64x8 (pixels x bands); repeatable",
    )
    parser.add_argument(
        "--allow-cpu", action="store_true", help="run where JAX's default device is the CPU"
    )
    parser.add_argument(
        "--row-timeout", type=float, default=1800.0, help="s a row's process may take (1800)"
    )
    parser.add_argument("--json", type=Path, default=None, help="default results/accelerator-KIND")
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        default=None,
        help="join the rows of these reports (runs of a few rows each) into --json; no JAX",
    )
    parser.add_argument(
        "--which-commit",
        metavar="DIGEST",
        default=None,
        help="the commits among the last 200 whose lumaxlike/ has this package_digest "
        "(a report's: the code that ran); no JAX",
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--first-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--describe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = set(args.rows.split(",")) - set(ROWS)
    if unknown:
        parser.error(f"--rows: unknown {sorted(unknown)}; rows are {ROWS}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    sizes = row_sizes(args.quick, args.size)
    if args.merge:
        return merge_reports(args.merge, args.json)
    if args.which_commit:
        print(" ".join(commits_with_digest(args.which_commit)) or "none")
        return 0
    if args.describe or args.child:  # a child process: JAX on the device here
        answer = (
            describe_device()
            if args.describe
            else run_child(args.child, sizes, args.repeat, args.quick, args.first_only)
        )
        args.json.write_text(json.dumps(answer, default=str) + "\n")
        return 0
    device = in_child(child_command(args, "--describe"), dict(os.environ), 600)
    if "error" in device:
        print(f"could not start JAX: {device}", file=sys.stderr)
        return 1
    if device["platform"] == "cpu" and not args.allow_cpu:
        print(
            f"JAX's default device is the CPU ({device['device_kind']}): install jax's GPU or "
            "TPU build (README: On a GPU or TPU), or pass --allow-cpu to check the script",
            file=sys.stderr,
        )
        return 2
    print(f"device: {device}", file=sys.stderr, flush=True)
    out = args.json or RESULTS / f"accelerator-{device_kind_slug(device['device_kind'])}.json"
    report = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "commit": commit(),  # of the tree the script runs in (a copied tree's may be stale)
        "package_digest": package_digest(),  # of the lumaxlike that runs: --which-commit
        "host": {"machine": platform.machine(), "cpus": os.cpu_count()},
        "device": device,
        "sizes": sizes,
        "repeat": args.repeat,
        "rows": {},
    }
    for name in args.rows.split(","):
        print(f"{name} ...", file=sys.stderr, flush=True)
        report["rows"][name] = run_row(name, args)
        print_row(name, report["rows"][name])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1, default=str) + "\n")  # after every row
    print(f"report: {out}")
    return 0


def merge_reports(paths: list[Path], out: Path | None) -> int:
    """The rows of several reports of one device in one report (the first's header)."""
    reports = [json.loads(p.read_text()) for p in paths]
    kinds = {r["device"]["device_kind"] for r in reports}
    if len(kinds) != 1:
        print(f"--merge: reports of different devices {sorted(kinds)}", file=sys.stderr)
        return 2
    merged = reports[0] | {"rows": {}, "merged_from": [str(p) for p in paths]}
    for report in reports:
        merged["rows"].update(report["rows"])
    out = out or RESULTS / f"accelerator-{device_kind_slug(kinds.pop())}.json"
    out.write_text(json.dumps(merged, indent=1, default=str) + "\n")
    print(f"report: {out}")
    return 0


def commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=HERE,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def package_digest() -> str | None:
    """sha256 (12 hex digits) of the installed lumaxlike's Python files (their paths in
    the package and contents, in path order), found without importing it: the code the
    rows run, whatever tree or wheel it came from."""
    import importlib.util

    spec = importlib.util.find_spec("lumaxlike")
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.py")}
    return _digest(files)


def _digest(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name] + b"\0")
    return digest.hexdigest()[:12]


def commits_with_digest(wanted: str, depth: int = 200) -> list[str]:
    """The commits (short hashes) among the last `depth` of this repository whose
    lumaxlike/ Python files have `package_digest` `wanted`."""

    def git(*argv):
        return subprocess.run(
            ["git", *argv], capture_output=True, cwd=HERE.parent, check=True
        ).stdout

    found = []
    for rev in git("rev-list", f"--max-count={depth}", "HEAD").decode().split():
        names = git("ls-tree", "-r", "--name-only", rev, "lumaxlike").decode().split("\n")
        files = {
            n.removeprefix("lumaxlike/"): git("show", f"{rev}:{n}")
            for n in names
            if n.endswith(".py")
        }
        if _digest(files) == wanted:
            found.append(rev[:7])
    return found


if __name__ == "__main__":
    raise SystemExit(main())
