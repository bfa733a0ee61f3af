"""`lumaxlike.fit_file` and `lumaxlike.fit_dataarray`: the public front ends of `fit`, as
`invert_file`/`invert_dataarray` are of `invert`. On one small stack of cubes, both give
the maps `lumaxlike.fit` computes on the stacked arrays."""

import numpy as np
import pytest
import rasterio
import xarray as xr

import lumaxlike

from .test_io import OBS_DESCRIPTIONS, write_raster

TRUTH = lumaxlike.HapkeParams(b=0.25, c=0.5)
START = lumaxlike.HapkeParams(b=0.3, c=0.4)
FREE = ("w", "b", "c")
ROWS, COLS, BANDS, CUBES = 2, 3, 2, 6


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """6 cubes of r [1/sr] with their OBS rasters: the paths, and the arrays `fit` takes
    (refl (rows, cols, bands, cubes), the direction vectors (rows, cols, cubes, 3))."""
    folder = tmp_path_factory.mktemp("stack")
    rng = np.random.default_rng(7)
    w = rng.uniform(0.2, 0.9, (ROWS, COLS, BANDS))
    cubes, obs, refl, vectors = [], [], [], []
    for k in range(CUBES):
        zenith = rng.uniform(0.0, 60.0, (2, ROWS, COLS))
        azimuth = rng.uniform(0.0, 360.0, (2, ROWS, COLS))
        angles = np.stack([zenith[0], azimuth[0], zenith[1], azimuth[1]])
        to_sun = lumaxlike.direction_from_zenith_azimuth(*np.radians(angles[:2]))
        to_sensor = lumaxlike.direction_from_zenith_azimuth(*np.radians(angles[2:]))
        normal = np.broadcast_to([0.0, 0.0, 1.0], to_sun.shape)
        r = np.asarray(lumaxlike.amsa(w, to_sun, to_sensor, normal, TRUTH, backend="numba"))
        cubes.append(write_raster(folder / f"cube{k}.tif", np.moveaxis(r, -1, 0)))
        obs.append(write_raster(folder / f"obs{k}.tif", angles, descriptions=OBS_DESCRIPTIONS))
        refl.append(r)
        vectors.append((to_sun, to_sensor, normal))
    arrays = (
        np.stack(refl, axis=-1),
        *(np.stack([v[j] for v in vectors], axis=-2) for j in range(3)),
    )
    return cubes, obs, arrays


def test_fit_front_ends_are_public_and_documented():
    from lumaxlike._files.fit import fit_file
    from lumaxlike._xarray.fit import fit_dataarray

    assert {"fit_file", "fit_dataarray"} <= set(lumaxlike.__all__)
    assert lumaxlike.fit_file is fit_file and lumaxlike.fit_dataarray is fit_dataarray
    for function in (lumaxlike.fit_file, lumaxlike.fit_dataarray):
        for section in ("Args:", "Returns:", "Raises:"):
            assert section in function.__doc__, (function.__name__, section)


def test_fit_file_and_fit_dataarray_give_fit_s_maps(tmp_path, stack):
    cubes, obs, arrays = stack
    expected = lumaxlike.fit(*arrays, START, free=FREE, solver="numba")
    assert np.all(expected.status == lumaxlike.Status.CONVERGED)

    out = tmp_path / "fit.tif"
    summary = lumaxlike.fit_file(
        cubes, out, geometry=obs, params=START, free=FREE, units="r", solver="numba"
    )
    assert summary.pixels == ROWS * COLS and summary.bands == BANDS
    paths = {"w": out, "b": tmp_path / "fit_b.tif", "c": tmp_path / "fit_c.tif"}
    for name, path in paths.items():
        with rasterio.open(path) as src:
            written = np.moveaxis(src.read(), 0, -1)
        np.testing.assert_allclose(written, expected[name], rtol=0, atol=1e-12)
    assert lumaxlike.read_provenance(out).command.startswith("lumaxlike.fit_file(")

    refl, to_sun, to_sensor, normal = arrays
    dims = ("y", "x", "observation", "xyz")
    data = xr.DataArray(refl, dims=("y", "x", "band", "observation"))
    geometry = xr.Dataset(
        {
            "to_sun": (dims, to_sun),
            "to_sensor": (dims, to_sensor),
            "normal": (dims, normal),
        }
    )
    maps = lumaxlike.fit_dataarray(data, geometry, START, FREE, solver="numba", units="r")
    for name in FREE:
        np.testing.assert_allclose(maps[name].values, expected[name], rtol=0, atol=1e-12)
        np.testing.assert_allclose(maps[f"sigma_{name}"].values, expected.sigma(name), rtol=1e-9)
    np.testing.assert_array_equal(maps.status.values, expected.status)


def test_fit_dataarray_hands_starts_on_to_the_joint_fit(stack, monkeypatch):
    """``starts`` reaches `fit` from `fit_dataarray` (it was once dropped there)."""
    import lumaxlike._inverse.fit.fit as fit_module

    _, _, (refl, to_sun, to_sensor, normal) = stack
    dims = ("y", "x", "observation", "xyz")
    data = xr.DataArray(refl, dims=("y", "x", "band", "observation"))
    vectors = {"to_sun": to_sun, "to_sensor": to_sensor, "normal": normal}
    geometry = xr.Dataset({name: (dims, value) for name, value in vectors.items()})
    seen, fit = [], fit_module.fit

    def recording(*args, **kwargs):
        seen.append(kwargs.get("starts"))
        return fit(*args, **kwargs)

    monkeypatch.setattr(fit_module, "fit", recording)
    maps = lumaxlike.fit_dataarray(
        data, geometry, START, FREE, solver="numba", units="r", shared=("c",), starts=3
    )
    assert seen[0] == 3  # the front end's call (the starts' own calls follow)
    assert np.all(maps.status.values == lumaxlike.Status.CONVERGED)


def test_fit_file_takes_correction_undone_from_its_product_options(tmp_path):
    """A normalised product (M3 L2) is refused unless ``product=ProductOptions(
    correction_undone=True)``, which `fit_file` once ignored."""
    import warnings

    from .mission_products import M3_WAVELENGTHS, write_m3_l2

    warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)  # M3 L2: no CRS
    cubes = []
    for k, value in enumerate((0.1, 0.12)):  # two observations: two products
        (tmp_path / f"p{k}").mkdir()
        cube = np.full((3, 4, len(M3_WAVELENGTHS)), value, np.float32)
        cubes.append(write_m3_l2(tmp_path / f"p{k}", cube)["lbl"])
    observed = [
        {
            role: np.full((3, 4), angle)
            for role, angle in zip(("incidence", "emission", "phase"), angles)
        }
        for angles in ((30.0, 0.0, 30.0), (50.0, 10.0, 45.0))
    ]
    common = dict(geometry=observed, params=START, free=("w",), units="radf")
    with pytest.raises(ValueError, match="normalised"):
        lumaxlike.fit_file(cubes, tmp_path / "refused.tif", solver="numba", **common)
    undone = lumaxlike.ProductOptions(correction_undone=True)
    summary = lumaxlike.fit_file(
        cubes, tmp_path / "w.tif", solver="numba", product=undone, **common
    )
    assert summary.pixels == 12 and summary.status_counts.get("CONVERGED", 0) > 0


def test_a_fit_run_of_multimodal_problems_solved_them():
    """`fit`'s MULTIMODAL keeps the lowest of several converged minima: a run of such
    problems alone exits 0; `sample`'s (chains that missed a mode) still exits 1."""
    from lumaxlike._files.summaries import nothing_converged
    from lumaxlike._operations.fit import FIT
    from lumaxlike._operations.sample import SAMPLE

    counts = {"MULTIMODAL": 12, "MAX_ITER": 1}
    assert nothing_converged(counts, FIT.solved) is None
    assert "MULTIMODAL 12" in nothing_converged(counts, SAMPLE.solved)
