"""The GPU rows: `invert`, `fit` and the forward model through JAX on JAX's default device.

Run by `benchmarks/gpu.sh` (which checks that the device is a GPU first). Rows:

- invert: a 1024 x 1024 x 64 cube (`bench_invert.make_cube`), float32 and float64,
  solver="jax", default chunking (sized from the device's memory);
- fit: 1 M problems (62 500 pixels x 16 bands, 16 observations, free w, b, c, roughness;
  `bench_fit.make_scene`), float32 and float64 (fit computes in its input's precision),
  solver="jax", `chunk_size` 8192 pixels (`--fit-chunk`);
- forward: `amsa(backend="jax")` on 1000 x 1000 pixels x 100 bands, float32 and float64.

Each row: a warm-up call of the timed call's shapes first ("compile_s": its time minus
one timed run's), then `--repeat` timed calls (median and best), NumPy arrays in and out
(transfers included: what a user's call costs). "device_peak_bytes" is the device's
`memory_stats()["peak_bytes_in_use"]` after the row: the process's peak so far (JAX has
no reset), so rows run from the smallest footprint up. Without a GPU (`--allow-cpu`, for
checking the script) the rows run on the CPU and have no device memory figures.

Usage::

    benchmarks/gpu.sh                                         # on a CUDA machine
    python benchmarks/bench_gpu.py --allow-cpu --tiny --json /tmp/gpu.json   # CPU check
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import jax  # noqa: E402
from bench_fit import NOISE_SIGMA, make_scene, start_params  # noqa: E402
from bench_invert import finish, fmt_rate, machine_info, make_cube  # noqa: E402

import lumaxlike  # noqa: E402

RESULTS = HERE / "results"
FIT_FREE = ("w", "b", "c", "roughness")
FULL = {"invert": (1024, 64), "fit": (62_500, 16, 16), "forward": (1000, 100)}
TINY = {"invert": (32, 8), "fit": (64, 4, 16), "forward": (16, 10)}  # --tiny: checks the script


def device_peak_bytes(device) -> int | None:
    stats = device.memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def timed(call, repeat: int) -> dict:
    """Warm-up (compile) then `repeat` timed calls of `call()`; rates from its problems."""
    start = time.perf_counter()
    problems = call()
    first = time.perf_counter() - start
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    median = statistics.median(seconds)
    return {
        "problems": problems,
        "compile_s": max(first - median, 0.0),
        "seconds": median,
        "problems_per_s": problems / median,
        "best_problems_per_s": problems / min(seconds),
        "all_seconds": seconds,
    }


def invert_row(side: int, bands: int, dtype, repeat: int) -> dict:
    cube = make_cube(side, bands, dtype)
    geometry = [cube[k] for k in ("to_sun", "to_sensor", "normal")]
    results = {}

    def call():
        results["last"] = lumaxlike.invert(cube["refl"], *geometry, cube["params"], "jax")
        return cube["refl"].size

    row = timed(call, repeat)
    result = results["last"]
    converged = result.status == lumaxlike.Status.CONVERGED
    error = np.abs(result.w.astype(np.float64) - cube["w_true"])[converged]
    from lumaxlike._inverse.invert import solver_chunk_pixels

    return {**row, "side": side, "bands": bands, "dtype": np.dtype(dtype).name,
            "chunk_pixels": solver_chunk_pixels("jax", bands, dtype),
            "converged_fraction": float(converged.mean()), "max_abs_w_error": float(error.max())}  # fmt: skip


def fit_row(pixels: int, bands: int, observations: int, dtype, repeat: int, chunk_size: int | None) -> dict:
    scene = make_scene(pixels, bands, observations)
    pieces = [scene[k].astype(dtype) for k in ("refl", "to_sun", "to_sensor", "normal")]
    results = {}

    def call():
        results["last"] = lumaxlike.fit(*pieces, start_params(FIT_FREE), free=FIT_FREE, solver="jax",
                                        refl_sigma=NOISE_SIGMA, chunk_size=chunk_size)  # fmt: skip
        return pixels * bands

    row = timed(call, repeat)
    converged = results["last"].status == lumaxlike.Status.CONVERGED
    return {**row, "pixels": pixels, "bands": bands, "observations": observations, "free": list(FIT_FREE),
            "dtype": np.dtype(dtype).name, "chunk_size": chunk_size, "converged_fraction": float(converged.mean())}  # fmt: skip


def forward_row(side: int, bands: int, dtype, repeat: int) -> dict:
    cube = make_cube(side, 1, dtype)  # the geometry; w below
    rng = np.random.default_rng(1)
    w = rng.uniform(0.05, 0.95, (side * side, bands)).astype(dtype)
    geometry = [cube[k] for k in ("to_sun", "to_sensor", "normal")]

    def call():
        lumaxlike.amsa(w, *geometry, cube["params"], backend="jax")
        return w.size

    return {**timed(call, repeat), "side": side, "bands": bands, "dtype": np.dtype(dtype).name}


def print_report(report: dict) -> None:
    print(f"\ndevice: {report['device']} ({report['device_kind']})\n")
    print("| row | shape | dtype | compile s | run s (median) | problems/s (median) | best | device peak so far |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row in report["rows"].items():
        peak = "-" if row.get("device_peak_bytes") is None else f"{row['device_peak_bytes'] / 1e9:.2f} GB"
        print(f"| {name} | {row['shape']} | {row['dtype']} | {row['compile_s']:.2f} | {row['seconds']:.3f} | "
              f"{fmt_rate(row['problems_per_s'])} | {fmt_rate(row['best_problems_per_s'])} | {peak} |")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed calls per row (default 3)")
    parser.add_argument("--fit-chunk", type=int, default=8192, help="fit's chunk_size in pixels (default 8192)")
    parser.add_argument("--rows", default="forward,invert,fit", help="rows to run (default all)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (checking the script)")
    parser.add_argument("--allow-cpu", action="store_true", help="run even where the device is not a GPU")
    parser.add_argument("--json", type=Path, default=RESULTS / "gpu.json")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    device = jax.devices()[0]
    if device.platform != "gpu" and not args.allow_cpu:
        print(f"JAX's default device is {device} (no GPU): install a CUDA build of jax "
              f"(pip install -e \".[test]\" \"jax[cuda12]\") or pass --allow-cpu", file=sys.stderr)  # fmt: skip
        return 2
    sizes = TINY if args.tiny else FULL
    rows_wanted = [r for r in args.rows.split(",") if r]
    report = {"machine": machine_info(), "device": str(device), "device_kind": device.device_kind,
              "settings": vars(args) | {"json": str(args.json)}, "rows": {}}  # fmt: skip
    plan = []
    if "forward" in rows_wanted:
        side, bands = sizes["forward"]
        for dtype in (np.float32, np.float64):
            plan.append((f"forward {np.dtype(dtype).name}", f"{side}x{side}x{bands}",
                         lambda side=side, bands=bands, dtype=dtype: forward_row(side, bands, dtype, args.repeat)))  # fmt: skip
    if "invert" in rows_wanted:
        side, bands = sizes["invert"]
        for dtype in (np.float32, np.float64):
            plan.append((f"invert {np.dtype(dtype).name}", f"{side}x{side}x{bands}",
                         lambda side=side, bands=bands, dtype=dtype: invert_row(side, bands, dtype, args.repeat)))  # fmt: skip
    if "fit" in rows_wanted:
        pixels, bands, observations = sizes["fit"]
        for dtype in (np.float32, np.float64):
            plan.append((f"fit {np.dtype(dtype).name}", f"{pixels}x{bands} problems x {observations} obs",
                         lambda dtype=dtype: fit_row(pixels, bands, observations, dtype, args.repeat,
                                                     min(args.fit_chunk, pixels))))  # fmt: skip
    for name, shape, run in plan:
        print(f"{name} {shape} ...", file=sys.stderr, flush=True)
        row = run()
        row.update(shape=shape, device_peak_bytes=device_peak_bytes(device))
        report["rows"][name] = row
        print(f"  {fmt_rate(row['problems_per_s'])}, compile {row['compile_s']:.2f} s", file=sys.stderr, flush=True)
    finish(report, print_report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
