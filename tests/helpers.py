"""Shared test helpers: the solvers every inversion test runs over, random geometries, and
the recovery check every model configuration must pass."""

import numpy as np

import lumaxlike
from lumaxlike.testing import default_params, random_geometry

__all__ = [
    "SOLVERS",
    "BACKENDS",
    "FULL_PARAMS",
    "random_geometry",
    "assert_both_solvers_recover_w",
    "assert_reproduces_invert",
    "count_raster_opens",
]

SOLVERS = ("jax", "numba")
BACKENDS = ("jax", "numba")

# roughness 20 deg and both opposition effects (the benchmarks' and profiles' default)
FULL_PARAMS = default_params()


def assert_both_solvers_recover_w(params, seed, n_pixels=300, n_bands=3):
    """`invert` with both solvers on the noise-free reflectance of the model `params`
    (random geometry, w uniform in (0.02, 0.98)): over 90 % converge, w to 1e-8 where
    converged and NaN elsewhere, and the two solvers agree (same statuses, w to 1e-9)."""
    rng = np.random.default_rng(seed)
    geometry = random_geometry(n_pixels, rng)
    w_true = rng.uniform(0.02, 0.98, (n_pixels, n_bands))
    refl = lumaxlike.amsa(w_true, *geometry, params, backend="numba")
    results = {
        solver: lumaxlike.invert(refl, *geometry, params, solver=solver) for solver in SOLVERS
    }
    for result in results.values():
        converged = result.status == lumaxlike.Status.CONVERGED
        assert converged.mean() > 0.9
        np.testing.assert_allclose(result.w[converged], w_true[converged], atol=1e-8, rtol=0)
        assert np.all(np.isnan(result.w[~converged]))
    np.testing.assert_array_equal(results["jax"].status, results["numba"].status)
    np.testing.assert_allclose(results["jax"].w, results["numba"].w, atol=1e-9, rtol=0)


def assert_reproduces_invert(
    result, expected, refl, solver, label="", last_bits=None, sigma_eps=16
):
    """`invert`'s `result` equals `expected` (a mapping of its fields' stored arrays).

    numba: bit for bit. JAX: the same statuses and iterations, the values to their last
    bits: XLA:CPU contracts a * b + c into fused multiply-adds inside its fusions, so a
    rearranged JAX graph evaluating the same expressions rounds differently in the last
    place (measured: w within 1 ulp, residual within 3 eps |refl|, sigma within 5 eps
    relative, dr/dw at points an ulp apart being steep near w = 1). `last_bits` (default:
    JAX only) asks for that comparison where the model's own arithmetic was rearranged;
    `sigma_eps`: sigma's relative tolerance in units of eps.
    """
    last_bits = solver != "numba" if last_bits is None else last_bits
    eps = np.finfo(result.w.dtype).eps
    tolerance = {
        "w": (2 * eps, 0.0),
        "residual": (8 * eps * np.abs(refl), 0.0),
        "sigma": (0.0, sigma_eps * eps),
    }
    for field in ("w", "status", "iterations", "residual", "sigma"):
        actual, wanted = getattr(result, field), expected[field]
        assert actual.dtype == wanted.dtype, f"{label} {field}"
        if not last_bits or field not in tolerance:
            np.testing.assert_array_equal(actual, wanted, err_msg=f"{label} {field}")
            continue
        atol, rtol = tolerance[field]
        np.testing.assert_array_equal(
            np.isnan(actual), np.isnan(wanted), err_msg=f"{label} {field}"
        )
        close = np.abs(actual - wanted) <= atol + rtol * np.abs(wanted)
        assert np.all(close | np.isnan(wanted)), f"{label} {field}"


def write_angle_stack(folder, w, params, n_cubes, rng, alter=None):
    """`n_cubes` GeoTIFF cubes of r [1/sr] of albedo `w` (rows, cols, bands) under random
    sun and sensor angles (zenith 0-60 deg, azimuth 0-360 deg, flat normals), each with its
    OBS raster of those angles. ``alter(k, r, path)``, if given, may change cube k's r
    before it is written and its file after. Returns (cube paths, OBS paths, arrays): the
    stacked (refl, to_sun, to_sensor, normal) that `lumaxlike.fit` takes."""
    from .test_io import OBS_DESCRIPTIONS, WAVELENGTHS, write_raster

    n_bands = w.shape[-1]
    cubes, obs, refl, geometry = [], [], [], []
    for k in range(n_cubes):
        shape = w.shape[:2]
        angles = np.stack([rng.uniform(0.0, top, shape) for top in (60.0, 360.0, 60.0, 360.0)])
        to_sun = lumaxlike.direction_from_zenith_azimuth(*np.radians(angles[:2]))
        to_sensor = lumaxlike.direction_from_zenith_azimuth(*np.radians(angles[2:]))
        normal = np.broadcast_to([0.0, 0.0, 1.0], to_sun.shape)
        r = np.asarray(lumaxlike.amsa(w, to_sun, to_sensor, normal, params, backend="numba"))
        if alter is not None:
            alter(k, r, None)
        path = write_raster(
            folder / f"cube{k}.tif", np.moveaxis(r, -1, 0), envi_wavelengths=WAVELENGTHS[:n_bands]
        )
        if alter is not None:
            alter(k, r, path)
        cubes.append(path)
        obs.append(write_raster(folder / f"obs{k}.tif", angles, descriptions=OBS_DESCRIPTIONS))
        refl.append(r)
        geometry.append((to_sun, to_sensor, normal))
    arrays = (
        np.stack(refl, axis=-1),
        *(np.stack([g[j] for g in geometry], axis=-2) for j in range(3)),
    )
    return cubes, obs, arrays


def count_raster_opens(monkeypatch) -> list[str]:
    """Spy on `rasterio.open` through ``monkeypatch`` (undone with it): the list returned
    gets every source opened from then on, as ``str`` (lumaxlike's reads open rasters
    there)."""
    import rasterio

    opened: list[str] = []
    real_open = rasterio.open

    def spy(source, *args, **kwargs):
        opened.append(str(source))
        return real_open(source, *args, **kwargs)

    monkeypatch.setattr(rasterio, "open", spy)
    return opened
