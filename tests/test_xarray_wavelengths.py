"""One reading of a DataArray's band centres for every xarray front end that needs them
(`_xarray/wavelengths.py`): remove_thermal, spectral_parameters and unmix read the
``wavelength`` coordinate (or a float coordinate of the spectral dim) the same way,
nm or um by its ``units`` attr, nm where it has none and every value is above 100."""

import numpy as np
import pytest
import xarray as xr

import lumaxlike
from lumaxlike._xarray.wavelengths import band_centres_um, coordinate_centres_um

BANDS_UM = np.array([0.75, 1.0, 1.25, 1.5])


def spectra_with(values, attrs=None, dim="band", name="wavelength"):
    coords = {name: (dim, values, attrs or {})}
    return xr.DataArray(np.full((2, values.size), 0.1), dims=("pixel", dim), coords=coords)


@pytest.mark.parametrize(
    "values, attrs",
    [
        (BANDS_UM, {"units": "um"}),
        (BANDS_UM, {"units": "Micrometers"}),
        (BANDS_UM * 1000, {"units": "nm"}),
        (BANDS_UM * 1000, {"units": "nanometers"}),
        (BANDS_UM, {}),  # no units: micrometres below 100
        (BANDS_UM * 1000, {}),  # no units: nanometres above 100
    ],
)
def test_units_attr_or_magnitude_give_micrometres(values, attrs):
    data = spectra_with(values, attrs)
    np.testing.assert_allclose(band_centres_um(data, "band", None, "refl"), BANDS_UM, rtol=1e-15)
    # the spectral dim's own float coordinate when there is no 'wavelength' coordinate
    own = spectra_with(values, attrs, dim="wavelength")
    np.testing.assert_allclose(coordinate_centres_um(own, "wavelength", "refl"), BANDS_UM)


def test_what_is_not_band_centres_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"refl's 'wavelength' coordinate has units 'cm-1'"):
        band_centres_um(spectra_with(BANDS_UM, {"units": "cm-1"}), "band", None, "refl")
    # a stated unit its values cannot be in (micrometres labelled nm): refused, not read
    # as 0.75-1.5 nm
    with pytest.raises(ValueError, match=r"refl's 'wavelength' coordinate gives .* look like mic"):
        band_centres_um(spectra_with(BANDS_UM, {"units": "nm"}), "band", None, "refl")
    with pytest.raises(ValueError, match=r"refl's 'wavelength' coordinate must be finite"):
        band_centres_um(spectra_with(np.array([0.75, np.nan, 1.25, 1.5])), "band", None, "refl")
    # rioxarray's band numbers (integers) are no wavelengths: none found, and said so
    numbers = spectra_with(np.arange(1, 5), name="band")
    assert coordinate_centres_um(numbers, "band", "refl") is None
    with pytest.raises(ValueError, match=r"wavelengths are needed: refl has no 'wavelength'"):
        band_centres_um(numbers, "band", None, "refl")
    with pytest.raises(ValueError, match=r"wavelengths must hold one centre \[um\] per band"):
        band_centres_um(numbers, "band", BANDS_UM[:3], "refl")
    with pytest.raises(ValueError, match=r"^wavelengths must be in micrometres"):
        band_centres_um(numbers, "band", BANDS_UM * 1000, "refl")


def test_spectral_parameters_reads_a_coordinate_in_nanometres_without_units():
    """Before: a units-less coordinate in nm was read as um by spectral_parameters (and
    refused), while remove_thermal read it as nm and unmix tried both."""
    x = np.round(np.arange(0.70, 1.8001, 0.02), 6)
    depth = np.array([[0.05], [0.08]])  # two pixels with a band at 1 um
    spectra = 0.2 - depth * np.exp(-(((x - 1.0) / 0.15) ** 2))
    expected = lumaxlike.spectral_parameters(spectra, x, "BAND1_DEPTH", quantity="w")["BAND1_DEPTH"]
    for values, attrs in ((x, {}), (x * 1000, {}), (x * 1000, {"units": "nm"})):
        coords = {"wavelength": ("band", values, attrs)}
        data = xr.DataArray(spectra, dims=("pixel", "band"), coords=coords)
        # one product (before: refused by apply_ufunc, which takes one output as an
        # array, in memory and on dask chunks)
        for cube in (data, data.chunk({"pixel": 1})):
            got = cube.hapke.spectral_parameters(["BAND1_DEPTH"], quantity="w")
            np.testing.assert_allclose(got["BAND1_DEPTH"].values, expected, rtol=1e-12)
