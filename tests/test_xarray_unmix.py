"""`refl.hapke.unmix`: mass fractions of a dask-chunked cube equal the in-memory `unmix`."""

import numpy as np
import xarray as xr

import lumaxlike
from lumaxlike._unmix.mixing import cross_section_fractions, cross_section_per_mass, mixed_albedo

from .test_io import PARAMS, make_scene


def test_dask_chunked_unmix_equals_in_memory_unmix():
    scene = make_scene(rows=6, cols=5, bands=6, seed=5)
    rng = np.random.default_rng(6)
    endmembers = lumaxlike.Endmembers(
        names=("a", "b", "c"),
        albedo=rng.uniform(0.15, 0.9, (3, 6)),
        density=(3.3, 3.0, 2.7),
        grain_size=(50.0, 70.0, 30.0),
    )
    mass = rng.dirichlet(np.ones(3), (6, 5))
    per_mass = cross_section_per_mass(
        endmembers.density, endmembers.grain_size, endmembers.extinction_efficiency
    )
    w = mixed_albedo(cross_section_fractions(mass, per_mass), endmembers.albedo)
    geometry = (scene["to_sun"], scene["to_sensor"], scene["normal"])
    r = np.asarray(lumaxlike.amsa(w, *geometry, PARAMS, backend="numba"))
    r[0, 0, 2] = np.nan  # one unsolvable pixel: a status, NaN fractions
    expected = lumaxlike.unmix(r, *geometry, endmembers, PARAMS, "numba")

    refl = xr.DataArray(
        np.moveaxis(r, -1, 0), dims=("band", "y", "x"), attrs={"title": "mixture"}
    ).chunk({"y": 4, "x": 3})
    vectors = xr.Dataset(
        {
            name: (("y", "x", "xyz"), value)
            for name, value in zip(("to_sun", "to_sensor", "normal"), geometry)
        }
    )
    result = refl.hapke.unmix(vectors, endmembers, PARAMS, "numba", units="r")
    assert result["fractions"].chunks is not None  # lazy until computed
    assert result["fractions"].dims == ("y", "x", "endmember") and result["status"].dims == (
        "y",
        "x",
    )
    assert (
        list(result["endmember"].values) == ["a", "b", "c"] and result.attrs["title"] == "mixture"
    )
    computed = result.compute()
    np.testing.assert_array_equal(computed["status"].values, expected.status)
    np.testing.assert_array_equal(computed["iterations"].values, expected.iterations)
    np.testing.assert_allclose(computed["fractions"].values, expected.fractions, rtol=0, atol=1e-12)
    sigma = np.sqrt(np.diagonal(expected.covariance, axis1=-2, axis2=-1))
    np.testing.assert_allclose(computed["sigma"].values, sigma, rtol=1e-9, atol=1e-15)
    valid = expected.status == lumaxlike.Status.CONVERGED
    assert valid.sum() == 29 and expected.status[0, 0] == lumaxlike.Status.NONFINITE_INPUT
    np.testing.assert_allclose(computed["fractions"].values[valid], mass[valid], atol=1e-6, rtol=0)


def test_bands_are_matched_by_wavelength_or_refused():
    """A cube with its bands in reverse order was unmixed against the library in file order
    (error 0.998): bands are matched by the wavelength coordinate, in any order and unit."""
    import pytest

    scene = make_scene(rows=2, cols=3, bands=4, seed=7)
    rng = np.random.default_rng(8)
    wavelengths = np.array([0.5, 0.8, 1.2, 2.0])
    endmembers = lumaxlike.Endmembers(
        names=("a", "b"),
        albedo=rng.uniform(0.15, 0.9, (2, 4)),
        density=(3.3, 2.7),
        grain_size=(50.0, 30.0),
        wavelengths=wavelengths,
    )
    mass = rng.dirichlet(np.ones(2), (2, 3))
    per_mass = cross_section_per_mass(
        endmembers.density, endmembers.grain_size, endmembers.extinction_efficiency
    )
    w = mixed_albedo(cross_section_fractions(mass, per_mass), endmembers.albedo)
    geometry = (scene["to_sun"], scene["to_sensor"], scene["normal"])
    r = np.asarray(lumaxlike.amsa(w, *geometry, PARAMS, backend="numba"))
    vectors = xr.Dataset(
        {
            name: (("y", "x", "xyz"), value)
            for name, value in zip(("to_sun", "to_sensor", "normal"), geometry)
        }
    )
    reverse = r[..., ::-1]
    for coord, attrs in (
        (wavelengths[::-1], {"units": "um"}),
        (1e3 * wavelengths[::-1], {"units": "nm"}),
        (1e3 * wavelengths[::-1], {}),
    ):
        refl = xr.DataArray(
            reverse,
            dims=("y", "x", "wavelength"),
            coords={"wavelength": ("wavelength", coord, attrs)},
        )
        result = refl.hapke.unmix(vectors, endmembers, PARAMS, "numba", units="r")
        np.testing.assert_allclose(result["fractions"].values, mass, atol=1e-6, rtol=0)
    assert "remainder" not in result
    loose = refl.hapke.unmix(
        vectors, endmembers, PARAMS, "numba", units="r", sum_to_one=False
    )  # once dropped
    np.testing.assert_allclose(
        loose["remainder"].values, 0.0, atol=1e-6
    )  # no dark part in the mixture
    assert loose.attrs["lumaxlike_unmix_sum_to_one"] == "false"
    # and in the Python function, with wavelengths=
    direct = lumaxlike.unmix(
        reverse, *geometry, endmembers, PARAMS, "numba", wavelengths=wavelengths[::-1]
    )
    np.testing.assert_allclose(direct.fractions, mass, atol=1e-6, rtol=0)
    other = xr.DataArray(
        r, dims=("y", "x", "wavelength"), coords={"wavelength": [0.5, 0.8, 1.2, 2.1]}
    )
    with pytest.raises(
        ValueError, match=r"wavelength coordinate's 4 band centres.*first differing.*2\.1 um"
    ):
        other.hapke.unmix(vectors, endmembers, PARAMS, "numba", units="r")
    with pytest.raises(
        ValueError, match=r"refl's 4 band centres \(0\.5-2\.1 um\) are not the endmembers'"
    ):
        lumaxlike.unmix(r, *geometry, endmembers, PARAMS, "numba", wavelengths=[0.5, 0.8, 1.2, 2.1])
