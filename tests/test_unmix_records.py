"""`UnmixSettings` changed no record: a default `unmix_file` and `unmix_dataarray` call
record what they recorded before the unmixing's options were declared once (the strings
below are those of the commit before, on this scene)."""

import numpy as np
import rasterio
import xarray as xr

import lumaxlike

from .test_cli_unmix import DENSITY, GRAIN_SIZE, NAMES, mixture_files
from .test_io import PARAMS, make_scene

PARAMS_TEXT = (
    "HapkeParams(b=0.2, c=0.4, roughness=0.2617993877991494, hs=0.0, bs0=0.0, hc=0.0, "
    "bc0=0.0, porosity_k=1.0, asymmetry=0.0)"
)
# the record's keys of the unmixing's options, as a default call recorded them before
RECORDED = {
    "lumaxlike_max_iter": "50",
    "lumaxlike_tol": "1e-10",
    "lumaxlike_refl_sigma": "null",
    "lumaxlike_solver": '"numba"',
    "lumaxlike_unmix_route": '"one_step"',
    "lumaxlike_unmix_sum_to_one": "true",
    "lumaxlike_unmix_library": "null",
    "lumaxlike_unmix_endmembers": '["olivine", "pyroxene", "plagioclase"]',
}


def endmembers(albedo):
    return lumaxlike.Endmembers(names=NAMES, albedo=albedo, density=DENSITY, grain_size=GRAIN_SIZE)


def test_a_default_unmix_file_call_records_what_it_did_before(tmp_path):
    _, albedo, cube, obs, dtm = mixture_files(tmp_path)
    out = tmp_path / "abund.tif"
    lumaxlike.unmix_file(
        cube, out, geometry=obs, dtm=dtm, endmembers=endmembers(albedo), params=PARAMS,
        solver="numba", units="r",
    )  # fmt: skip
    with rasterio.open(out) as dataset:
        tags = dataset.tags()
    assert {key: tags[key] for key in RECORDED} == RECORDED
    assert tags["lumaxlike_command"] == (
        f"\"lumaxlike.unmix_file('{cube}', '{out}', geometry='{obs}', dtm='{dtm}', "
        f"endmembers=<tuple of shape (3,)>, params={PARAMS_TEXT}, units='r', "
        "route='one_step', sum_to_one=True, refl_sigma=None, solver='numba', max_iter=None, "
        "tol=None, surface='auto')\""
    )


def test_a_default_unmix_dataarray_call_records_what_it_did_before(tmp_path):
    _, albedo, cube, _, _ = mixture_files(tmp_path)
    with rasterio.open(cube) as dataset:
        refl = xr.DataArray(np.moveaxis(dataset.read(), 0, -1), dims=("y", "x", "band"))
    scene = make_scene(rows=6, cols=5, bands=5, seed=3)  # mixture_files' geometry
    names = ("to_sun", "to_sensor", "normal")
    geometry = xr.Dataset({name: (("y", "x", "xyz"), scene[name]) for name in names})
    result = lumaxlike.unmix_dataarray(
        refl, geometry, endmembers(albedo), PARAMS, "numba", units="r"
    )
    assert {key: result.attrs[key] for key in RECORDED} == RECORDED
    assert result.attrs["lumaxlike_command"] == (
        '"lumaxlike.unmix_dataarray(<DataArray of shape (6, 5, 5)>, <Dataset of to_sun, '
        f"to_sensor, normal>, <tuple of shape (3,)>, {PARAMS_TEXT}, 'numba', units='r', "
        "route='one_step', sum_to_one=True, spectral_dim=None, refl_sigma=None, "
        'max_iter=None, tol=None, num_threads=None)"'
    )
