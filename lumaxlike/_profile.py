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
    ``lumaxlike._io.invert_file``: a GeoTIFF cube plus a GeoTIFF OBS raster of per-pixel
    angles (written by the parent, block by block, into a temporary folder) streamed to
    GeoTIFF maps. Peak RSS is the child's whole-life peak. Target: < 1.5 GB for a
    2048 x 2048 x 32 float32 cube with either solver.

Run ``lumaxlike profile --help``.

This module imports NumPy only at the top: JAX, numba and lumaxlike are imported inside
the child after its thread settings (``--threads``) are in place.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import multiprocessing
import os
import resource
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

__all__ = [
    "PeakRSS",
    "ProfileConfig",
    "default_params",
    "format_table",
    "multi_angle_geometry",
    "multi_angle_reflectance",
    "random_geometry",
    "run_profile",
    "run_profiles",
    "synthetic_cube",
]

MiB = 2**20
MEMORY_MARGIN_BYTES = 500 * 10**6  # the in-memory bound: inputs + outputs + 500 MB
FILE_TARGET_BYTES = 1.5e9  # the streaming target: peak RSS < 1.5 GB


# ---------------------------------------------------------------------------------------
# Synthetic data


def default_params():
    """Hapke parameters with roughness and both opposition effects (the tests' FULL_PARAMS)."""
    from ._params import HapkeParams

    return HapkeParams(b=0.21, c=0.45, roughness=math.radians(20.0), hs=0.06, bs0=1.0, hc=0.05, bc0=0.5)


def random_geometry(n_pixels, rng, max_incidence_deg=80.0, max_emission_deg=70.0, max_tilt_deg=30.0):
    """Random (to_sun, to_sensor, normal) vectors, each (n_pixels, 3) float64.

    Shared by the tests, benchmarks and profiles: incidence 0-80 deg, emission
    0-70 deg at any azimuth on a flat frame, the normal tilted by up to 30 deg (so a few
    percent of pixels see the source or observer below the local horizon).
    """
    from ._geometry import direction_from_zenith_azimuth

    inc = np.radians(rng.uniform(0, max_incidence_deg, n_pixels))
    emi = np.radians(rng.uniform(0, max_emission_deg, n_pixels))
    az = rng.uniform(0, 2 * np.pi, n_pixels)
    to_sun = direction_from_zenith_azimuth(inc, np.zeros(n_pixels))
    to_sensor = direction_from_zenith_azimuth(emi, az)
    tilt = np.radians(rng.uniform(0, max_tilt_deg, n_pixels))
    normal = direction_from_zenith_azimuth(tilt, rng.uniform(0, 2 * np.pi, n_pixels))
    return to_sun, to_sensor, normal


def multi_angle_geometry(n_pixels, n_obs, rng, *, min_phase_deg=0.0, opposition=True):
    """Random multi-angle geometry: (to_sun, to_sensor, normal), each (n_pixels, n_obs, 3).

    Shared by the `fit` tests and benchmark: incidence 0-60 deg, emission 0-65 deg at any
    relative azimuth, on a flat surface. With `opposition`, the first two observations of
    every pixel lie near the opposition (phase angles of about 2 and 8 deg), as in a
    goniometer run or a hot-spot pass; `min_phase_deg` redraws any observation at a
    smaller phase angle (for setups that cannot see the opposition effects).
    """
    from ._geometry import direction_from_zenith_azimuth

    def draw(shape):
        inc = np.radians(rng.uniform(0.0, 60.0, shape))
        emi = np.radians(rng.uniform(0.0, 65.0, shape))
        return (
            direction_from_zenith_azimuth(inc, np.zeros(shape)),
            direction_from_zenith_azimuth(emi, rng.uniform(0.0, 2.0 * np.pi, shape)),
        )

    to_sun, to_sensor = draw((n_pixels, n_obs))
    while True:  # redraw observations below the minimum phase angle
        too_small = np.sum(to_sun * to_sensor, axis=-1) > np.cos(np.radians(min_phase_deg))
        if min_phase_deg <= 0.0 or not too_small.any():
            break
        new_source, new_observer = draw((int(too_small.sum()),))
        to_sun[too_small], to_sensor[too_small] = new_source, new_observer
    if opposition:
        for k, phase_deg in enumerate((2.0, 8.0)[: min(2, n_obs)]):
            inc = np.radians(rng.uniform(5.0, 50.0, n_pixels))
            to_sun[:, k] = direction_from_zenith_azimuth(inc, np.zeros(n_pixels))
            to_sensor[:, k] = direction_from_zenith_azimuth(inc + np.radians(phase_deg), np.zeros(n_pixels))
    normal = np.broadcast_to(np.array([0.0, 0.0, 1.0]), to_sun.shape).copy()
    return to_sun, to_sensor, normal


def multi_angle_reflectance(w, to_sun, to_sensor, normal, params):
    """Noise-free r [1/sr], (pixels, bands, observations), for `multi_angle_geometry`.

    Args:
        w: (pixels, bands) albedos; the geometry arrays (pixels, observations, 3);
            params: `HapkeParams` shared by every pixel.
    """
    from ._model.forward import amsa

    per_observation = [
        np.asarray(amsa(w, to_sun[:, k], to_sensor[:, k], normal[:, k], params, backend="numba"))
        for k in range(to_sun.shape[1])
    ]
    return np.stack(per_observation, axis=-1)


def synthetic_cube(side, bands, dtype=np.float64, *, params=None, seed=0, geometry=None,
                   truth=False, block_pixels=1 << 16, w_range=(0.05, 0.95)):
    """A noise-free side x side x bands reflectance cube with per-pixel geometry.

    Generated block by block, so temporaries stay small whatever the cube size. The
    reflectance is ``lumaxlike.amsa(w_true, ..., backend="numba")`` with w_true uniform in
    `w_range`, computed from the geometry as stored (rounded to `dtype` first).

    Args:
        side: pixels per side (the image is square).
        bands: spectral bands.
        dtype: float32 or float64: of the reflectance and of the geometry vectors.
        params: `HapkeParams`; default `default_params()`.
        seed: random seed.
        geometry: function ``(n_pixels, rng) -> (to_sun, to_sensor, normal)``;
            default `random_geometry`.
        truth: also return ``w_true`` (float64, shaped like refl).
        block_pixels: pixels generated at a time.

    Returns:
        dict with ``refl`` (side, side, bands) [1/sr], ``to_sun``, ``to_sensor``,
        ``normal`` (side, side, 3), ``params`` and, with `truth`, ``w_true``.
    """
    from ._model.forward import amsa

    params = default_params() if params is None else params
    geometry = random_geometry if geometry is None else geometry
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    n_pixels = side * side
    refl = np.empty((n_pixels, bands), dtype)
    vectors = [np.empty((n_pixels, 3), dtype) for _ in range(3)]
    w_true = np.empty((n_pixels, bands), np.float64) if truth else None
    for start in range(0, n_pixels, block_pixels):
        stop = min(start + block_pixels, n_pixels)
        block = [np.asarray(v, dtype) for v in geometry(stop - start, rng)]
        w = rng.uniform(*w_range, (stop - start, bands))
        refl[start:stop] = amsa(w, *(b.astype(np.float64) for b in block), params, backend="numba")
        for target, values in zip(vectors, block):
            target[start:stop] = values
        if truth:
            w_true[start:stop] = w
    cube = {
        "refl": refl.reshape(side, side, bands),
        "to_sun": vectors[0].reshape(side, side, 3),
        "to_sensor": vectors[1].reshape(side, side, 3),
        "normal": vectors[2].reshape(side, side, 3),
        "params": params,
    }
    if truth:
        cube["w_true"] = w_true.reshape(side, side, bands)
    return cube


# ---------------------------------------------------------------------------------------
# Memory measurement (inside the child)


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def current_rss() -> int:
    """Resident set size of this process [bytes]."""
    kib = _status_kib("VmRSS")
    if kib is not None:
        return kib * 1024
    import psutil

    return psutil.Process().memory_info().rss


def lifetime_max_rss() -> int:
    """Peak RSS over the life of this process [bytes] (``getrusage``; KiB on Linux)."""
    value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return value if sys.platform == "darwin" else value * 1024


def release_free_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc ``malloc_trim``).

    Without it, memory freed while generating the inputs could stay in the heap and be
    reused by the measured call without raising the RSS, hiding its allocations.
    """
    gc.collect()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)


class PeakRSS:
    """Context manager: peak resident set size [bytes] of this process inside the block.

    Resets Linux's high-water mark (``VmHWM``, via ``/proc/self/clear_refs``) on entry and
    reads it on exit: exact, no sampling. Elsewhere a thread samples the RSS every
    `interval` seconds (short spikes may be missed). ``method`` says which was used.
    """

    def __init__(self, interval: float = 0.001):
        self.interval = interval
        self.peak = 0
        self.method = None
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        try:
            with open("/proc/self/clear_refs", "w") as clear:
                clear.write("5")
            if _status_kib("VmHWM") is None:
                raise OSError("no VmHWM")
            self.method = "VmHWM"
        except OSError:
            self.method = "sampled"
            self.peak = current_rss()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, current_rss())
            self._stop.wait(self.interval)

    def __exit__(self, *exc):
        if self.method == "VmHWM":
            self.peak = _status_kib("VmHWM") * 1024
        else:
            self._stop.set()
            self._thread.join()
            self.peak = max(self.peak, current_rss())
        return False


@contextlib.contextmanager
def _memray_peak(enabled: bool, folder: str, out: dict):
    """Track heap allocations with memray inside the block; puts its peak into ``out``."""
    if not enabled:
        yield
        return
    try:
        import memray
    except ImportError:
        out["memray_peak_bytes"] = None
        out["memray_note"] = "memray is not installed"
        yield
        return
    path = os.path.join(folder, f"memray-{os.getpid()}.bin")
    with memray.Tracker(path, file_format=memray.FileFormat.AGGREGATED_ALLOCATIONS):
        yield
    out["memray_peak_bytes"] = int(memray.FileReader(path).metadata.peak_memory)
    os.remove(path)


def _device_peak_bytes():
    """``peak_bytes_in_use`` of the first JAX device on a GPU (whole process life), else None."""
    import jax

    device = jax.devices()[0]
    if device.platform != "gpu":
        return None
    stats = device.memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def _limit_threads(threads):
    """Before JAX starts its backend: numba threads, and CPU affinity (what XLA:CPU sizes to)."""
    if threads is None:
        return
    if hasattr(os, "sched_setaffinity"):
        available = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, available[: max(1, threads)])
    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


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
    cube = synthetic_cube(config.side, config.bands, config.dtype, seed=config.seed, truth=config.truth)
    params = cube["params"]
    geometry = (cube["to_sun"], cube["to_sensor"], cube["normal"])
    w_true = cube.pop("w_true", None)
    n_pixels = config.side * config.side
    out = {"numba_threads": numba.get_num_threads()}

    if config.task == "forward":
        w = np.random.default_rng(config.seed + 1).uniform(0.05, 0.95, cube["refl"].shape).astype(config.dtype)

        def call(pixels=None):
            r = lumaxlike.amsa(w, *geometry, params, backend=config.solver)
            if config.solver == "jax":
                r = r.block_until_ready()
            return r

        chunk = n_pixels
        input_bytes = _nbytes(w, *geometry)
        del cube
    else:
        from ._inverse.invert import default_chunk_pixels

        chunk = config.chunk_size or default_chunk_pixels(config.bands)
        chunk = min(chunk, n_pixels)
        kwargs = {"chunk_size": config.chunk_size}
        if config.max_iter is not None:
            kwargs["max_iter"] = config.max_iter

        def call(pixels=None):
            if pixels is None:
                return lumaxlike.invert(cube["refl"], *geometry, params, config.solver, **kwargs)
            rows = -(-pixels // config.side)  # whole rows covering `pixels`, >= one chunk
            piece = [a[:rows] for a in (cube["refl"], *geometry)]
            return lumaxlike.invert(*piece, params, config.solver, **kwargs)

        input_bytes = _nbytes(cube["refl"], *geometry)

    if config.warmup:
        start = time.perf_counter()
        warm = call(None if config.task == "forward" else chunk)
        out["warmup_s"] = time.perf_counter() - start
        out["warmup_problems"] = int(np.size(warm.w if hasattr(warm, "w") else warm))
        del warm
    release_free_memory()
    rss_before = current_rss()
    with PeakRSS() as peak, _memray_peak(config.memray, folder, out):
        start = time.perf_counter()
        result = call()
        seconds = time.perf_counter() - start
    problems = n_pixels * config.bands
    if config.task == "forward":
        output_bytes = _nbytes(result)
    else:
        output_bytes = _nbytes(*dataclasses.astuple(result))
        converged = result.status == int(lumaxlike.Status.CONVERGED)
        out["converged_fraction"] = float(converged.mean())
        out["mean_iterations"] = float(result.iterations[converged].mean()) if converged.any() else None
        out["status_counts"] = result.counts()
        if w_true is not None:
            err = np.abs(result.w.astype(np.float64) - w_true)[converged]
            out["max_abs_w_error"] = float(err.max()) if err.size else None
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
        device_peak_bytes=_device_peak_bytes(),
        jax_device=str(jax.devices()[0]),  # after the measurement: starts JAX's backend
    )
    if config.warmup:
        out["compile_s"] = max(0.0, out["warmup_s"] - out["warmup_problems"] / out["problems_per_s"])
    return out


def _child_file(config: ProfileConfig, folder: str, rss_start: int) -> dict:
    import numba

    from ._io import invert_file

    rss_imports = current_rss()
    folder = Path(folder)
    chunk_rows = None if config.chunk_size is None else max(1, config.chunk_size // config.side)
    out = {}
    # No reset of the high-water mark: the target is the whole process's peak.
    with _memray_peak(config.memray, str(folder), out):
        summary = invert_file(
            folder / "cube.tif", folder / "w.tif", geometry=str(folder / "obs.tif"),
            params=default_params(), solver=config.solver, units="r", chunk_rows=chunk_rows,
            overwrite=True, progress=False, max_iter=config.max_iter,
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
        input_bytes=sum(p.stat().st_size for p in (folder / "cube.tif", folder / "obs.tif")),
        output_bytes=sum(p.stat().st_size for p in outputs if p.is_file()),
        rss_start=rss_start,
        rss_imports=rss_imports,
        peak_rss=max((_status_kib("VmHWM") or 0) * 1024, lifetime_max_rss()),
        peak_method="lifetime VmHWM / ru_maxrss",
        device_peak_bytes=_device_peak_bytes(),
    )
    return out


# ---------------------------------------------------------------------------------------
# The parent


def write_geotiff_inputs(folder, side, bands, dtype="float32", seed=0, block_rows=64) -> dict:
    """Write ``cube.tif`` (r [1/sr], `bands` bands) and ``obs.tif`` (4 angle bands [deg]).

    Flat surface (no DTM), per-pixel angles: to-sun zenith 0-80 deg, to-sensor zenith
    0-70 deg, azimuths 0-360 deg; the cube is ``amsa`` of a random w in (0.05, 0.95) with
    `default_params()`. Written block by block of rows (memory stays small).
    """
    import rasterio
    from rasterio.transform import from_origin

    from ._geometry import direction_from_zenith_azimuth
    from ._model.forward import amsa

    folder = Path(folder)
    params = default_params()
    rng = np.random.default_rng(seed)
    profile = {
        "driver": "GTiff", "width": side, "height": side, "dtype": dtype,
        "transform": from_origin(0.0, float(side), 1.0, 1.0), "crs": "EPSG:32633",
        "tiled": True, "blockxsize": 256, "blockysize": 256,
    }  # fmt: skip
    names = ("To-sun zenith", "To-sun azimuth", "To-sensor zenith", "To-sensor azimuth")
    with rasterio.open(folder / "cube.tif", "w", count=bands, nodata=None, **profile) as cube, \
            rasterio.open(folder / "obs.tif", "w", count=4, **profile) as obs:
        for index, name in enumerate(names, start=1):
            obs.set_band_description(index, name)
        for row in range(0, side, block_rows):
            rows = min(block_rows, side - row)
            shape = (rows, side)
            angles = [rng.uniform(0, 80, shape), rng.uniform(0, 360, shape),
                      rng.uniform(0, 70, shape), rng.uniform(0, 360, shape)]  # fmt: skip
            angles = [a.astype(dtype) for a in angles]
            to_sun = direction_from_zenith_azimuth(np.deg2rad(angles[0].astype(np.float64)),
                                                      np.deg2rad(angles[1].astype(np.float64)))
            to_sensor = direction_from_zenith_azimuth(np.deg2rad(angles[2].astype(np.float64)),
                                                        np.deg2rad(angles[3].astype(np.float64)))
            w = rng.uniform(0.05, 0.95, shape + (bands,))
            refl = amsa(w, to_sun, to_sensor, np.array([0.0, 0.0, 1.0]), params, backend="numba")
            window = rasterio.windows.Window(0, row, side, rows)
            cube.write(np.moveaxis(refl.astype(dtype), -1, 0), window=window)
            obs.write(np.stack(angles), window=window)
    return {"cube": folder / "cube.tif", "obs": folder / "obs.tif"}


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
    line = lambda cells: "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])
