"""JAX's first call in a process: `fit` and `invert` with solver="jax", each in fresh
processes, without and with lumaxlike's persistent compilation cache.

A user runs `fit` once per process, so the first call's compile time is what they wait
for. Each measurement starts a new Python process that builds the benchmark problem (not
timed), then times its first call and a second, identical call (the steady state: all
compiled) with wall time and the process's CPU time (all threads). The difference first -
second is the first call's overhead (tracing, lowering, compiling or loading from the
cache).

The problems (the benchmarks' own):

- fit: `bench_fit`'s JAX subsample, its first 2000 pixels x 16 bands x 16 observations
  (32 k problems), free ("w", "b", "c", "roughness"), chunk_size 512, float64;
- invert: `bench_invert`'s cube (512 x 512 x 64, float64), its first chunk (4096 pixels x
  64 bands = 262 k problems, the chunk shape of a whole-cube run).

Per operation, in this order, each a fresh process on one cache folder whose numba
kernels are warm (a first process loads them):

- "off": ``LUMAXLIKE_JAX_CACHE=0``: JAX compiles everything (what every process paid
  before the cache);
- "cold": the JAX cache folder emptied: compiles, writes the cache and stores the
  solver programs' executables (`lumaxlike._model.jax_executables`);
- "warm" (``--repeat`` processes): reads what "cold" wrote: the solvers' executables,
  loaded without tracing or lowering, and JAX's cache for the rest.

The bounds (not asserted): a process after the first pays at most 3 s (fit) and
1 s (invert) for its first call. On a shared machine the wall times grow with the load;
the CPU seconds are the better measure there (the first call's work is single-threaded).

Usage::

    python benchmarks/bench_first_call.py             # ~3-6 min on an idle 2-core machine
    python benchmarks/bench_first_call.py --only invert --repeat 1   # smoke
    python benchmarks/bench_first_call.py --warm-only ~/.cache/lumaxlike  # later processes

Each child also records, for its first call, the wall seconds JAX spends per phase
(its monitoring events): tracing to a jaxpr, lowering to StableHLO, XLA compile or
loading from the cache (which includes reading the entry); as the first call's work is
single-threaded, their shares of its wall time apportion its CPU time.

Writes ``benchmarks/results/first_call.json`` (``--json`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
BOUNDS_S = {"fit": 3.0, "invert": 1.0}

# The child: builds the problem, then times two identical calls; prints one JSON line.
CHILD = r"""
import json, sys, time
sys.path.insert(0, {here!r})
import jax
import bench_fit, bench_invert
operation = {operation!r}
if operation == "fit":
    scene = bench_fit.make_scene(2000, 16, 16)
    free = bench_fit.FREE_SETS["roughness"]
    def call():
        bench_fit.warm_up_fit(scene, free, "jax", 2000, chunk_size=512)
else:
    cube = bench_invert.make_cube(512, 64)
    def call():
        bench_invert.warm_up_lumaxlike(cube, "jax")
compiles = []
jax.monitoring.register_event_listener(lambda event, **kw: compiles.append(event))
PHASES = {{"/jax/core/compile/jaxpr_trace_duration": "trace",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
          "/jax/core/compile/backend_compile_duration": "compile_or_load",
          "/jax/compilation_cache/cache_retrieval_time_sec": "cache_read"}}
phases = {{name: [0, 0.0] for name in PHASES.values()}}  # programs, wall s (first call)
def on_duration(event, duration_secs, **kw):
    if event in PHASES and len(times) == 0:
        phases[PHASES[event]][0] += 1
        phases[PHASES[event]][1] += duration_secs
jax.monitoring.register_event_duration_secs_listener(on_duration)
times = []
for _ in range(2):
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    times.append((time.perf_counter() - wall, time.process_time() - cpu))
from lumaxlike._model import jax_executables
hits = compiles.count("/jax/compilation_cache/cache_hits")
misses = compiles.count("/jax/compilation_cache/cache_misses")
print(json.dumps({{"first_s": times[0][0], "first_cpu_s": times[0][1], "second_s": times[1][0],
                  "second_cpu_s": times[1][1], "cache_hits": hits, "cache_writes": misses,
                  "executables": dict(jax_executables.store_events),
                  "first_call_phases_wall_s": phases}}))
"""


def run_child(operation: str, cache: Path, jax_cache: bool) -> dict:
    """One fresh process timing `operation`'s first and second call."""
    env = dict(os.environ, LUMAXLIKE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    if not jax_cache:
        env["LUMAXLIKE_JAX_CACHE"] = "0"
    else:
        env.pop("LUMAXLIKE_JAX_CACHE", None)
    code = CHILD.format(here=str(HERE), operation=operation)
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["overhead_s"] = result["first_s"] - result["second_s"]
    result["overhead_cpu_s"] = result["first_cpu_s"] - result["second_cpu_s"]
    return result


def measure(operation: str, cache: Path, repeat: int) -> dict:
    jax_folder = cache / "jax"
    shutil.rmtree(jax_folder, ignore_errors=True)
    runs = {"off": run_child(operation, cache, jax_cache=False)}
    shutil.rmtree(jax_folder, ignore_errors=True)
    runs["cold"] = run_child(operation, cache, jax_cache=True)
    runs["warm"] = [run_child(operation, cache, jax_cache=True) for _ in range(repeat)]
    entries = list(jax_folder.glob("*-cache")) if jax_folder.exists() else []
    runs["cache_entries"] = len(entries)
    runs["cache_bytes"] = sum(e.stat().st_size for e in entries)
    stored = list((jax_folder / "executables").glob("*"))
    runs["executables_stored"] = len(stored)
    runs["executables_bytes"] = sum(e.stat().st_size for e in stored)
    best = min(runs["warm"], key=lambda r: r["first_s"])
    runs["bound_s"] = BOUNDS_S[operation]
    runs["warm_best_first_s"] = best["first_s"]
    runs["warm_best_first_cpu_s"] = min(r["first_cpu_s"] for r in runs["warm"])
    return runs


def measure_warm(operation: str, cache: Path, repeat: int) -> dict:
    """`--warm-only`: one untimed process on the cache folder `cache` (not cleared; it
    writes what the folder lacks), then `repeat` timed ones."""
    run_child(operation, cache, jax_cache=True)
    runs = {"warm": [run_child(operation, cache, jax_cache=True) for _ in range(repeat)]}
    runs["bound_s"] = BOUNDS_S[operation]
    runs["warm_best_first_cpu_s"] = min(r["first_cpu_s"] for r in runs["warm"])
    return runs


def print_report(report: dict) -> None:
    print(
        "| operation | process | first call s (CPU s) | second call s (CPU s) | cache hits / writes "
        "| executables loaded / written |"
    )
    print("|---|---|---|---|---|---|")
    for operation, runs in report["operations"].items():
        rows = [(name, runs[name]) for name in ("off", "cold") if name in runs]
        rows += [("warm", r) for r in runs["warm"]]
        for name, r in rows:
            print(
                f"| {operation} | {name} | {r['first_s']:.2f} ({r['first_cpu_s']:.2f}) | "
                f"{r['second_s']:.2f} ({r['second_cpu_s']:.2f}) | {r['cache_hits']} / {r['cache_writes']} "
                f"| {r['executables']['loaded']} / {r['executables']['written']} |"
            )
        if "cache_entries" in runs:
            print(
                f"| {operation} | cache | {runs['cache_entries']} entries, {runs['cache_bytes'] / 1e6:.1f} MB "
                f"| bound {runs['bound_s']:.0f} s | | {runs['executables_stored']} stored, "
                f"{runs['executables_bytes'] / 1e6:.1f} MB |"
            )
    print()
    print(
        "first call's JAX phases, wall s (programs): trace | lower | compile or load | cache read"
    )
    for operation, runs in report["operations"].items():
        for r in runs["warm"]:
            p = r["first_call_phases_wall_s"]
            cells = " | ".join(f"{p[k][1]:.2f} ({p[k][0]})" for k in p)
            print(f"| {operation} warm | {cells} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(BOUNDS_S), default=None, help="one operation only")
    parser.add_argument(
        "--repeat", type=int, default=2, help="warm processes per operation (default 2)"
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="default results/first_call.json (first_call_warm.json with --warm-only)",
    )
    parser.add_argument(
        "--warm-only",
        type=Path,
        default=None,
        metavar="CACHE_DIR",
        help="only later processes, on this lumaxlike cache folder (kept; one untimed process first)",
    )
    args = parser.parse_args(argv)
    if args.json is None:
        name = "first_call_warm.json" if args.warm_only else "first_call.json"
        args.json = RESULTS / name
    sys.path.insert(0, str(HERE))
    from bench_invert import finish, machine_info

    operations = [args.only] if args.only else ["invert", "fit"]
    report = {"machine": machine_info(), "operations": {}}
    if args.warm_only is not None:
        for operation in operations:
            print(f"{operation} ...", file=sys.stderr, flush=True)
            report["operations"][operation] = measure_warm(operation, args.warm_only, args.repeat)
        finish(report, print_report, args.json)
        return 0
    with tempfile.TemporaryDirectory(prefix="lumaxlike-first-call-") as folder:
        cache = Path(folder)
        # numba's kernels (the scenes are built with numba) cached once, before any timing
        run_child("invert", cache, jax_cache=False)
        for operation in operations:
            print(f"{operation} ...", file=sys.stderr, flush=True)
            report["operations"][operation] = measure(operation, cache, args.repeat)
    finish(report, print_report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
