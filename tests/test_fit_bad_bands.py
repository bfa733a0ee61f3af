"""`fit_file` of a stack whose cubes carry a bad-band list (ENVI ``bbl``, as every M3 L2
product does): joint (shared, prior) and regional fits leave the bad bands out, as
per-band fits do, and fit the good ones; the bad bands' maps are NaN with status
BAD_BAND."""

import numpy as np
import pytest
import rasterio

import lumaxlike
from lumaxlike import Status
from lumaxlike._io import read_cube, result_paths

from .helpers import write_angle_stack
from .test_io import write_raster

TRUTH = lumaxlike.HapkeParams(b=0.25, c=0.5)
START = lumaxlike.HapkeParams(b=0.3, c=0.4)
ROWS, COLS, BANDS, CUBES = 2, 3, 3, 6
BAD = 1  # the band the bad-band list marks: bbl = {1, 0, 1}
GOOD = [0, 2]
FREE = ("w", "b", "c")


@pytest.fixture(scope="module")
def bbl_stack(tmp_path_factory):
    """6 cubes of r [1/sr] on a 2 x 3 grid, 3 bands of which the second is marked bad and
    holds values no model explains; returns the paths and the stacked arrays of `fit`."""
    folder = tmp_path_factory.mktemp("bbl")
    rng = np.random.default_rng(7)
    w = rng.uniform(0.2, 0.9, (ROWS, COLS, BANDS))

    def mark_bad(k, r, path):
        if path is None:
            r[..., BAD] = -5.0  # garbage, as a bad band may hold
        else:
            with rasterio.open(path, "r+") as dst:
                dst.update_tags(ns="ENVI", bbl="{1, 0, 1}")

    return write_angle_stack(folder, w, TRUTH, CUBES, rng, mark_bad)


def check_maps(out, fields, expected):
    """The good bands' maps equal `expected` (fit of the good bands alone); the bad
    band's are NaN, 0 iterations and observations, status BAD_BAND."""
    paths = result_paths(out, fields)
    for name in fields:
        found = read_cube(paths[name])[0]
        assert found.shape == (ROWS, COLS, BANDS), name
        want = expected[name]
        if want.ndim == 2:  # a per-pixel map: repeated in every band layer
            want = np.repeat(want[..., None], len(GOOD), axis=-1)
        # the same computation on the same values: equal to the bit
        np.testing.assert_array_equal(found[..., GOOD], want, err_msg=name)
        if name == "status":
            assert np.all(found[..., BAD] == Status.BAD_BAND)
        elif name in ("iterations", "observations"):
            assert np.all(found[..., BAD] == 0), name
        else:
            assert np.all(np.isnan(found[..., BAD])), name


def expected_fields(result, fields):
    values = {"status": result.status, "iterations": result.iterations, "cost": result.cost}
    values["observations"] = result.observations
    for name in FREE:
        values[name] = result[name]
        values[f"sigma_{name}"] = result.sigma(name)
        values[f"dfs_{name}"] = result.dfs[name]
    return {name: np.asarray(values[name]) for name in fields}


JOINT_FIELDS = (
    *FREE,
    *(f"sigma_{n}" for n in FREE),
    *(f"dfs_{n}" for n in FREE),
    "status",
    "iterations",
    "cost",
    "observations",
)


def test_joint_fit_of_a_stack_with_bad_bands_fits_the_good_ones(tmp_path, bbl_stack):
    cubes, obs, arrays = bbl_stack
    out = tmp_path / "joint.tif"
    options = {"shared": ("c",), "prior": {"b": (0.3, 0.1)}}
    summary = lumaxlike.fit_file(
        cubes,
        out,
        geometry=obs,
        params=START,
        free=FREE,
        units="r",
        refl_sigma=1e-4,
        solver="numba",
        **options,
    )
    refl, *geometry = arrays
    expected = lumaxlike.fit(
        refl[..., GOOD, :],
        *geometry,
        START,
        free=FREE,
        refl_sigma=1e-4,
        solver="numba",
        **options,
    )
    assert np.all(expected.status == Status.CONVERGED)
    assert summary.status_counts["CONVERGED"] == ROWS * COLS * len(GOOD)
    assert summary.status_counts["BAD_BAND"] == ROWS * COLS
    check_maps(out, JOINT_FIELDS, expected_fields(expected, JOINT_FIELDS))


def test_regional_fit_of_a_stack_with_bad_bands_fits_the_good_ones(tmp_path, bbl_stack):
    cubes, obs, arrays = bbl_stack
    regions = np.array([[0, 0, 1], [0, 1, 1]], np.int16)
    labels = write_raster(tmp_path / "tiles.tif", regions[None])
    out = tmp_path / "regional.tif"
    summary = lumaxlike.fit_file(
        cubes,
        out,
        geometry=obs,
        params=START,
        free=FREE,
        units="r",
        refl_sigma=1e-4,
        solver="numba",
        regions=labels,
        regional=("c",),
        run=lumaxlike.RunOptions(chunk_rows=1),
    )
    refl, *geometry = arrays
    expected = lumaxlike.fit(
        refl[..., GOOD, :],
        *geometry,
        START,
        free=FREE,
        refl_sigma=1e-4,
        solver="numba",
        regions=regions,
        regional=("c",),
    )
    assert np.all(expected.region_status == Status.CONVERGED)
    assert summary.status_counts["CONVERGED"] == ROWS * COLS * len(GOOD)
    assert summary.status_counts["BAD_BAND"] == ROWS * COLS
    check_maps(out, JOINT_FIELDS, expected_fields(expected, JOINT_FIELDS))
