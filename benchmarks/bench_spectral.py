"""Time of every spectral product an M3-like cube gives, against the time to read it.

A float32 cube of M3's 85 global-mode bands (0.46-2.98 um, plus a 0.42 um band for
Lucey's TiO2), smooth spectra with a 1 um and a 2 um band and 1 % noise, stored as a
``.npy`` file in a temporary folder. Timed, best of ``--repeat``, the reads and the
products in turn (read, products, read, ...: a shared machine's load weighs on both
alike; the load average is reported, and the CPU time of each, which hardly depends on
it): reading the cube from that file (``np.load``, the page cache warm: the lower bound
of any reader) and from an ENVI BIL file as M3 ships (`lumaxlike.read_cube`, GDAL, page
cache warm), and `spectral_parameters` with every
product the bands give (`available_spectral_products`: the M3 and Lucey products;
CRISM's kernels are refused on M3's 20-40 nm bands), block by block of ``--rows`` rows
as a file front end would; then copying the cube in memory and the convex-hull
`continuum_removed` alone. Target (issue 45, not asserted): the products under 2x the
read time.

Default 256 x 256 (a quick run); ``--full`` for the issue's 1000 x 1000 x 85 (about 340 MB
of float32, and as much again per block's intermediates at the default rows).

Writes its JSON report to a temporary file (its path is printed), so a run never
overwrites the results stored in the repository: ``--save`` writes
``benchmarks/results/spectral.json``, ``--out PATH`` any other file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

import lumaxlike

RESULTS = Path(__file__).parent / "results"
TARGET_RATIO = 2.0

M3_BANDS_NM = (
    [420.0, 460.99, 500.92, 540.84, 580.76, 620.69, 660.61, 700.54, 730.48]
    + [750.44 + 19.96 * k for k in range(40)]  # 750-1529 nm, 20 nm
    + [1548.92]
    + [1578.86 + 39.92 * k for k in range(36)]  # 1579-2976 nm, 40 nm
)


def m3_cube(rows: int, cols: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols, bands) float32 spectra and their (bands,) wavelengths [um]."""
    x = np.asarray(M3_BANDS_NM) / 1000.0
    rng = np.random.default_rng(seed)
    cube = np.empty((rows, cols, x.size), np.float32)
    for row in range(rows):
        depth1 = rng.uniform(0.02, 0.25, (cols, 1))
        depth2 = rng.uniform(0.01, 0.15, (cols, 1))
        albedo = rng.uniform(0.05, 0.3, (cols, 1))
        spectra = (
            albedo
            * (1 + 0.3 * x)
            * (1 - depth1 * np.exp(-((x - 0.97) ** 2) / 0.02))
            * (1 - depth2 * np.exp(-((x - 2.05) ** 2) / 0.08))
        )
        cube[row] = spectra * (1 + 0.01 * rng.standard_normal(spectra.shape))
    return cube, x


def write_envi(path: Path, cube: np.ndarray) -> Path:
    """``cube`` as an ENVI band-interleaved-by-line file, as M3's L1B and L2 ship."""
    import warnings

    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    warnings.simplefilter("ignore", NotGeoreferencedWarning)
    rows, cols, bands = cube.shape
    profile = dict(driver="ENVI", width=cols, height=rows, count=bands, dtype="float32")
    with rasterio.open(path, "w", interleave="line", **profile) as dst:
        dst.write(np.moveaxis(cube, -1, 0))
    return path


def best_time(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def interleaved(functions: dict, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    """Best wall-clock and best CPU time (this process, every thread) [s] of each of
    ``functions`` ``{name: function}``, timed in turn ``repeat`` times (read, products,
    read, products, ...), so that a machine whose load changes during the run loads them
    alike; the CPU times hardly depend on the load at all."""
    wall: dict[str, list[float]] = {name: [] for name in functions}
    cpu: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeat):
        for name, function in functions.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            function()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    return (
        {name: min(values) for name, values in wall.items()},
        {name: min(values) for name, values in cpu.items()},
    )


def by_blocks(cube, wavelengths, products, rows: int) -> None:
    for start in range(0, cube.shape[0], rows):
        lumaxlike.spectral_parameters(
            cube[start : start + rows], wavelengths, products, quantity="w"
        )


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=256, help="pixels per side (default 256)")
    parser.add_argument("--full", action="store_true", help="the issue's 1000 x 1000 x 85")
    parser.add_argument("--rows", type=int, default=64, help="rows per block (default 64)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; best counts")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--save",
        action="store_const",
        const=RESULTS / "spectral.json",
        dest="out",
        help="write the stored results, benchmarks/results/spectral.json",
    )
    where.add_argument(
        "--out", type=Path, help="write the JSON report here (default: a temporary file)"
    )
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = Path(tempfile.gettempdir()) / "lumaxlike-bench-spectral.json"
    side = 1000 if args.full else args.side
    cube, wavelengths = m3_cube(side, side)
    products = lumaxlike.available_spectral_products(wavelengths)
    by_blocks(cube[: min(2, side)], wavelengths, products, args.rows)  # compile the hull kernel
    lumaxlike.continuum_removed(cube[:1, :1], wavelengths)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cube.npy"
        np.save(path, cube)
        envi = write_envi(Path(folder) / "cube.img", cube)
        best, cpu = interleaved(
            {
                "read": lambda: np.load(path),
                "read_envi": lambda: lumaxlike.read_cube(envi),
                "products": lambda: by_blocks(cube, wavelengths, products, args.rows),
            },
            args.repeat,
        )
    read_s, read_envi_s, products_s = best["read"], best["read_envi"], best["products"]
    copy_s = best_time(lambda: cube.copy(), args.repeat)
    hull_s = best_time(lambda: lumaxlike.continuum_removed(cube, wavelengths), args.repeat)
    load_after = os.getloadavg()
    ratio = products_s / read_s
    ratio_envi = products_s / read_envi_s
    ratio_envi_cpu = cpu["products"] / cpu["read_envi"]
    print(
        f"{side} x {side} x {wavelengths.size} float32, {len(products)} products: "
        f"{products_s:.3f} s; read {read_s:.3f} s (ratio {ratio:.1f}, target <= "
        f"{TARGET_RATIO}); read as ENVI BIL {read_envi_s:.3f} s (ratio {ratio_envi:.1f}; "
        f"CPU time {cpu['products']:.3f} s / {cpu['read_envi']:.3f} s = {ratio_envi_cpu:.1f}); "
        f"copy {copy_s:.3f} s; convex hull alone {hull_s:.3f} s; load average (1 min) "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after"
    )
    report = {
        "shape": list(cube.shape),
        "products": list(products),
        "rows_per_block": args.rows,
        "read_s": read_s,
        "read_envi_s": read_envi_s,
        "products_over_envi_read": ratio_envi,
        "cpu_s": cpu,
        "products_over_envi_read_cpu": ratio_envi_cpu,
        "copy_s": copy_s,
        "products_s": products_s,
        "hull_s": hull_s,
        "products_over_read": ratio,
        "target_ratio": TARGET_RATIO,
        "machine": {
            "cores": os.cpu_count(),
            "load_average_1min": [load_before[0], load_after[0]],
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"report: {args.out}")
    return args.out


if __name__ == "__main__":
    main()
