"""Time and peak memory of an inversion of a synthetic cube (the measuring behind
`lumaxlike profile`, whose command is :mod:`lumaxlike._cli.profile`).

Every measurement runs in a fresh child process (multiprocessing "spawn": JAX is not
fork-safe), so the numbers belong to that one inversion and nothing else:

- peak host RSS [bytes]: Linux's high-water mark ``VmHWM`` of the child, reset (via
  ``/proc/self/clear_refs``) right before the measured call, so the peak covers the call
  only (plus whatever was resident before it: interpreter, libraries, inputs); where the
  reset is not available, a thread samples ``psutil`` RSS every millisecond instead;
- memray's peak of heap allocations (Python, NumPy and XLA buffers alike) with
  ``--memray``, when memray is importable;
- the device's ``peak_bytes_in_use`` on a GPU;
- wall time, the chunk size used, the bytes of the inputs and outputs, and the ratio of
  the peak over them.

Two modes:

``--mode memory``
    ``lumaxlike.invert`` on NumPy arrays held in memory. The inputs are generated in the
    child (block by block, then ``malloc_trim``) before the high-water mark is reset.
    The bound to check: peak <= RSS before the inputs (interpreter + libraries) + inputs
    + outputs + 500 MB, whatever the image size.
``--mode file``
    ``lumaxlike.invert_file``: a GeoTIFF cube plus a GeoTIFF OBS raster of per-pixel
    angles (written by the parent, block by block, into a temporary folder) streamed to
    GeoTIFF maps. Peak RSS is the child's whole-life peak. Target: < 1.5 GB for a
    2048 x 2048 x 32 float32 cube with either solver.

Run ``lumaxlike profile --help``.

This module imports NumPy only at the top (with the memory meters, `lumaxlike._memory`,
and the synthetic scenes, `lumaxlike.testing`, which import no more): JAX, numba and
the rest of lumaxlike are imported inside the child after its thread settings
(``--threads``) are in place.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ._memory import (
    PeakRSS,
    current_rss,
    device_peak_bytes,
    lifetime_max_rss,
    memray_peak,
    proc_status_kib,
    release_free_memory,
)
from .testing import default_params, synthetic_cube, write_geotiff_inputs

__all__ = ["ProfileConfig", "format_table", "run_profile", "run_profiles"]

MiB = 2**20
MEMORY_MARGIN_BYTES = 500 * 10**6  # the in-memory bound: inputs + outputs + 500 MB
FILE_TARGET_BYTES = 1.5e9  # the streaming target: peak RSS < 1.5 GB


def _limit_threads(threads):
    """Before JAX starts its backend: numba threads, and CPU affinity (what XLA:CPU sizes to)."""
    if threads is None:
        return
    if hasattr(os, "sched_setaffinity"):
        available = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, available[: max(1, threads)])
    import numba

    numba.set_num_threads(
        min(threads, numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]  # numba.config sets its options at import
    )


# ---------------------------------------------------------------------------------------
# The child


@dataclasses.dataclass(frozen=True)
class ProfileConfig:
    """One measured run.

    Attributes:
        side: pixels per side of the square image.
        bands: spectral bands.
        solver: ``"jax"`` or ``"numba"`` (the backend, for ``task="forward"``).
        dtype: ``"float32"`` or ``"float64"``.
        chunk_size: pixels per chunk for `invert` (None: its default); in file mode,
            rows per block = chunk_size // side (None: `invert_file`'s default).
        mode: ``"memory"`` or ``"file"``.
        task: ``"invert"`` or ``"forward"`` (memory mode only).
        memray: also measure memray's heap peak.
        threads: numba threads and CPU cores (affinity) of the child; None: all.
        warmup: run the call once before the measured one (on one chunk's pixels for
            `invert`, so JAX compiles the same shape; the whole input for `forward`)
            and report its time separately.
        max_iter: `invert`'s max_iter (None: its default).
        seed: random seed of the synthetic cube.
        truth: report the accuracy max |w - w_true| over converged problems.
    """

    side: int = 512
    bands: int = 32
    solver: str = "numba"
    dtype: str = "float64"
    chunk_size: int | None = None
    mode: str = "memory"
    task: str = "invert"
    memray: bool = False
    threads: int | None = None
    warmup: bool = False
    max_iter: int | None = None
    seed: int = 0
    truth: bool = False


def _nbytes(*arrays) -> int:
    return int(sum(np.asarray(a).nbytes for a in arrays))


def _child_many(configs, folder: str) -> list[dict]:
    """Runs in the spawned child: the configurations one after the other (same threads)."""
    _limit_threads(configs[0].threads)
    records = []
    for config in configs:
        records.append(_child(config, folder))
        release_free_memory()
    return records


def _child(config: ProfileConfig, folder: str) -> dict:
    """One inversion (or forward model), measured, in the current (child) process."""
    rss_start = current_rss()
    import jax
    import numba

    import lumaxlike

    if config.mode == "file":
        return _child_file(config, folder, rss_start)
    rss_imports = current_rss()
    cube = synthetic_cube(
        config.side, config.bands, config.dtype, seed=config.seed, truth=config.truth
    )
    params = cube["params"]
    geometry = (cube["to_sun"], cube["to_sensor"], cube["normal"])
    w_true = cube.pop("w_true", None)
    n_pixels = config.side * config.side
    out: dict[str, Any] = {"numba_threads": numba.get_num_threads()}

    if config.task == "forward":
        w = (
            np.random.default_rng(config.seed + 1)
            .uniform(0.05, 0.95, cube["refl"].shape)
            .astype(config.dtype)
        )

        def call(pixels=None):  # a NumPy array: a JAX run has finished when it returns
            return lumaxlike.amsa(w, *geometry, params, backend=config.solver)

        chunk = n_pixels
        input_bytes = _nbytes(w, *geometry)
        del cube
    else:
        call, chunk = _invert_call(config, cube, n_pixels)
        input_bytes = _nbytes(cube["refl"], *geometry)

    if config.warmup:
        start = time.perf_counter()
        warm = call(None if config.task == "forward" else chunk)
        out["warmup_s"] = time.perf_counter() - start
        out["warmup_problems"] = int(np.size(warm.w if hasattr(warm, "w") else warm))
        del warm
    release_free_memory()
    rss_before = current_rss()
    with PeakRSS() as peak, memray_peak(config.memray, folder, out):
        start = time.perf_counter()
        result = call()
        seconds = time.perf_counter() - start
    problems = n_pixels * config.bands
    if config.task == "forward":
        output_bytes = _nbytes(result)
    else:
        output_bytes = _nbytes(*dataclasses.astuple(result))
        out.update(_inversion_summary(result, w_true))
    del result
    out.update(
        mode="memory",
        seconds=seconds,
        problems=problems,
        problems_per_s=problems / seconds,
        chunk_pixels=int(chunk),
        input_bytes=input_bytes,
        output_bytes=output_bytes,
        rss_start=rss_start,
        rss_imports=rss_imports,
        rss_before_call=rss_before,
        peak_rss=int(peak.peak),
        peak_method=peak.method,
        device_peak_bytes=device_peak_bytes(),
        jax_device=str(jax.devices()[0]),  # after the measurement: starts JAX's backend
    )
    if config.warmup:
        out["compile_s"] = max(
            0.0, out["warmup_s"] - out["warmup_problems"] / out["problems_per_s"]
        )
    return out


def _invert_call(config: ProfileConfig, cube: dict, n_pixels: int):
    """`_child`'s measured `invert` call, ``call(pixels=None)`` (pixels: exactly one
    chunk's, for the warm-up), and the call's pixels per chunk."""
    import lumaxlike

    from ._inverse.albedo.invert import solver_chunk_pixels
    from ._inverse.chunking import call_chunk

    params = cube["params"]
    geometry = (cube["to_sun"], cube["to_sensor"], cube["normal"])
    largest = config.chunk_size or solver_chunk_pixels(config.solver, config.bands, config.dtype)
    chunk = call_chunk(config.solver, n_pixels, largest)  # the measured call's chunks
    kwargs: dict[str, Any] = {"chunk_size": config.chunk_size}
    if config.max_iter is not None:
        kwargs["max_iter"] = config.max_iter

    def call(pixels=None):
        if pixels is None:
            return lumaxlike.invert(cube["refl"], *geometry, params, config.solver, **kwargs)
        # exactly one chunk's pixels: a call of one chunk has the same chunk shape
        refl, to_sun, to_sensor, normal = (
            a.reshape((-1,) + a.shape[2:])[:pixels] for a in (cube["refl"], *geometry)
        )
        return lumaxlike.invert(refl, to_sun, to_sensor, normal, params, config.solver, **kwargs)

    return call, chunk


def _inversion_summary(result, w_true) -> dict:
    """`_child`'s figures of an `InversionResult`: converged fraction, mean iterations,
    status counts and, given w_true, the largest error of a converged w."""
    import lumaxlike

    out: dict[str, Any] = {}
    converged = result.status == int(lumaxlike.Status.CONVERGED)
    out["converged_fraction"] = float(converged.mean())
    out["mean_iterations"] = float(result.iterations[converged].mean()) if converged.any() else None
    out["status_counts"] = result.counts()
    if w_true is not None:
        err = np.abs(result.w.astype(np.float64) - w_true)[converged]
        out["max_abs_w_error"] = float(err.max()) if err.size else None
    return out


def _child_file(config: ProfileConfig, folder: str, rss_start: int) -> dict:
    import numba

    from ._files.invert import invert_file
    from ._options import RunOptions

    rss_imports = current_rss()
    root = Path(folder)
    chunk_rows = None if config.chunk_size is None else max(1, config.chunk_size // config.side)
    out: dict[str, Any] = {}
    # No reset of the high-water mark: the target is the whole process's peak.
    with memray_peak(config.memray, str(root), out):
        summary = invert_file(
            root / "cube.tif",
            root / "w.tif",
            geometry=str(root / "obs.tif"),
            params=default_params(),
            solver=config.solver,
            units="r",
            run=RunOptions(chunk_rows=chunk_rows, overwrite=True, progress=False),
            max_iter=config.max_iter,
        )
    problems = summary.pixels * summary.bands
    outputs = [Path(p) for p in summary.outputs.values()]
    out.update(
        mode="file",
        numba_threads=numba.get_num_threads(),
        seconds=summary.seconds,
        problems=problems,
        problems_per_s=problems / summary.seconds,
        chunk_rows=chunk_rows,
        status_counts=summary.status_counts,
        input_bytes=sum(p.stat().st_size for p in (root / "cube.tif", root / "obs.tif")),
        output_bytes=sum(p.stat().st_size for p in outputs if p.is_file()),
        rss_start=rss_start,
        rss_imports=rss_imports,
        peak_rss=max((proc_status_kib("VmHWM") or 0) * 1024, lifetime_max_rss()),
        peak_method="lifetime VmHWM / ru_maxrss",
        device_peak_bytes=device_peak_bytes(),
    )
    return out


# ---------------------------------------------------------------------------------------
# The parent


def run_profile(config: ProfileConfig) -> dict:
    """Run one measured inversion in a fresh spawned child; returns its measurements.

    Equivalent to ``run_profiles([config])[0]``.

    The dict has the config's fields plus: ``seconds``, ``problems``, ``problems_per_s``,
    ``peak_rss``, ``rss_imports`` (after importing lumaxlike), ``rss_before_call``
    (memory mode: inputs resident), ``input_bytes``, ``output_bytes``, ``device_peak_bytes``,
    ``memray_peak_bytes`` (with ``memray``), ``warmup_s``/``compile_s`` (with ``warmup``),
    and the derived ``peak_over_io`` (peak / (inputs + outputs)) and ``excess_bytes``
    (peak - rss_imports - inputs - outputs, memory mode).
    """
    return run_profiles([config])[0]


def run_profiles(configs) -> list[dict]:
    """Run measured configurations one after the other in one fresh spawned child.

    Saves the child's start-up (a few seconds: imports, JIT caches) per configuration.
    Each configuration's peak is still its own: the high-water mark is reset before each
    measured call and freed memory is handed back (``malloc_trim``) between them; only
    compiled code of the earlier ones stays resident (counted in ``rss_imports``).
    All configurations must have the same ``threads``; file mode runs one at a time.
    """
    configs = list(configs)
    if len({c.threads for c in configs}) > 1:
        raise ValueError("configurations run in one child must have the same threads")
    if any(c.mode == "file" for c in configs) and len(configs) > 1:
        return [record for c in configs for record in run_profiles([c])]
    with tempfile.TemporaryDirectory(prefix="lumaxlike-profile-") as folder:
        if configs[0].mode == "file":
            c = configs[0]
            write_geotiff_inputs(folder, c.side, c.bands, c.dtype, c.seed)
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            outs = pool.submit(_child_many, configs, folder).result()
    return [_derive(config, out) for config, out in zip(configs, outs)]


def _derive(config: ProfileConfig, out: dict) -> dict:
    record = dataclasses.asdict(config)
    record.update(out)
    io = record["input_bytes"] + record["output_bytes"]
    record["peak_over_io"] = record["peak_rss"] / io
    if config.mode == "memory":
        record["excess_bytes"] = record["peak_rss"] - record["rss_imports"] - io
        record["within_bound"] = record["excess_bytes"] <= MEMORY_MARGIN_BYTES
    else:
        record["within_bound"] = record["peak_rss"] < FILE_TARGET_BYTES
    return record


def _mb(value):
    return "-" if value is None else f"{value / 1e6:,.0f}"


TABLE_COLUMNS = (
    ("solver", lambda r: r["solver"]),
    ("dtype", lambda r: r["dtype"]),
    ("mode", lambda r: r["mode"]),
    ("image", lambda r: f"{r['side']}x{r['side']}x{r['bands']}"),
    ("chunk", lambda r: str(r.get("chunk_pixels") or r.get("chunk_rows") or "default")),
    ("time s", lambda r: f"{r['seconds']:.2f}"),
    ("M problems/s", lambda r: f"{r['problems_per_s'] / 1e6:.2f}"),
    ("in MB", lambda r: _mb(r["input_bytes"])),
    ("out MB", lambda r: _mb(r["output_bytes"])),
    ("base MB", lambda r: _mb(r["rss_imports"])),
    ("peak RSS MB", lambda r: _mb(r["peak_rss"])),
    ("peak/(in+out)", lambda r: f"{r['peak_over_io']:.2f}"),
    ("excess MB", lambda r: _mb(r.get("excess_bytes"))),
    ("memray MB", lambda r: _mb(r.get("memray_peak_bytes"))),
    ("device MB", lambda r: _mb(r.get("device_peak_bytes"))),
    ("bound", lambda r: "ok" if r["within_bound"] else "EXCEEDED"),
)


def format_table(records) -> str:
    """A plain-text (Markdown) table of `run_profile` records."""
    header = [name for name, _ in TABLE_COLUMNS]
    rows = [[cell(r) for _, cell in TABLE_COLUMNS] for r in records]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]

    def line(cells):
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join(
        [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)]
    )
