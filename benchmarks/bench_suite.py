"""Benchmark suite: forward model and inversion, JAX and numba, float32 and float64.

What it measures (every lumaxlike number in a spawned child process, through
`lumaxlike._profile.run_profiles`, on `lumaxlike.testing.synthetic_cube` data: per-pixel
random geometry, roughness and both opposition effects):

1. size sweep, 32 bands: {forward model `amsa`, inversion `invert`} x {numba, jax} x
   {float64, float32} over square images of side 256, 512, 1024, 2048 (default) or 64,
   128, 256 (``--quick``). For each: compile/warm-up time (JAX compiles per shape: the
   warm-up runs the timed call's shape, one chunk for `invert`, the whole input for
   `amsa`; ``compile_s`` = warm-up time minus its share of run time), run time,
   problems/s, and the peak RSS of the timed call (Linux ``VmHWM``, reset right before
   it; includes the interpreter, libraries and inputs). The sizes of one
   (task, backend, dtype) run in one child, smallest first, to save start-ups; memory is
   handed back between them (see `run_profiles`). `invert`'s chunks have one shape from
   32768 pixels on (32 bands: ~1 M problems per chunk), so within one child JAX compiles
   the solver once and the later sizes show a compile time of ~0.
2. band sweep: `invert`, float64, both solvers, 1, 4, 16, 64, 256 bands at 512 x 512
   (128 x 128 with ``--quick``).
3. thread scaling: `invert`, float64, 32 bands at 512 x 512 (256 x 256 quick), in a child
   restricted to N cores (CPU affinity) with numba.set_num_threads(N), N = 1 .. cores,
   each N twice, interleaved (1, 2, ..., 1, 2, ...), best of the two (load from other
   processes only slows a run down). For JAX the affinity is what limits XLA:CPU's
   thread pool (it sizes itself to the schedulable cores); no XLA flag is involved.
4. baselines (in this process, reusing `bench_invert`): a scipy `least_squares` loop
   (model in plain Python; whole model per call, and `pixel_terms` hoisted) and refmod's
   `invert_amsa`, both float64; ratios of lumaxlike's float64 inversion rate (median over
   the image sizes) over them.

Run time on a 2-core machine: default about 5-6 minutes when the machine is otherwise
idle, up to ~12 minutes under load from other processes (the 2048 x 2048 sizes are half
of it; ``--sizes 256,512,1024`` for ~2.5 minutes); ``--quick`` about 1.5-2 minutes.
Peak memory of the default run: ~6 GB (float64 inversion of 2048 x 2048 x 32 in memory).

Writes ``benchmarks/results/suite.json`` and ``suite.png`` (``suite_quick.*`` with
``--quick``).

Usage::

    python benchmarks/bench_suite.py --quick
    python benchmarks/bench_suite.py
    python benchmarks/bench_suite.py --only sizes --sizes 256,512
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_invert

from lumaxlike._profile import ProfileConfig, run_profile, run_profiles

RESULTS = bench_invert.RESULTS
PLANS = {
    #         sizes (side),           band sweep (side, bands),        thread side, scipy, refmod
    "quick": ([64, 128, 256], (128, [1, 4, 16, 64, 256]), 256, 300, 50_000),
    "default": ([256, 512, 1024, 2048], (512, [1, 4, 16, 64, 256]), 512, 2000, 200_000),
}
TASKS = ("forward", "invert")
BACKENDS = ("numba", "jax")
DTYPES = ("float64", "float32")
SECTIONS = ("sizes", "bands", "threads", "baselines")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def size_sweep(sizes, bands=32) -> list[dict]:
    records = []
    for task in TASKS:
        for backend in BACKENDS:
            for dtype in DTYPES:
                configs = [
                    ProfileConfig(
                        side=s, bands=bands, solver=backend, dtype=dtype, task=task, warmup=True
                    )
                    for s in sorted(sizes)
                ]
                start = time.perf_counter()
                group = run_profiles(configs)
                records += group
                rates = ", ".join(f"{r['side']}: {r['problems_per_s'] / 1e6:.2f}" for r in group)
                log(
                    f"sizes {task} {backend} {dtype} ({time.perf_counter() - start:.0f} s): M problems/s {rates}"
                )
    return records


def band_sweep(side, band_counts) -> list[dict]:
    records = []
    for solver in BACKENDS:
        configs = [
            ProfileConfig(side=side, bands=b, solver=solver, dtype="float64", warmup=True)
            for b in sorted(band_counts)
        ]
        group = run_profiles(configs)
        records += group
        log(
            f"bands {solver}: "
            + ", ".join(f"{r['bands']}: {r['problems_per_s'] / 1e6:.2f}" for r in group)
        )
    return records


def thread_scaling(side, bands=32) -> list[dict]:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    counts = sorted({1, *[2**k for k in range(1, 8) if 2**k <= cores], cores})
    runs = {}
    for repeat in range(2):
        for solver in BACKENDS:
            for n in counts:
                record = run_profile(
                    ProfileConfig(
                        side=side,
                        bands=bands,
                        solver=solver,
                        dtype="float64",
                        threads=n,
                        warmup=True,
                    )
                )
                runs.setdefault((solver, n), []).append(record)
                log(
                    f"threads {solver} {n} (run {repeat + 1}): {record['problems_per_s'] / 1e6:.2f} M problems/s"
                )
    records = []
    for group in runs.values():
        best = dict(max(group, key=lambda r: r["problems_per_s"]))
        best["all_problems_per_s"] = [r["problems_per_s"] for r in group]
        records.append(best)
    return records


def baselines(scipy_problems, refmod_problems, seed=0) -> dict:
    """scipy (two variants) and refmod throughput on float64 problems (bench_invert's code)."""
    cube = bench_invert.make_cube(128, 32, np.float64, seed)
    out = {}
    sample = bench_invert.sample_problems(cube, scipy_problems, seed + 2, solvable_only=True)
    for name, hoisted in (("scipy", False), ("scipy-hoisted", True)):
        out[name] = bench_invert.scipy_baseline(sample, cube["params"], hoisted)
        log(f"{name}: {bench_invert.fmt_rate(out[name]['problems_per_s'])}")
    if bench_invert.refmod_available():
        # refmod's rate does not depend on the image: its problems are independent
        big = bench_invert.make_cube(
            int(np.ceil(np.sqrt(refmod_problems / 32))), 32, np.float64, seed
        )
        sample = bench_invert.sample_problems(big, refmod_problems, seed + 1, solvable_only=False)
        warm = bench_invert.warm_up_refmod(sample, cube["params"])
        runs = [bench_invert.time_refmod(sample, cube["params"]) for _ in range(3)]
        out["refmod"] = {**warm, **bench_invert.summarize(runs)}
        log(f"refmod: {bench_invert.fmt_rate(out['refmod']['problems_per_s'])}")
    else:
        out["refmod"] = None
    return out


# ---------------------------------------------------------------------------------------
# Reporting


def _mb(value) -> str:
    return "-" if value is None else f"{value / 1e6:,.0f}"


def size_table(records) -> str:
    lines = [
        "| task | backend | dtype | image | problems | compile s | run s | M problems/s | peak RSS MB | in+out MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['task']} | {r['solver']} | {r['dtype']} | {r['side']}x{r['side']}x{r['bands']} | "
            f"{r['problems']:,} | {r.get('compile_s', 0):.2f} | {r['seconds']:.2f} | "
            f"{r['problems_per_s'] / 1e6:.2f} | {_mb(r['peak_rss'])} | {_mb(r['input_bytes'] + r['output_bytes'])} |"
        )
    return "\n".join(lines)


def band_table(records) -> str:
    lines = [
        "| solver | image | problems | compile s | run s | M problems/s | mean iterations | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['solver']} | {r['side']}x{r['side']}x{r['bands']} | {r['problems']:,} | {r.get('compile_s', 0):.2f} | "
            f"{r['seconds']:.2f} | {r['problems_per_s'] / 1e6:.2f} | {r.get('mean_iterations') or 0:.2f} | {_mb(r['peak_rss'])} |"
        )
    return "\n".join(lines)


def thread_table(records) -> str:
    lines = ["| solver | cores (threads) | M problems/s | speed-up |", "|---|---|---|---|"]
    for r in records:
        one = next(x for x in records if x["solver"] == r["solver"] and x["threads"] == 1)
        lines.append(
            f"| {r['solver']} | {r['threads']} | {r['problems_per_s'] / 1e6:.2f} | "
            f"{r['problems_per_s'] / one['problems_per_s']:.2f}x |"
        )
    return "\n".join(lines)


def ratios(size_records, base) -> dict:
    """lumaxlike float64 inversion (median rate over the image sizes) over each baseline."""
    out = {}
    for solver in BACKENDS:
        rates = [
            r["problems_per_s"]
            for r in size_records
            if r["task"] == "invert" and r["solver"] == solver and r["dtype"] == "float64"
        ]
        if not rates:
            continue
        for name, b in base.items():
            if b is not None:
                out[f"{solver}/{name}"] = statistics.median(rates) / b["problems_per_s"]
    return out


def plot(report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    sizes = report.get("sizes") or []
    styles = {"numba": "-", "jax": "--"}
    markers = {"float64": "o", "float32": "s"}
    colors = {"forward": "tab:blue", "invert": "tab:red"}
    for task in TASKS:
        for backend in BACKENDS:
            for dtype in DTYPES:
                rows = sorted(
                    (
                        r
                        for r in sizes
                        if (r["task"], r["solver"], r["dtype"]) == (task, backend, dtype)
                    ),
                    key=lambda r: r["side"],
                )
                if not rows:
                    continue
                pixels = [r["side"] ** 2 for r in rows]
                kw = {
                    "linestyle": styles[backend],
                    "marker": markers[dtype],
                    "color": colors[task],
                    "label": f"{task} {backend} {dtype}",
                }
                axes[0, 0].plot(pixels, [r["problems_per_s"] for r in rows], **kw)
                axes[0, 1].plot(pixels, [r["peak_rss"] / 1e9 for r in rows], **kw)
    if sizes:
        inv = sorted({r["side"] for r in sizes})
        io = {
            s: max(
                r["input_bytes"] + r["output_bytes"] + r["rss_imports"]
                for r in sizes
                if r["side"] == s and r["task"] == "invert"
            )
            for s in inv
        }
        axes[0, 1].plot(
            [s**2 for s in inv],
            [io[s] / 1e9 for s in inv],
            color="gray",
            linestyle=":",
            label="invert: base + inputs + outputs (max)",
        )
    axes[0, 0].set(
        xscale="log",
        yscale="log",
        xlabel="pixels (32 bands)",
        ylabel="problems / s",
        title="throughput (timed call, after warm-up)",
    )
    axes[0, 1].set(
        xscale="log",
        yscale="log",
        xlabel="pixels (32 bands)",
        ylabel="peak RSS [GB]",
        title="peak RSS of the timed call (child process)",
    )
    axes[0, 0].legend(fontsize=7)
    axes[0, 1].legend(fontsize=7)
    for solver in BACKENDS:
        rows = sorted(
            (r for r in report.get("bands") or [] if r["solver"] == solver),
            key=lambda r: r["bands"],
        )
        if rows:
            axes[1, 0].plot(
                [r["bands"] for r in rows],
                [r["problems_per_s"] for r in rows],
                linestyle=styles[solver],
                marker="o",
                label=f"invert {solver} float64",
            )
        rows = sorted(
            (r for r in report.get("threads") or [] if r["solver"] == solver),
            key=lambda r: r["threads"],
        )
        if rows:
            axes[1, 1].plot(
                [r["threads"] for r in rows],
                [r["problems_per_s"] for r in rows],
                linestyle=styles[solver],
                marker="o",
                label=f"invert {solver} float64",
            )
    side = (report.get("bands") or [{"side": "?"}])[0]["side"]
    axes[1, 0].set(
        xscale="log",
        yscale="log",
        xlabel="bands",
        ylabel="problems / s",
        title=f"band sweep, {side}x{side} pixels",
    )
    axes[1, 1].set(
        xlabel="cores (numba threads / CPU affinity)",
        ylabel="problems / s",
        title="thread scaling, invert float64",
    )
    axes[1, 1].set_ylim(bottom=0)
    axes[1, 1].xaxis.get_major_locator().set_params(integer=True)
    for ax in axes[1]:
        if ax.lines:
            ax.legend(fontsize=7)
    machine = report["machine"]
    fig.suptitle(
        f"lumaxlike benchmark suite ({report['plan']}): {machine['cpu']}, "
        f"{machine['cores_available']} cores, jax {machine['versions']['jax']}, "
        f"numba {machine['versions']['numba']}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="sizes 64..256, band sweep at 128^2 (1.5-2 min)"
    )
    parser.add_argument(
        "--sizes", default=None, help="comma-separated image sides, overriding the plan's"
    )
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"sections to run, of {','.join(SECTIONS)}"
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="default results/suite[_quick].json"
    )
    parser.add_argument("--png", type=Path, default=None, help="default results/suite[_quick].png")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    plan = "quick" if args.quick else "default"
    sizes, (band_side, band_counts), thread_side, scipy_n, refmod_n = PLANS[plan]
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]
    only = set(args.only.split(","))
    stem = "suite_quick" if plan == "quick" else "suite"
    json_path = args.json or RESULTS / f"{stem}.json"
    png_path = args.png or RESULTS / f"{stem}.png"
    report = {
        "plan": plan,
        "machine": bench_invert.machine_info(),
        "sizes": None,
        "bands": None,
        "threads": None,
        "baselines": None,
        "ratios": None,
    }
    start = time.perf_counter()
    if "sizes" in only:
        report["sizes"] = size_sweep(sizes)
    if "bands" in only:
        report["bands"] = band_sweep(band_side, band_counts)
    if "threads" in only:
        report["threads"] = thread_scaling(thread_side)
    if "baselines" in only:
        report["baselines"] = baselines(scipy_n, refmod_n)
        if report["sizes"]:
            report["ratios"] = ratios(report["sizes"], report["baselines"])
    report["seconds"] = time.perf_counter() - start
    if hasattr(os, "getloadavg"):
        report["machine"]["load_average_end"] = os.getloadavg()

    m = report["machine"]
    print(
        f"machine: {m['cpu']}, {m['cores_available']} cores, {m.get('memory_bytes', 0) / 2**30:.0f} GiB, "
        f"numba {m['versions']['numba']} ({m['numba_threads']} threads), jax {m['versions']['jax']} "
        f"({m['jax_device']}); load average {m.get('load_average_start')} -> {m.get('load_average_end')}"
    )
    if report["sizes"]:
        print("\n## Size sweep (32 bands)\n\n" + size_table(report["sizes"]))
    if report["bands"]:
        print("\n## Band sweep (invert, float64)\n\n" + band_table(report["bands"]))
    if report["threads"]:
        print("\n## Thread scaling (invert, float64)\n\n" + thread_table(report["threads"]))
    if report["baselines"]:
        print("\n## Baselines (float64)\n")
        for name, b in report["baselines"].items():
            if b is not None:
                print(
                    f"- {name}: {bench_invert.fmt_rate(b['problems_per_s'])} ({b['problems']:,} problems)"
                )
    if report["ratios"]:
        print("\n| ratio (float64, median over sizes) | value |\n|---|---|")
        for key, value in report["ratios"].items():
            print(f"| {key} | {value:,.1f}x |")
    print(f"\ntotal {report['seconds'] / 60:.1f} min")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report, indent=2, default=bench_invert._json_default) + "\n")
    plot(report, png_path)
    log(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
