"""The GPU rows: `invert`, `fit`, `unmix`, `normalize` and the forward model through JAX
on JAX's default device, each row in its own process under a compile-time guard.

Run by `benchmarks/gpu.sh` (which checks that the device is a GPU first). Rows:

- compile reference: the XLA compile time (`jax.jit(...).lower(...).compile()`, tracing
  and lowering timed apart) of the rough-surface kernels, the forward model `amsa` and
  `invert`'s solver, with roughness and both opposition effects (`FULL_PARAMS`), float32
  and float64, on the default device and on the CPU backend (the reference: refmod's
  rough-surface kernel is reported not to finish compiling for a GPU in 31 min while it
  compiles in 0.4 s on a CPU);
- forward: `amsa(backend="jax")` on 1000 x 1000 pixels x 100 bands, float32 and float64;
- invert: a 1024 x 1024 x 64 cube (`bench_invert.make_cube`), float32 and float64,
  solver="jax", default chunking (sized from the device's memory);
- fit: 1 M problems (62 500 pixels x 16 bands, 16 observations, free w, b, c, roughness;
  `bench_fit.make_scene`), float32 and float64 (fit computes in its input's precision),
  solver="jax", `chunk_size` 8192 pixels (`--fit-chunk`);
- unmix: `bench_unmix`'s scene (4 endmembers, 64 bands), 500 x 500 pixels, solver="jax",
  both routes, float64;
- normalize: the invert cube at 1024 x 1024 x 64, float32 and float64, solver="jax";
- sample: `lumaxlike.sample` where this lumaxlike has it (else the row says so).

Each row runs in a fresh process (`--child ROW`): a warm-up call of the timed call's
shapes first ("compile_s": its time minus one timed run's), then `--repeat` timed calls
(median and best), NumPy arrays in and out (transfers included: what a user's call
costs). "device_peak_bytes" is the device's `memory_stats()["peak_bytes_in_use"]` at
the row's end: the row's own peak, as each row has its process. The guard: a row whose
warm-up (compilation) has not finished ``--compile-limit`` seconds (default 300) after the
row's process started (imports and data included) is stopped and reported as such, and so is one still running ``--run-limit`` seconds
(default 900) after its warm-up; the next row then starts. lumaxlike's persistent JAX
cache is off in the rows (``LUMAXLIKE_JAX_CACHE=0``), so compile times are compile times.
Without a GPU (`--allow-cpu`, for checking the script) the rows run on the CPU and have
no device memory figures.

Usage::

    benchmarks/gpu.sh                                         # on a CUDA machine
    python benchmarks/bench_gpu.py --allow-cpu --tiny --json /tmp/gpu.json   # CPU check
    python benchmarks/bench_gpu.py --allow-cpu --rows compile --json benchmarks/results/compile_reference.json
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("LUMAXLIKE_JAX_CACHE", "0")  # compile times are compile times

import jax
from bench_fit import NOISE_SIGMA, make_scene, start_params
from bench_invert import finish, fmt_rate, machine_info, make_cube

import lumaxlike

RESULTS = HERE / "results"
FIT_FREE = ("w", "b", "c", "roughness")
FULL = {
    "invert": (1024, 64),
    "fit": (62_500, 16, 16),
    "forward": (1000, 100),
    "unmix": 500,
    "normalize": (1024, 64),
    "compile": (4096, 64),
    "sample": (64, 8),
}
# --tiny: checks the script
TINY = {
    "invert": (32, 8),
    "fit": (64, 4, 16),
    "forward": (16, 10),
    "unmix": 16,
    "normalize": (32, 8),
    "compile": (64, 8),
    "sample": (4, 2),
}
COMPILED = "LUMAXLIKE-GPU-BENCH-COMPILED"  # the child's line after its warm-up


def device_peak_bytes(device) -> int | None:
    stats = device.memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def timed(call, repeat: int) -> dict:
    """Warm-up (compile) then `repeat` timed calls of `call()`; rates from its problems."""
    start = time.perf_counter()
    problems = call()
    first = time.perf_counter() - start
    print(f"{COMPILED} {first:.3f}", flush=True)  # the parent's guard: compilation is over
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    median = statistics.median(seconds)
    return {
        "problems": problems,
        "warmup_s": first,
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
    from lumaxlike._inverse.albedo.invert import solver_chunk_pixels
    from lumaxlike._inverse.chunking import call_chunk

    chunk = call_chunk("jax", side * side, solver_chunk_pixels("jax", bands, dtype))
    return {
        **row,
        "side": side,
        "bands": bands,
        "dtype": np.dtype(dtype).name,
        "chunk_pixels": chunk,
        "converged_fraction": float(converged.mean()),
        "max_abs_w_error": float(error.max()),
    }


def normalize_row(side: int, bands: int, dtype, repeat: int) -> dict:
    cube = make_cube(side, bands, dtype)
    geometry = [cube[k] for k in ("to_sun", "to_sensor", "normal")]
    results = {}

    def call():
        results["last"] = lumaxlike.normalize(cube["refl"], *geometry, cube["params"], "jax")
        return cube["refl"].size

    row = timed(call, repeat)
    converged = results["last"].status == lumaxlike.Status.CONVERGED
    return {
        **row,
        "side": side,
        "bands": bands,
        "dtype": np.dtype(dtype).name,
        "converged_fraction": float(converged.mean()),
    }


def fit_row(
    pixels: int, bands: int, observations: int, dtype, repeat: int, chunk_size: int | None
) -> dict:
    scene = make_scene(pixels, bands, observations)
    pieces = [scene[k].astype(dtype) for k in ("refl", "to_sun", "to_sensor", "normal")]
    results = {}

    def call():
        results["last"] = lumaxlike.fit(
            *pieces,
            start_params(FIT_FREE),
            free=FIT_FREE,
            solver="jax",
            refl_sigma=NOISE_SIGMA,
            chunk_size=chunk_size,
        )
        return pixels * bands

    row = timed(call, repeat)
    converged = results["last"].status == lumaxlike.Status.CONVERGED
    return {
        **row,
        "pixels": pixels,
        "bands": bands,
        "observations": observations,
        "free": list(FIT_FREE),
        "dtype": np.dtype(dtype).name,
        "chunk_size": chunk_size,
        "converged_fraction": float(converged.mean()),
    }


def unmix_row(side: int, route: str, repeat: int) -> dict:
    import bench_unmix

    endmembers = bench_unmix.make_library()
    scene = bench_unmix.make_scene(side, endmembers)
    results = {}

    def call():
        results["last"] = bench_unmix.call_unmix(scene, endmembers, "jax", route)
        return side * side  # pixels

    row = timed(call, repeat)
    converged = results["last"].status == lumaxlike.Status.CONVERGED
    return {
        **row,
        "side": side,
        "route": route,
        "dtype": "float64",
        "unit": "pixels",
        "converged_fraction": float(np.mean(converged)),
    }


def forward_row(side: int, bands: int, dtype, repeat: int) -> dict:
    cube = make_cube(side, 1, dtype)  # the geometry; w below
    rng = np.random.default_rng(1)
    w = rng.uniform(0.05, 0.95, (side * side, bands)).astype(dtype)
    geometry = [cube[k] for k in ("to_sun", "to_sensor", "normal")]

    def call():
        lumaxlike.amsa(w, *geometry, cube["params"], backend="jax")
        return w.size

    return {**timed(call, repeat), "side": side, "bands": bands, "dtype": np.dtype(dtype).name}


def sample_row(pixels: int, bands: int, repeat: int) -> dict:
    if not hasattr(lumaxlike, "sample"):
        print(f"{COMPILED} 0", flush=True)
        return {"skipped": "this lumaxlike has no lumaxlike.sample"}
    scene = make_scene(pixels, bands, 16)
    pieces = [scene[k] for k in ("refl", "to_sun", "to_sensor", "normal")]

    def call():
        lumaxlike.sample(
            *pieces, start_params(("w", "b", "c")), free=("w", "b", "c"), refl_sigma=NOISE_SIGMA
        )
        return pixels * bands

    return {**timed(call, repeat), "pixels": pixels, "bands": bands, "dtype": "float64"}


def compile_reference_row(pixels: int, bands: int) -> dict:
    """XLA compile times of the rough-surface kernels (forward model and invert's solver)
    on the default device and on the CPU backend; tracing and lowering timed apart."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from helpers import FULL_PARAMS

    from lumaxlike._inverse.albedo.jax_solver import solve_albedo_jax
    from lumaxlike._model.forward import _amsa_flat

    cube = make_cube(int(np.sqrt(pixels)), bands)
    out = {"params": repr(FULL_PARAMS), "pixels": cube["refl"].shape[0], "bands": bands}
    devices = {"default": jax.devices()[0], "cpu": jax.devices("cpu")[0]}
    for label, device in devices.items():
        if label == "cpu" and devices["default"].platform == "cpu":
            continue  # the same backend
        for dtype in (np.float32, np.float64):
            with jax.enable_x64(dtype == np.float64):

                def put(a, dtype=dtype, device=device):
                    return jax.device_put(np.asarray(a, dtype), device)

                refl, to_sun, to_sensor, normal = (
                    put(cube[k]) for k in ("refl", "to_sun", "to_sensor", "normal")
                )
                kernels = {
                    "amsa": (
                        _amsa_flat,
                        (put(cube["w_true"]), to_sun, to_sensor, normal, FULL_PARAMS),
                        {},
                    ),
                    "invert_solver": (
                        solve_albedo_jax,
                        (refl, to_sun, to_sensor, normal, FULL_PARAMS, None),
                        {
                            "max_iter": 50,
                            "tol": dtype(1e-6),
                            "w_bounds": (dtype(1e-6), dtype(1 - 1e-6)),
                        },
                    ),
                }
                for name, (function, args, kwargs) in kernels.items():
                    start = time.perf_counter()
                    traced = function.trace(*args, **kwargs)
                    lowered = traced.lower()
                    lowered_s = time.perf_counter() - start
                    start, cpu = time.perf_counter(), time.process_time()
                    lowered.compile()
                    out[f"{name} {np.dtype(dtype).name} {label} ({device.platform})"] = {
                        "trace_lower_s": lowered_s,
                        "xla_compile_s": time.perf_counter() - start,
                        "xla_compile_cpu_s": time.process_time() - cpu,
                    }
    print(f"{COMPILED} 0", flush=True)
    return out


def plan_rows(sizes: dict, args) -> dict:
    """Row name -> (shape description, a function computing the row)."""
    rows = {}
    wanted = [r for r in args.rows.split(",") if r]
    if "compile" in wanted:
        pixels, bands = sizes["compile"]
        rows["compile reference"] = (
            f"{pixels} pixels x {bands} bands",
            lambda: compile_reference_row(pixels, bands),
        )
    for dtype in (np.float32, np.float64):
        name = np.dtype(dtype).name
        if "forward" in wanted:
            side, bands = sizes["forward"]
            rows[f"forward {name}"] = (
                f"{side}x{side}x{bands}",
                lambda side=side, bands=bands, dtype=dtype: forward_row(
                    side, bands, dtype, args.repeat
                ),
            )
        if "invert" in wanted:
            side, bands = sizes["invert"]
            rows[f"invert {name}"] = (
                f"{side}x{side}x{bands}",
                lambda side=side, bands=bands, dtype=dtype: invert_row(
                    side, bands, dtype, args.repeat
                ),
            )
        if "normalize" in wanted:
            side, bands = sizes["normalize"]
            rows[f"normalize {name}"] = (
                f"{side}x{side}x{bands}",
                lambda side=side, bands=bands, dtype=dtype: normalize_row(
                    side, bands, dtype, args.repeat
                ),
            )
        if "fit" in wanted:
            pixels, bands, observations = sizes["fit"]
            rows[f"fit {name}"] = (
                f"{pixels}x{bands} problems x {observations} obs",
                lambda p=pixels, b=bands, o=observations, dtype=dtype: fit_row(
                    p, b, o, dtype, args.repeat, min(args.fit_chunk, p)
                ),
            )
    if "unmix" in wanted:
        side = sizes["unmix"]
        for route in ("one_step", "two_step"):
            rows[f"unmix {route} float64"] = (
                f"{side}x{side} pixels x 64 bands x 4 endmembers",
                lambda route=route: unmix_row(side, route, args.repeat),
            )
    if "sample" in wanted:
        pixels, bands = sizes["sample"]
        rows["sample float64"] = (
            f"{pixels}x{bands} problems x 16 obs",
            lambda: sample_row(pixels, bands, args.repeat),
        )
    return rows


def print_report(report: dict) -> None:
    print(f"\ndevice: {report['device']} ({report['device_kind']})\n")
    print(
        "| row | shape | dtype | compile s | run s (median) | problems/s (median) | best | device peak |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, row in report["rows"].items():
        if name == "compile reference" and "error" not in row:
            continue
        if "error" in row or "skipped" in row:
            print(
                f"| {name} | {row.get('shape', '')} | | {row.get('error') or row.get('skipped')} | | | | |"
            )
            continue
        peak = (
            "-"
            if row.get("device_peak_bytes") is None
            else f"{row['device_peak_bytes'] / 1e9:.2f} GB"
        )
        print(
            f"| {name} | {row['shape']} | {row['dtype']} | {row['compile_s']:.2f} | {row['seconds']:.3f} | "
            f"{fmt_rate(row['problems_per_s'])} | {fmt_rate(row['best_problems_per_s'])} | {peak} |"
        )
    reference = report["rows"].get("compile reference", {})
    if "error" not in reference:
        print(
            "\n| kernel (FULL_PARAMS: roughness, SHOE, CBOE) | trace + lower s | XLA compile s | its CPU s |"
        )
        print("|---|---|---|---|")
        for name, times in reference.items():
            if isinstance(times, dict) and "xla_compile_s" in times:
                print(
                    f"| {name} | {times['trace_lower_s']:.2f} | {times['xla_compile_s']:.2f} | "
                    f"{times['xla_compile_cpu_s']:.2f} |"
                )


def run_guarded(name: str, argv: list[str], compile_limit: float, run_limit: float) -> dict:
    """Row `name` in a child process; stopped if its warm-up passes `compile_limit`
    seconds, or the rest `run_limit` seconds."""
    with tempfile.TemporaryDirectory(prefix="lumaxlike-gpu-row-") as folder:
        out = Path(folder) / "row.json"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            *argv,
            "--child",
            name,
            "--json",
            str(out),
        ]
        child = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        lines: queue.Queue = queue.Queue()
        tail: list[str] = []

        def pump():
            for line in child.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        start, compiled_at, limit, phase = (
            time.monotonic(),
            None,
            compile_limit,
            "warm-up (data, compile)",
        )
        while True:
            left = (
                start + limit - time.monotonic()
                if compiled_at is None
                else compiled_at + limit - time.monotonic()
            )
            try:
                line = lines.get(timeout=max(left, 0.0))
            except queue.Empty:
                _stop(child)
                return {
                    "error": f"stopped: {phase} not finished after {limit:.0f} s",
                    "log_tail": tail[-20:],
                }
            if line is None:
                break
            tail.append(line.rstrip())
            if line.startswith(COMPILED) and compiled_at is None:
                compiled_at, limit, phase = time.monotonic(), run_limit, "run"
        child.wait()
        if child.returncode != 0 or not out.exists():
            return {"error": f"failed (exit {child.returncode})", "log_tail": tail[-20:]}
        return json.loads(out.read_text())


def _stop(child: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed calls per row (default 3)")
    parser.add_argument(
        "--fit-chunk", type=int, default=8192, help="fit's chunk_size in pixels (default 8192)"
    )
    parser.add_argument(
        "--rows",
        default="compile,forward,invert,normalize,fit,unmix,sample",
        help="rows to run, comma-separated (default all)",
    )
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (checking the script)")
    parser.add_argument(
        "--allow-cpu", action="store_true", help="run even where the device is not a GPU"
    )
    parser.add_argument(
        "--compile-limit", type=float, default=300.0, help="s a row's warm-up may take (300)"
    )
    parser.add_argument(
        "--run-limit", type=float, default=900.0, help="s a row may run after its warm-up (900)"
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # one row, in this process
    parser.add_argument("--json", type=Path, default=RESULTS / "gpu.json")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    device = jax.devices()[0]
    if device.platform != "gpu" and not args.allow_cpu:
        print(
            f"JAX's default device is {device} (no GPU): install a CUDA build of jax "
            f'(pip install -e ".[test]" "jax[cuda12]") or pass --allow-cpu',
            file=sys.stderr,
        )
        return 2
    rows = plan_rows(TINY if args.tiny else FULL, args)
    if args.child is not None:  # one row, measured here; its JSON to args.json
        shape, run = rows[args.child]
        row = run()
        row.update(shape=shape, device_peak_bytes=device_peak_bytes(device))
        args.json.write_text(json.dumps(row, default=str) + "\n")
        return 0
    forwarded = [a for a in (argv if argv is not None else sys.argv[1:])]
    forwarded = [
        a
        for i, a in enumerate(forwarded)
        if a != "--json" and (i == 0 or forwarded[i - 1] != "--json")
    ]
    report = {
        "machine": machine_info(),
        "device": str(device),
        "device_kind": device.device_kind,
        "settings": vars(args) | {"json": str(args.json)},
        "rows": {},
    }
    for name, (shape, _) in rows.items():
        print(f"{name} {shape} ...", file=sys.stderr, flush=True)
        row = run_guarded(name, forwarded, args.compile_limit, args.run_limit)
        row.setdefault("shape", shape)
        report["rows"][name] = row
        if "problems_per_s" in row:
            print(
                f"  {fmt_rate(row['problems_per_s'])}, compile {row['compile_s']:.2f} s",
                file=sys.stderr,
                flush=True,
            )
        else:
            print(
                f"  {row.get('error') or row.get('skipped') or 'done'}", file=sys.stderr, flush=True
            )
    finish(report, print_report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
