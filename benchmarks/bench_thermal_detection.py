"""How often `remove_thermal` calls a cold pixel's temperature CONVERGED (a false
detection), and how often it constrains a warm one's (issue 55, section 7, item 1).

Scenes as the tests draw them (tests/test_thermal.py's `scene`, here with the package's
own forward model and emissivity): M3 global-mode bands (40 nm) over 1.5-3.0 um, w linear
in wavelength with a 3 um band, flat ground seen 5 deg off nadir, the Sun 10-60 deg from
the zenith at 1 au, noise 0.5 % of the mean I/F per band. For each surface temperature
and each noise setting (``refl_sigma`` given, the true sigma; and None, estimated from
the fit's residual, the command line's default) the fraction of pixels CONVERGED (or
BAND_FAILED: T claimed alike; at
250-300 K a false detection: the emission is below the noise in every band at 250 K),
NOT_CONSTRAINED and otherwise, and at 350-400 K the median 1-sigma of T and the rms
error of the CONVERGED pixels. A measurement, not a timing: nothing here depends on the
machine but the floating-point results.

Writes its JSON report to a temporary file (its path is printed); ``--save NAME`` writes
``benchmarks/results/NAME.json`` (the stored ones: ``thermal_detection_before``, at
commit 78d351d, and ``thermal_detection_after``), ``--out PATH`` any other file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import scipy.constants as sc

import lumaxlike
from lumaxlike._model import thermal
from lumaxlike._model._backends import retarget_to_numpy
from lumaxlike._thermal import emissivity

RESULTS = Path(__file__).parent / "results"
WAVELENGTHS = np.arange(1.5, 3.0001, 0.04)
PARAMS = lumaxlike.HapkeParams(b=0.25, c=0.3, roughness=np.radians(20))
VIEW = np.radians(5.0)
NOISE = 0.005
COLD = (250.0, 280.0, 300.0)
WARM = (350.0, 375.0, 400.0)


def solar_irradiance(wavelengths: np.ndarray) -> np.ndarray:
    """A 5772 K blackbody Sun at 1 au [W m^-2 um^-1]."""
    radiance, _ = retarget_to_numpy(thermal).planck_radiance_and_slope(wavelengths, 5772.0)
    return np.pi * radiance * (6.957e8 / sc.au) ** 2


def scene(temperature: float, pixels: int, seed: int):
    """(observed r (pixels, bands), geometry, F_sun, the noise's sigma per band)."""
    rng = np.random.default_rng(seed)
    incidence = np.radians(rng.uniform(10, 60, pixels))
    to_sun = np.stack([np.sin(incidence), 0 * incidence, np.cos(incidence)], -1)
    to_sensor, normal = np.array([np.sin(VIEW), 0.0, np.cos(VIEW)]), np.array([0.0, 0.0, 1.0])
    band = 0.08 * np.exp(-0.5 * ((WAVELENGTHS - 2.9) / 0.05) ** 2)
    w = np.broadcast_to(0.30 + 0.05 * (WAVELENGTHS - 2.3) - band, (pixels, WAVELENGTHS.size))
    r = np.asarray(lumaxlike.amsa(w, to_sun, to_sensor, normal, PARAMS, "numba"))
    eps = emissivity.directional_emissivity(w, np.full(w.shape, np.cos(VIEW)), PARAMS, "numba")
    solar = solar_irradiance(WAVELENGTHS)
    factor, _ = retarget_to_numpy(thermal).thermal_factor_and_slope(
        WAVELENGTHS, np.full((pixels, 1), temperature), solar, 1.0
    )
    clean = r + eps * factor
    sigma = NOISE * clean.mean(axis=0)
    return (
        clean + sigma * rng.standard_normal(clean.shape),
        (to_sun, to_sensor, normal),
        solar,
        sigma,
    )


def measure(temperature: float, pixels: int, seed: int, solver: str, method: str) -> dict:
    observed, geometry, solar, sigma = scene(temperature, pixels, seed)
    row = {}
    for name, refl_sigma in (("sigma_given", sigma), ("sigma_estimated", None)):
        if method == "prior" and refl_sigma is None:
            continue  # "prior" needs refl_sigma
        result = lumaxlike.remove_thermal(
            observed,
            *geometry,
            WAVELENGTHS,
            PARAMS,
            solar_spectrum=solar,
            refl_sigma=refl_sigma,
            solver=solver,
            method=method,
        )
        # T claimed: CONVERGED, or BAND_FAILED (T as CONVERGED's, a band not corrected)
        claimed = [lumaxlike.Status.CONVERGED, getattr(lumaxlike.Status, "BAND_FAILED", 0)]
        converged = np.isin(result.status, claimed)
        loose = result.status == lumaxlike.Status.NOT_CONSTRAINED
        error = result.temperature[converged] - temperature
        row[name] = {
            "converged": float(converged.mean()),
            "not_constrained": float(loose.mean()),
            "other": float(1 - converged.mean() - loose.mean()),
            "converged_t_range_k": [float(error.min()), float(error.max())] if error.size else None,
            "rms_error_k": float(np.sqrt(np.mean(error**2))) if error.size else None,
            "median_sigma_k": (
                float(np.median(result.temperature_sigma[converged])) if error.size else None
            ),
        }
        print(f"{method} {temperature:.0f} K, {name}: {row[name]}")
    return row


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pixels", type=int, default=400, help="pixels per temperature")
    parser.add_argument("--solver", choices=("numba", "jax"), default="numba")
    parser.add_argument("--methods", nargs="+", default=["continuum", "prior"])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--save", metavar="NAME", help="write benchmarks/results/NAME.json")
    where.add_argument("--out", type=Path, help="write the JSON report here")
    args = parser.parse_args(argv)
    out = RESULTS / f"{args.save}.json" if args.save else args.out
    out = out or Path(tempfile.gettempdir()) / "lumaxlike-bench-thermal-detection.json"
    rows: dict = {}
    for method in args.methods:
        rows[method] = {
            f"{t:.0f}": measure(t, args.pixels, seed, args.solver, method)
            for seed, t in enumerate(COLD + WARM)
        }
    report = {
        "pixels_per_temperature": args.pixels,
        "noise_of_if": NOISE,
        "solver": args.solver,
        "results": rows,
        "commit": _commit(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"report: {out}")
    return out


if __name__ == "__main__":
    main()
