"""Time of `remove_thermal` against `invert` on the same M3-like warm cube, both solvers.

A cube of M3's 85 global-mode bands (0.46-2.98 um): smooth w spectra (a 1 um and a 2 um
band, a linear continuum beyond 2.2 um), rough ground seen near nadir under incidences
of 10-60 deg, the Hapke r of the package's default model (`amsa`) plus the emission of a
surface at 350-400 K (eps = 1 - r_hd of the same model, `remove_thermal`'s own
emissivity, a blackbody Sun at 1 au) and 0.5 % noise. Timed, best of ``--repeat``, per
solver, in the same run on the same cube: `invert` (every band, T ignored) and
`remove_thermal` (``method="continuum"``: its `invert` start, the (a, b, T) fit over the
window, every band's w at the fitted T). Compilation is excluded (one small call first).
Target (issue 46, not asserted): `remove_thermal` at most 2x `invert` with numba.

Default 96 x 96 (a quick run on a 2-core machine); ``--full`` for the issue's
1000 x 1000 x 85.

Writes its JSON report to a temporary file (its path is printed), so a run never
overwrites the results stored in the repository: ``--save`` writes
``benchmarks/results/thermal.json``, ``--out PATH`` any other file.
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
import scipy.constants as sc

import lumaxlike
from lumaxlike._model import thermal
from lumaxlike._model._backends import retarget_to_numpy
from lumaxlike._thermal import emissivity

RESULTS = Path(__file__).parent / "results"
TARGET_RATIO = 2.0
SOLVERS = ("numba", "jax")
M3_BANDS_NM = (
    [460.99, 500.92, 540.84, 580.76, 620.69, 660.61, 700.54, 730.48]
    + [750.44 + 19.96 * k for k in range(40)]  # 750-1529 nm, 20 nm
    + [1548.92]
    + [1578.86 + 39.92 * k for k in range(36)]  # 1579-2976 nm, 40 nm
)
PARAMS = lumaxlike.HapkeParams(b=0.25, c=0.3, roughness=np.radians(20))
VIEW = np.radians(5.0)


def solar_irradiance(wavelengths: np.ndarray) -> np.ndarray:
    """A 5772 K blackbody Sun at 1 au [W m^-2 um^-1]."""
    radiance, _ = retarget_to_numpy(thermal).planck_radiance_and_slope(wavelengths, 5772.0)
    return np.pi * radiance * (6.957e8 / sc.au) ** 2


def m3_warm_cube(side: int, seed: int = 0):
    """(refl (side, side, 85), geometry (to_sun, to_sensor, normal), wavelengths, F_sun)."""
    x = np.asarray(M3_BANDS_NM) / 1000.0
    rng = np.random.default_rng(seed)
    shape = (side, side, 1)
    albedo = rng.uniform(0.2, 0.45, shape)
    w = (
        albedo
        * (1 + 0.1 * np.minimum(x, 2.2))
        * (1 - rng.uniform(0.02, 0.2, shape) * np.exp(-((x - 0.97) ** 2) / 0.02))
        * (1 - rng.uniform(0.01, 0.1, shape) * np.exp(-((np.minimum(x, 2.2) - 2.05) ** 2) / 0.03))
    )
    incidence = np.radians(rng.uniform(10, 60, (side, side)))
    to_sun = np.stack([np.sin(incidence), 0 * incidence, np.cos(incidence)], -1)
    to_sensor, normal = np.array([np.sin(VIEW), 0.0, np.cos(VIEW)]), np.array([0.0, 0.0, 1.0])
    solar = solar_irradiance(x)
    temperature = rng.uniform(350, 400, (side, side, 1))
    observed = np.empty((side, side, x.size))
    for rows in np.array_split(np.arange(side), -(-side // 64)):  # bounded memory
        w_rows = w[rows]
        r = np.asarray(lumaxlike.amsa(w_rows, to_sun[rows], to_sensor, normal, PARAMS, "numba"))
        cos_e = np.full(w_rows.shape, np.cos(VIEW))
        eps = emissivity.directional_emissivity(w_rows, cos_e, PARAMS, "numba")
        factor, _ = retarget_to_numpy(thermal).thermal_factor_and_slope(
            x, temperature[rows], solar, 1.0
        )
        observed[rows] = r + eps * factor
    observed *= 1 + 0.005 * rng.standard_normal(observed.shape)
    return observed, (to_sun, to_sensor, normal), x, solar


def best_time(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def time_solver(cube, geometry, wavelengths, solar, solver: str, repeat: int) -> dict:
    def run_invert(c, g):
        return lumaxlike.invert(c, *g, PARAMS, solver)

    def run_thermal(c, g):
        return lumaxlike.remove_thermal(
            c, *g, wavelengths, PARAMS, solar_spectrum=solar, solver=solver
        )

    small = (geometry[0][:2, :2], geometry[1], geometry[2])
    run_invert(cube[:2, :2], small)  # compile
    run_thermal(cube[:2, :2], small)
    invert_s = best_time(lambda: run_invert(cube, geometry), repeat)
    thermal_s = best_time(lambda: run_thermal(cube, geometry), repeat)
    return {"invert_s": invert_s, "thermal_s": thermal_s, "ratio": thermal_s / invert_s}


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=96, help="pixels per side (default 96)")
    parser.add_argument("--full", action="store_true", help="the issue's 1000 x 1000 x 85")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; best counts")
    parser.add_argument("--solvers", nargs="+", choices=SOLVERS, default=list(SOLVERS))
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--save",
        action="store_const",
        const=RESULTS / "thermal.json",
        dest="out",
        help="write the stored results, benchmarks/results/thermal.json",
    )
    where.add_argument(
        "--out", type=Path, help="write the JSON report here (default: a temporary file)"
    )
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = Path(tempfile.gettempdir()) / "lumaxlike-bench-thermal.json"
    side = 1000 if args.full else args.side
    cube, geometry, wavelengths, solar = m3_warm_cube(side)
    timings = {}
    for solver in args.solvers:
        timings[solver] = time_solver(cube, geometry, wavelengths, solar, solver, args.repeat)
        t = timings[solver]
        print(
            f"{side} x {side} x {wavelengths.size}, {solver}: remove_thermal "
            f"{t['thermal_s']:.3f} s, invert {t['invert_s']:.3f} s (ratio {t['ratio']:.1f}, "
            f"target <= {TARGET_RATIO} with numba)"
        )
    report = {
        "shape": list(cube.shape),
        "solvers": timings,
        "target_ratio": TARGET_RATIO,
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_average": list(os.getloadavg()),  # 1, 5, 15 min, at the run's end
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"report: {args.out}")
    return args.out


if __name__ == "__main__":
    main()
