"""The shape annotations of the public API are true, checked at test time as optimistix
checks its own: each annotated public function, wrapped in jaxtyping's runtime check
(with beartype), takes the shapes its documentation promises and refuses arrays whose
shapes contradict one another before any work. The result types' fields are checked
by building them again through the checked constructor. A public function that gains
jaxtyping annotations must be listed here (the last test finds them)."""

import dataclasses
import inspect

import jax.numpy as jnp
import numpy as np
import pytest
from beartype import beartype
from jaxtyping import TypeCheckError, jaxtyped

import lumaxlike

from .helpers import SOLVERS

WAVELENGTHS = np.round(np.arange(0.40, 2.61, 0.01), 2)  # [um], M3-like coverage


def checked(function):
    """``function`` wrapped in jaxtyping's runtime check (beartype); a result type
    (dataclass) through a checked subclass, as jaxtyped patches a class's ``__init__`` in
    place and the check would then stay on for every later use of the class."""
    if isinstance(function, type):
        namespace = {"__module__": function.__module__, "__qualname__": function.__qualname__}
        subclass = type(function.__name__, (function,), namespace)
        function = dataclasses.dataclass(frozen=True)(subclass)
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


PARAMS = lumaxlike.HapkeParams(b=0.2, c=0.4)


def geometry(pixels=(4,)):
    to_sun = np.broadcast_to([0.0, 0.5, np.sqrt(0.75)], pixels + (3,))
    to_sensor = np.broadcast_to([0.0, 0.0, 1.0], pixels + (3,))
    return to_sun, to_sensor, np.array([0.0, 0.0, 1.0])  # one normal for every pixel


def test_model_maps_pixels_by_bands_to_the_same_shape():
    w = np.random.default_rng(1).uniform(0.2, 0.8, (4, 3))
    for forward in (lumaxlike.amsa, lumaxlike.reflectance):
        r = checked(forward)(w, *geometry(), PARAMS, "numba")
        assert r.shape == w.shape
        with pytest.raises(TypeCheckError):  # geometry of five pixels for four
            checked(forward)(w, *geometry((5,)), PARAMS, "numba")
    h = checked(lumaxlike.h_function)(w, np.full((1, 3), 0.5))
    assert h.shape == w.shape
    with pytest.raises(TypeCheckError):
        checked(lumaxlike.h_function)(w, np.full(4, 0.5))


@pytest.mark.parametrize("solver", SOLVERS)
def test_invert_and_its_result_have_the_annotated_shapes(solver):
    w = np.random.default_rng(2).uniform(0.2, 0.8, (4, 3))
    refl = lumaxlike.amsa(w, *geometry(), PARAMS, "numba")
    result = checked(lumaxlike.invert)(refl, *geometry(), PARAMS, solver)
    checked(lumaxlike.InversionResult)(**vars(result))  # the fields' dtypes and shapes
    with pytest.raises(TypeCheckError):
        checked(lumaxlike.invert)(refl, *geometry((3,)), PARAMS, solver)
    with pytest.raises(TypeCheckError):  # a status map of another shape than w
        checked(lumaxlike.InversionResult)(**{**vars(result), "status": result.status[:2]})


def test_fit_refuses_geometry_of_other_observations():
    """(`FitResult` and `JointFitResult` are checked on the fits of tests/test_fit.py and
    tests/test_fit_joint.py, which pay for their compilation already.)"""
    refl = np.full((2, 3, 5), 0.05)
    to_sun, to_sensor, normal = (
        np.broadcast_to(g, (4, 3)) for g in geometry((4,))[:2] + (np.array([0.0, 0.0, 1.0]),)
    )
    with pytest.raises(TypeCheckError):  # four observations' geometry for five
        checked(lumaxlike.fit)(refl, to_sun, to_sensor, normal, PARAMS, ("w",))


def test_the_albedo_solvers_take_one_chunk_of_pixels_by_bands():
    """The kernels behind `invert` (one chunk): (pixels, bands) and (pixels, 3), checked
    for the numba one on a call, for the JAX one (jitted) on its Python function."""
    from lumaxlike._inverse.albedo.jax_solver import solve_albedo_jax
    from lumaxlike._inverse.albedo.numba_solver import solve_albedo_numba

    w = np.random.default_rng(4).uniform(0.2, 0.8, (4, 3))
    to_sun, to_sensor, normal = (
        np.ascontiguousarray(np.broadcast_to(g, (4, 3))) for g in geometry()
    )
    refl = lumaxlike.amsa(w, to_sun, to_sensor, normal, PARAMS, "numba")
    bounds = (1e-6, 1.0 - 1e-6)
    out = checked(solve_albedo_numba)(
        refl, to_sun, to_sensor, normal, PARAMS, None, 50, 1e-10, bounds
    )
    np.testing.assert_allclose(out["w"], w, rtol=0, atol=1e-8)
    arrays = (refl, to_sun[:3], to_sensor[:3], normal[:3])  # three pixels' geometry for four
    for solver, convert in (
        (solve_albedo_numba, np.asarray),
        (solve_albedo_jax.__wrapped__, jnp.asarray),
    ):
        with pytest.raises(TypeCheckError, match="pixels=4"):
            checked(solver)(*map(convert, arrays), PARAMS, None, 50, 1e-10, bounds)


CHECKED = {
    "available_spectral_products",
    "continuum_removed",
    "band_parameters",
    "spectral_parameters",
    "remove_thermal",
    "slab_albedo",
    "amsa",
    "reflectance",
    "h_function",
    "invert",
    "fit",
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
