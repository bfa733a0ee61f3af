"""The shape annotations of the public API are true, checked at test time as optimistix
checks its own: each annotated public function, wrapped in jaxtyping's runtime check
(with beartype), takes the shapes its documentation promises and refuses arrays whose
shapes contradict one another before any work. A public function that gains jaxtyping
annotations must be listed here (the last test finds them)."""

import inspect

import numpy as np
import pytest
from beartype import beartype
from jaxtyping import TypeCheckError, jaxtyped

import lumaxlike

WAVELENGTHS = np.round(np.arange(0.40, 2.61, 0.01), 2)  # [um], M3-like coverage


def checked(function):
    return jaxtyped(typechecker=beartype)(function)


def spectra(shape=(2, 3)):
    rng = np.random.default_rng(0)
    return rng.uniform(0.1, 0.3, shape + (WAVELENGTHS.size,))


def test_continuum_removed_keeps_its_shapes():
    values = spectra()
    removed = checked(lumaxlike.continuum_removed)(values, WAVELENGTHS)
    assert removed.shape == values.shape
    with pytest.raises(TypeCheckError):
        checked(lumaxlike.continuum_removed)(values, WAVELENGTHS[:-1])


def test_band_parameters_and_spectral_parameters_take_pixels_by_bands():
    values = spectra()
    result = checked(lumaxlike.band_parameters)(values, WAVELENGTHS, band=(0.75, 1.6))
    assert np.shape(result.centre) == values.shape[:-1]
    maps = checked(lumaxlike.spectral_parameters)(
        values, WAVELENGTHS, ("FeO", "OMAT"), quantity="reflectance"
    )
    assert all(np.shape(maps[name]) == values.shape[:-1] for name in ("FeO", "OMAT"))
    with pytest.raises(TypeCheckError):
        checked(lumaxlike.spectral_parameters)(
            values, WAVELENGTHS[1:], ("FeO",), quantity="reflectance"
        )


def test_remove_thermal_refuses_geometry_of_other_pixels():
    refl = spectra((4,))
    to_sun = np.tile([0.0, 0.5, np.sqrt(0.75)], (3, 1))  # three pixels, not four
    to_sensor = normal = np.tile([0.0, 0.0, 1.0], (4, 1))
    with pytest.raises(TypeCheckError):
        checked(lumaxlike.remove_thermal)(
            refl,
            to_sun,
            to_sensor,
            normal,
            WAVELENGTHS,
            lumaxlike.HapkeParams(b=0.2, c=0.4),
            solar_spectrum=np.ones(WAVELENGTHS.size),
        )


def test_slab_albedo_broadcasts_its_inputs():
    w = checked(lumaxlike.slab_albedo)(1.7, np.full((2, 5), 1e-4), WAVELENGTHS[:5], 20.0)
    assert w.shape == (2, 5) and np.all((0 < w) & (w < 1))


def test_available_spectral_products_takes_one_wavelength_per_band():
    names = checked(lumaxlike.available_spectral_products)(WAVELENGTHS)
    assert {"FeO", "OMAT", "BDI1000"} <= set(names)
    with pytest.raises(TypeCheckError):
        checked(lumaxlike.available_spectral_products)(WAVELENGTHS[:, None])


CHECKED = {
    "available_spectral_products",
    "continuum_removed",
    "band_parameters",
    "spectral_parameters",
    "remove_thermal",
    "slab_albedo",
}


def test_every_annotated_public_function_is_checked_here():
    annotated = set()
    for name in lumaxlike.__all__:
        value = getattr(lumaxlike, name)
        if not inspect.isfunction(value):
            continue
        hints = " ".join(map(str, inspect.get_annotations(value).values()))
        if any(kind in hints for kind in ("Float[", "Int[", "Bool[", "ArrayLike", "Shaped[")):
            annotated.add(name)
    assert annotated == CHECKED
