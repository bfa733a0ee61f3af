"""The front ends of `unmix(..., free=...)`: `unmix_file`, `unmix_dataarray` and
``lumaxlike unmix --optical-constants ... --free ...`` give the in-memory unmixing's maps
on the same cube; multiple starts (``starts=``)."""

import numpy as np
import pytest
import rasterio

import lumaxlike
from lumaxlike import Endmembers, Status, optical_constants

from .helpers import SOLVERS
from .test_cli import PARAM_FLAGS, run
from .test_io import OBS_DESCRIPTIONS, PARAMS, make_scene, write_raster
from .test_resume_inputs import interrupt

WAVELENGTHS_NM = np.linspace(500.0, 1800.0, 10)
NAMES = ("olivine", "orthopyroxene")
GRAIN = (40.0, 60.0)  # um, the starts
BOUNDS = (5.0, 500.0)  # um
FREE = ("grain_size", "npfe")


def _endmembers(grain=GRAIN):
    return Endmembers.from_optical_constants(
        [optical_constants(name) for name in NAMES],
        grain,
        WAVELENGTHS_NM / 1000.0,
        names=NAMES,
        npfe_fraction=0.001,
        grain_size_bounds=BOUNDS,
    )


@pytest.fixture(scope="module")
def optical_cube(tmp_path_factory):
    """A 4 x 3 cube of mixtures (package's slab model and AMSA: the front ends are compared
    with the in-memory `unmix`, not with the truth), its OBS and DTM files."""
    folder = tmp_path_factory.mktemp("optical_cube")
    scene = make_scene(rows=4, cols=3, bands=1, seed=11)
    rng = np.random.default_rng(12)
    shape = scene["dtm"].shape
    constants = [optical_constants(name) for name in NAMES]
    um = WAVELENGTHS_NM / 1000.0
    nk = [c.interpolate(um) for c in constants]
    density = np.array([c.density for c in constants])
    grain = np.array(GRAIN) * rng.uniform(0.8, 1.25, (*shape, 2))
    npfe = rng.uniform(0.0005, 0.003, shape)
    w = np.stack(
        [
            lumaxlike.slab_albedo(
                nk[j][0],
                nk[j][1],
                um,
                grain[..., j, None],
                npfe_fraction=npfe[..., None],
                host_density=density[j],
            )
            for j in range(2)
        ],
        axis=-2,
    )
    mass = rng.dirichlet([3.0, 3.0], shape)
    per = mass / (density * grain)
    f = per / per.sum(axis=-1, keepdims=True)
    w_mix = np.einsum("...j,...jk->...k", f, w)
    r = np.asarray(
        lumaxlike.amsa(
            w_mix, scene["to_sun"], scene["to_sensor"], scene["normal"], PARAMS, backend="numba"
        )
    )
    cube = write_raster(
        folder / "cube.tif", np.moveaxis(r, -1, 0), envi_wavelengths=list(WAVELENGTHS_NM)
    )
    obs = write_raster(folder / "obs.tif", scene["angles"], descriptions=OBS_DESCRIPTIONS)
    dtm = write_raster(folder / "dtm.tif", scene["dtm"][None])
    return scene, r, (mass, grain, npfe), (cube, obs, dtm)


def _bands(path):
    with rasterio.open(path) as dataset:
        return np.moveaxis(dataset.read(), 0, -1), dataset.descriptions


@pytest.mark.parametrize(
    "solver", [pytest.param(s, marks=pytest.mark.slow) if s == "jax" else s for s in SOLVERS]
)
def test_unmix_file_with_free_parameters_matches_unmix(optical_cube, tmp_path, monkeypatch, solver):
    """The file maps (fractions, grain sizes [um], npFe0 [wt %], their sigma and flags) of
    a run stopped after one block and resumed are `unmix`'s on the same cube and geometry;
    the optical settings are recorded."""
    scene, r, (mass, grain, npfe), (cube, obs, dtm) = optical_cube
    endmembers = _endmembers()
    geometry = (scene["to_sun"], scene["to_sensor"], scene["normal"])
    expected = lumaxlike.unmix(r, *geometry, endmembers, PARAMS, solver, free=FREE)
    assert np.all(expected.status == Status.CONVERGED)
    np.testing.assert_allclose(expected.grain_size, grain, rtol=1e-5)  # the scene is solved
    out = tmp_path / "maps.tif"
    kwargs = dict(geometry=obs, dtm=dtm, endmembers=endmembers, params=PARAMS, units="r")
    kwargs.update(solver=solver, free=FREE)
    blocks = lumaxlike.RunOptions(chunk_rows=1)
    interrupt(monkeypatch, lambda: lumaxlike.unmix_file(cube, out, run=blocks, **kwargs))
    resumed = lumaxlike.RunOptions(chunk_rows=1, resume=True)
    summary = lumaxlike.unmix_file(cube, out, run=resumed, **kwargs)
    assert summary.resumed == "1 of 4 blocks from an interrupted run"
    fractions, names = _bands(out)
    assert names == NAMES
    np.testing.assert_allclose(fractions, expected.fractions, rtol=1e-9, atol=1e-12)
    grain_map, _ = _bands(tmp_path / "maps_grain_size.tif")
    np.testing.assert_allclose(grain_map, expected.grain_size, rtol=1e-9)
    npfe_map, _ = _bands(tmp_path / "maps_npfe.tif")
    np.testing.assert_allclose(npfe_map[..., 0], 100 * expected.npfe_fraction, rtol=1e-8)
    sd = np.sqrt(np.diagonal(expected.parameter_covariance, axis1=-2, axis2=-1))
    grain_sigma, _ = _bands(tmp_path / "maps_grain_size_sigma.tif")
    np.testing.assert_allclose(grain_sigma, sd[..., 2:4], rtol=1e-6)
    npfe_sigma, _ = _bands(tmp_path / "maps_npfe_sigma.tif")
    np.testing.assert_allclose(npfe_sigma[..., 0], 100 * sd[..., 4], rtol=1e-6)
    for name in ("grain_size_at_bound", "npfe_at_bound"):
        flags, _ = _bands(tmp_path / f"maps_{name}.tif")
        assert flags.dtype == np.int8 and not np.any(flags)
    record = lumaxlike.read_provenance(out).unmix_settings
    assert record["free"] == list(FREE)
    assert record["optical"]["grain_size_bounds"] == [list(BOUNDS)] * 2
    assert record["optical"]["npfe_fraction"] == 0.001


def test_unmix_dataarray_with_free_parameters_matches_unmix(optical_cube):
    """`unmix_dataarray(..., free=...)`: the same values as `unmix`, grain sizes per
    endmember and npFe0 in wt %."""
    import xarray as xr

    scene, r, _, _ = optical_cube
    endmembers = _endmembers()
    geometry = (scene["to_sun"], scene["to_sensor"], scene["normal"])
    expected = lumaxlike.unmix(r, *geometry, endmembers, PARAMS, "numba", free=FREE)
    refl = xr.DataArray(
        r, dims=("y", "x", "band"), coords={"wavelength": ("band", WAVELENGTHS_NM, {"units": "nm"})}
    )
    vectors = xr.Dataset(
        {
            name: (("y", "x", "vector"), value)
            for name, value in zip(("to_sun", "to_sensor", "normal"), geometry)
        }
    )
    result = lumaxlike.unmix_dataarray(
        refl, vectors, endmembers, PARAMS, "numba", units="r", free=FREE
    )
    np.testing.assert_allclose(result["fractions"].values, expected.fractions, rtol=1e-12)
    assert result["grain_size"].dims == ("y", "x", "endmember")
    np.testing.assert_allclose(result["grain_size"].values, expected.grain_size, rtol=1e-12)
    np.testing.assert_allclose(result["npfe"].values, 100 * expected.npfe_fraction, rtol=1e-12)
    assert result["npfe"].attrs["units"] == "percent"
    assert result["npfe_at_bound"].dtype == np.int8


def test_unmix_cli_with_optical_constants_and_free_parameters(optical_cube, tmp_path, capsys):
    """``lumaxlike unmix --optical-constants olivine:40,orthopyroxene:60 --free
    grain_size,npfe`` writes `unmix_file`'s maps; bad --optical-constants exit 2."""
    scene, r, _, (cube, obs, dtm) = optical_cube
    geometry = (scene["to_sun"], scene["to_sensor"], scene["normal"])
    expected = lumaxlike.unmix(r, *geometry, _endmembers(), PARAMS, "numba", free=FREE)
    common = ["unmix", cube, "--geometry", obs, "--dtm", dtm, "--units", "r", *PARAM_FLAGS]
    optical = [
        "--optical-constants",
        "olivine:40,orthopyroxene:60",
        "--free",
        "grain_size,npfe",
        "--grain-size-bounds",
        "5,500",
        "--npfe",
        "0.1",
        "--solver",
        "numba",
    ]
    out = tmp_path / "cli.tif"
    code, err = run(capsys, *common, *optical, "--out", out)
    assert code == 0, err
    fractions, names = _bands(out)
    assert names == NAMES
    np.testing.assert_allclose(fractions, expected.fractions, rtol=1e-9, atol=1e-12)
    npfe_map, _ = _bands(tmp_path / "cli_npfe.tif")
    np.testing.assert_allclose(npfe_map[..., 0], 100 * expected.npfe_fraction, rtol=1e-8)
    record = lumaxlike.read_provenance(out).unmix_settings
    assert record["library"]["optical_constants"] == ["olivine:40", "orthopyroxene:60"]
    bad = ["--optical-constants", "unobtainium:40", "--out", tmp_path / "bad.tif"]
    code, err = run(capsys, *common, *bad)
    assert code == 2 and "unobtainium" in err
    code, err = run(capsys, "unmix", cube, "--params-from", out, "--out", tmp_path / "re.tif")
    assert code == 2 and "give --optical-constants" in err


def test_optical_endmembers_cut_to_the_bands_solved():
    """`endmembers_on_bands` (bad or thermal bands left out) cuts n, k and iron's too."""
    from lumaxlike._unmix.band_matching import endmembers_on_bands

    endmembers = _endmembers()
    kept = [0, 2, 5, 9]
    cut = endmembers_on_bands(endmembers, kept, 10, WAVELENGTHS_NM / 1000.0, "cube")
    assert cut.optical is not None and endmembers.optical is not None
    np.testing.assert_array_equal(cut.optical.k, endmembers.optical.k[:, kept])
    np.testing.assert_array_equal(cut.optical.iron_n, endmembers.optical.iron_n[kept])
    np.testing.assert_array_equal(cut.albedo, endmembers.albedo[:, kept])
