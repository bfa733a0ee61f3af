"""`lumaxlike fit` on a stack of cube files: wall time, rate and peak RSS of the streamed run.

The size: 8 cubes of 1024 x 1024 pixels x 32 bands (float32 GeoTIFF, 128 MiB
each, 1 GiB in all), each with its OBS raster (float32, per-pixel to-sun and to-sensor
zenith and azimuth: incidence 0-60 deg, emission 0-60 deg, any azimuths), a flat surface,
reflectance r of ``HapkeParams(b=0.25, c=0.5)`` with w uniform in (0.2, 0.9) per pixel
and band, and 10 % of the observations NaN at random (gaps). Fitted: w, b, c with the
numba solver from ``--b 0.3 --c 0.4``, blocks of ``--chunk`` rows (default: about 32 MiB of
stacked reflectance).

The inputs are generated block by block into a temporary folder (not timed); the command
``lumaxlike fit ... --out fit.tif`` then runs in a child process, whose peak RSS
(``ru_maxrss`` of the children) is the figure to read: it should follow the block, not
the stack. Options: ``--cubes``, ``--size``, ``--bands``, ``--chunk``, ``--json PATH``.
Run tiny first: ``python benchmarks/bench_fit_stack.py --cubes 3 --size 32 --bands 4``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio

import lumaxlike

TRUTH = lumaxlike.HapkeParams(b=0.25, c=0.5)
OBS_BANDS = ("to_sun_zenith", "to_sun_azimuth", "to_sensor_zenith", "to_sensor_azimuth")


def write_stack(
    folder: Path, cubes: int, size: int, bands: int, seed: int = 0, block_rows: int = 64
):
    """Write `cubes` reflectance cubes and OBS rasters; return (cube paths, OBS paths)."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.2, 0.9, (size, size, bands)).astype(np.float32)
    profile = dict(
        driver="GTiff",
        width=size,
        height=size,
        dtype="float32",
        crs="EPSG:32612",
        transform=rasterio.Affine(30.0, 0.0, 500000.0, 0.0, -30.0, 4100000.0),
        tiled=True,
        blockxsize=min(256, size // 16 * 16 or 16),
        blockysize=min(256, size // 16 * 16 or 16),
    )
    cube_paths, obs_paths = [], []
    for k in range(cubes):
        cube_path, obs_path = folder / f"cube{k}.tif", folder / f"obs{k}.tif"
        with (
            rasterio.open(cube_path, "w", count=bands, nodata=np.nan, **profile) as cube,
            rasterio.open(obs_path, "w", count=4, **profile) as obs,
        ):
            for index, name in enumerate(OBS_BANDS, start=1):
                obs.set_band_description(index, name)
            for start in range(0, size, block_rows):
                rows = min(block_rows, size - start)
                shape = (rows, size)
                angles = np.stack(
                    [
                        rng.uniform(0, 60, shape),
                        rng.uniform(0, 360, shape),
                        rng.uniform(0, 60, shape),
                        rng.uniform(0, 360, shape),
                    ]
                ).astype(np.float32)
                to_sun = lumaxlike.direction_from_zenith_azimuth(
                    *np.radians(angles[:2].astype(np.float64))
                )
                to_sensor = lumaxlike.direction_from_zenith_azimuth(
                    *np.radians(angles[2:].astype(np.float64))
                )
                normal = np.broadcast_to([0.0, 0.0, 1.0], to_sun.shape)
                r = np.asarray(
                    lumaxlike.amsa(
                        w[start : start + rows].astype(np.float64),
                        to_sun,
                        to_sensor,
                        normal,
                        TRUTH,
                        backend="numba",
                    )
                )
                r[rng.random(r.shape) < 0.1] = np.nan
                window = rasterio.windows.Window(0, start, size, rows)
                cube.write(np.moveaxis(r, -1, 0).astype(np.float32), window=window)
                obs.write(angles, window=window)
        cube_paths.append(cube_path)
        obs_paths.append(obs_path)
    return cube_paths, obs_paths


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cubes", type=int, default=8)
    parser.add_argument("--size", type=int, default=1024, help="pixels per side")
    parser.add_argument("--bands", type=int, default=32)
    parser.add_argument(
        "--chunk", type=int, default=None, help="rows per block (default: lumaxlike's)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lumaxlike-fit-stack-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        cubes, obs = write_stack(folder, args.cubes, args.size, args.bands)
        generate_s = time.perf_counter() - t0
        command = [
            sys.executable,
            "-m",
            "lumaxlike",
            "fit",
            *map(str, cubes),
            "--geometry",
            *map(str, obs),
            "--units",
            "r",
            "--free",
            "w,b,c",
            "--b",
            "0.3",
            "--c",
            "0.4",
            "--out",
            str(folder / "fit.tif"),
            "--no-progress",
        ]
        if args.chunk:
            command += ["--chunk", str(args.chunk)]
        t0 = time.perf_counter()
        completed = subprocess.run(command, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if completed.returncode != 0:
            print(completed.stderr, file=sys.stderr)
            return completed.returncode
        peak_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux: KiB
        input_bytes = sum(p.stat().st_size for p in (*cubes, *obs))
        w, _ = lumaxlike.read_cube(folder / "fit.tif")
    problems = args.size * args.size * args.bands
    figures = {
        "cubes": args.cubes,
        "size": args.size,
        "bands": args.bands,
        "chunk_rows": args.chunk,
        "input_gb": input_bytes / 1e9,
        "generate_s": generate_s,
        "fit_s": seconds,
        "problems_per_s": problems / seconds,
        "peak_rss_gb": peak_rss / 1e9,
        "command_summary": completed.stderr.strip().splitlines()[-1],
        "w_finite_fraction": float(np.isfinite(w).mean()),
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
