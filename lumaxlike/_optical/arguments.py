"""The equivalent slab's arguments checked and broadcast (`slab_arguments`), below the
optical constants' types so that `OpticalConstants.from_reflectance` and `slab_albedo` both
use them."""

import numpy as np

from .._validation import wavelengths_um

__all__ = ["check_choice", "checked", "slab_arguments"]


def check_choice(argument: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{argument} must be one of {choices}, got {value!r}")


def checked(name: str, value, *, low: float, strict: bool) -> np.ndarray:
    array = np.asarray(value, dtype=np.float64)
    bad = ~np.isfinite(array) | ((array <= low) if strict else (array < low))
    if np.any(bad):
        relation = ">" if strict else ">="
        raise ValueError(f"{name} must be finite and {relation} {low:g}, got {array[bad][:3]}")
    return array


def _iron(wavelength, fractions, host_density, iron):
    """(n_iron, k_iron, density) at `wavelength` (``iron`` an `OpticalConstants`); zeros
    (and density 1) where no iron fraction is > 0, where they do not count."""
    if not any(np.any(fraction > 0) for fraction in fractions):
        density = np.asarray(1.0 if host_density is None else host_density, dtype=np.float64)
        return np.zeros(()), np.zeros(()), density
    if host_density is None:
        raise ValueError("host_density [g/cm^3] is needed where an iron fraction is > 0")
    density = checked("host_density", host_density, low=0.0, strict=True)
    if iron is None:
        raise ValueError("iron's optical constants are needed where an iron fraction is > 0")
    n_iron, k_iron = iron.interpolate(wavelength)
    return n_iron, k_iron, density


def slab_arguments(
    n,
    k,
    wavelength,
    grain_size,
    internal_scattering,
    npfe_fraction,
    host_density,
    iron,
    mpfe_fraction=0.0,
    mpfe_diameter=None,
) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The ten broadcast float64 arrays of `slab_equations.slab_albedo`'s arguments,
    checked (ValueError naming the argument), and d extra_alpha / d mpfe_fraction (the
    microphase iron's absorption per unit mass fraction [1/um]; zeros without it). Iron's
    n, k are interpolated at `wavelength` where an iron fraction is > 0."""
    n = checked("n", n, low=1.0, strict=False)
    k = checked("k", k, low=0.0, strict=False)
    wavelength = wavelengths_um("wavelength", wavelength)
    grain_size = checked("grain_size", grain_size, low=0.0, strict=True)
    scattering = checked("internal_scattering", internal_scattering, low=0.0, strict=False)
    npfe = checked("npfe_fraction", npfe_fraction, low=0.0, strict=False)
    mpfe = checked("mpfe_fraction", mpfe_fraction, low=0.0, strict=False)
    for name, fraction in (("npfe_fraction", npfe), ("mpfe_fraction", mpfe)):
        if np.any(fraction > 1):
            raise ValueError(f"{name} is a mass fraction: at most 1")
    n_iron, k_iron, density = _iron(wavelength, (npfe, mpfe), host_density, iron)
    values = (n, k, wavelength, grain_size, scattering, npfe, n_iron, k_iron, density, mpfe)
    shape = np.broadcast_shapes(*(value.shape for value in values))
    n, k, wavelength, grain_size, scattering, npfe, n_iron, k_iron, density, mpfe = (
        np.broadcast_to(value, shape) for value in values
    )
    per_fraction = np.zeros(shape)
    if np.any(mpfe > 0):
        if mpfe_diameter is None:
            raise ValueError("mpfe_diameter [um] is needed where mpfe_fraction > 0")
        diameter = checked("mpfe_diameter", mpfe_diameter, low=0.0, strict=True)
        from .microphase import microphase_absorption_coefficient

        per_fraction = microphase_absorption_coefficient(
            n, wavelength, n_iron, k_iron, density, np.broadcast_to(diameter, shape)
        )
    arguments = (n, k, wavelength, grain_size, scattering, npfe, n_iron, k_iron, density)
    return (*arguments, mpfe * per_fraction), per_fraction
