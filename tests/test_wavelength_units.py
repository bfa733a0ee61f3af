"""One rule for wavelengths everywhere (issue 55, section 7 item 5): every function that
takes wavelengths reads them in micrometres and refuses, naming the argument, values that
are not finite, not positive, or above 100 um (nanometres given by mistake), through the
one shared check `_validation.wavelengths_um`."""

import numpy as np
import pytest

import lumaxlike
from lumaxlike._validation import MAX_WAVELENGTH, wavelengths_um

BANDS_UM = np.array([0.75, 1.0, 1.25, 1.5, 1.75])
FLAT = np.full(BANDS_UM.size, 0.05)
GEOMETRY = (np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, 1.0]))


def _spectral_parameters(wavelengths):
    return lumaxlike.spectral_parameters(FLAT, wavelengths, "FeO", quantity="w")


def _slab_albedo(wavelengths):
    return lumaxlike.slab_albedo(1.7, 1e-4, wavelengths, 50.0)


def _from_optical_constants(wavelengths):
    olivine = lumaxlike.optical_constants("olivine")
    return lumaxlike.Endmembers.from_optical_constants([olivine], 50.0, wavelengths)


def _remove_thermal(wavelengths):
    return lumaxlike.remove_thermal(
        FLAT,
        *GEOMETRY,
        wavelengths,
        lumaxlike.HapkeParams(b=0.25, c=0.3),
        solar_spectrum=np.ones(BANDS_UM.size),
        method="given",
        temperature=300.0,
    )


FUNCTIONS = {
    "spectral_parameters": (_spectral_parameters, "wavelengths"),
    "slab_albedo": (_slab_albedo, "wavelength"),
    "Endmembers.from_optical_constants": (_from_optical_constants, "wavelengths"),
    "remove_thermal": (_remove_thermal, "wavelengths"),
}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_nanometres_are_refused_naming_the_argument(function):
    """Before: slab_albedo, from_optical_constants and remove_thermal took 750-1750 "um"
    (w 0.997, emission ~1e-9) while spectral_parameters refused them."""
    call, argument = FUNCTIONS[function]
    with pytest.raises(ValueError, match=rf"^{argument} must be in micrometres.*nanometres"):
        call(BANDS_UM * 1000.0)
    for bad in (np.nan, 0.0, -1.0):
        wavelengths = BANDS_UM.copy()
        wavelengths[0] = bad
        with pytest.raises(ValueError, match=rf"^{argument} must be"):
            call(wavelengths)


def test_the_shared_check_bounds_and_passes_micrometres_through():
    values = np.array([[0.4, 2.5], [5.0, MAX_WAVELENGTH]])
    checked = wavelengths_um("x", values)
    assert checked.dtype == np.float64 and checked.shape == values.shape
    np.testing.assert_array_equal(checked, values)
    with pytest.raises(ValueError, match="^x must be in micrometres"):
        wavelengths_um("x", np.nextafter(MAX_WAVELENGTH, np.inf))
    with pytest.raises(ValueError, match="^x must be wavelengths"):
        wavelengths_um("x", "0.75")
    assert _slab_albedo(BANDS_UM).shape == BANDS_UM.shape  # micrometres still pass
