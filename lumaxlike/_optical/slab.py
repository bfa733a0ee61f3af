"""`slab_albedo`: w of particles from their optical constants, grain size and nanophase
iron (Hapke's equivalent slab, `_model/slab_equations.py`) on arrays, by NumPy, JAX or
numba; `slab_albedo_and_slopes` adds dw/dD and dw/df of both iron fractions."""

import functools

import numba
import numpy as np
from jaxtyping import ArrayLike, Float

from .._model._backends import SLAB_MEAN_PATHS, SLAB_REFLECTIONS, slab_twins
from .arguments import check_choice, slab_arguments
from .constants import OpticalConstants
from .shipped import optical_constants

__all__ = ["iron_at", "iron_covers", "slab_albedo", "slab_albedo_and_slopes"]

BACKENDS = ("numpy", "jax", "numba")


def _iron_constants(iron, fractions):
    """``iron`` checked, `optical_constants("iron")` where None and an iron fraction is
    given."""
    if iron is None and any(np.any(np.asarray(f) > 0) for f in fractions):
        return optical_constants("iron")
    if iron is not None and not isinstance(iron, OpticalConstants):
        raise ValueError(f"iron must be OpticalConstants or None, got {type(iron).__name__}")
    return iron


def iron_at(wavelength, iron=None) -> tuple[np.ndarray, np.ndarray]:
    """Iron's (n, k) at ``wavelength`` [um]: ``iron`` (an `OpticalConstants`) or, where
    None, the shipped set (`optical_constants("iron")`: Johnson & Christy 1974 joined to
    Ordal et al. 1988, 0.188-286 um); ValueError outside its grid."""
    return _iron_constants(iron, (np.ones(1),)).interpolate(wavelength)


def iron_covers(wavelength, iron=None) -> bool:
    """Whether ``iron`` (or, where None, the shipped set) holds n, k at every
    ``wavelength`` [um] (`iron_at` would not refuse them)."""
    grid = _iron_constants(iron, (np.ones(1),)).wavelength
    wavelength = np.asarray(wavelength, dtype=np.float64)
    return bool(np.all((wavelength >= grid[0]) & (wavelength <= grid[-1])))


@functools.cache
def _numba_kernel(reflections: str, mean_path: str):
    twin = slab_twins("numba", reflections, mean_path).slab_albedo_and_slopes

    @numba.njit(error_model="numpy", cache=False)
    def kernel(a, b, c, d, e, f, g, h, i, x, out):  # the ten arguments, flat; out (4, size)
        for j in range(a.size):
            w, dw_dd, dw_df, dw_da = twin(
                a[j], b[j], c[j], d[j], e[j], f[j], g[j], h[j], i[j], x[j]
            )
            out[0, j] = w
            out[1, j] = dw_dd
            out[2, j] = dw_df
            out[3, j] = dw_da

    return kernel


@functools.cache
def _jax_program(reflections: str, mean_path: str):
    import jax

    return jax.jit(slab_twins("jax", reflections, mean_path).slab_albedo_and_slopes)


def _evaluate(arguments, reflections: str, mean_path: str, backend: str):
    shape = arguments[0].shape
    if backend == "numba":
        flat = [np.ascontiguousarray(value).ravel() for value in arguments]
        out = np.empty((4, flat[0].size))
        _numba_kernel(reflections, mean_path)(*flat, out)
        return tuple(row.reshape(shape) for row in out)
    if backend == "jax":
        import jax

        with jax.enable_x64(True):
            values = _jax_program(reflections, mean_path)(*arguments)
            return tuple(np.asarray(value, dtype=np.float64).reshape(shape) for value in values)
    values = slab_twins("numpy", reflections, mean_path).slab_albedo_and_slopes(*arguments)
    return tuple(np.asarray(value, dtype=np.float64).reshape(shape) for value in values)


def slab_albedo_and_slopes(
    n,
    k,
    wavelength,
    grain_size,
    *,
    internal_scattering=0.0,
    npfe_fraction=0.0,
    host_density=None,
    iron=None,
    mpfe_fraction=0.0,
    mpfe_diameter=None,
    reflections="hapke1993",
    mean_path="hapke2001",
    backend="numpy",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(w, dw/dD [1/um], dw/d npfe_fraction, dw/d mpfe_fraction): `slab_albedo` and its
    analytic derivatives in grain size and in the two iron mass fractions, same
    arguments (for `unmix` with free grain sizes and weathering)."""
    check_choice("reflections", reflections, SLAB_REFLECTIONS)
    check_choice("mean_path", mean_path, SLAB_MEAN_PATHS)
    check_choice("backend", backend, BACKENDS)
    arguments, microphase_per_fraction = slab_arguments(
        n,
        k,
        wavelength,
        grain_size,
        internal_scattering,
        npfe_fraction,
        host_density,
        _iron_constants(iron, (npfe_fraction, mpfe_fraction)),
        mpfe_fraction,
        mpfe_diameter,
    )
    w, dw_dd, dw_df, dw_dalpha = _evaluate(arguments, reflections, mean_path, backend)
    return w, dw_dd, dw_df, dw_dalpha * microphase_per_fraction


def slab_albedo(
    n: ArrayLike,
    k: ArrayLike,
    wavelength: ArrayLike,
    grain_size: ArrayLike,
    *,
    internal_scattering: ArrayLike = 0.0,
    npfe_fraction: ArrayLike = 0.0,
    host_density: ArrayLike | None = None,
    iron: OpticalConstants | None = None,
    mpfe_fraction: ArrayLike = 0.0,
    mpfe_diameter: ArrayLike | None = None,
    reflections: str = "hapke1993",
    mean_path: str = "hapke2001",
    backend: str = "numpy",
) -> Float[np.ndarray, "..."]:
    """Single-scattering albedo w of particles from their optical constants (Hapke's
    equivalent slab; Hapke 2001, JGR 106, 10039), with nanophase iron (npFe0).

    w = S_e + (1 - S_e)(1 - S_i) Theta / (1 - S_i Theta), with alpha = 4 pi k / lambda
    (+ the npFe0 term), the mean path <D> = m(n) D, r_i = (1 - q)/(1 + q),
    q = sqrt(alpha / (alpha + s)), Theta = (r_i + E)/(1 + r_i E),
    E = exp(-sqrt(alpha (alpha + s)) <D>) (Theta = exp(-alpha <D>) at s = 0). Nanophase
    iron adds alpha_npFe = 36 pi z phi / lambda (Lucey & Riner 2011, eq. 1), with z from
    the host's n and iron's n, k and phi = f rho_host / 7.87 its volume fraction.
    Equations and variants: docs/optical-constants.md.

    Args:
        n: the host's real refractive index (>= 1).
        k: the host's imaginary refractive index (>= 0).
        wavelength: wavelength lambda [um].
        grain_size: grain size D [um] (> 0).
        internal_scattering: internal scattering coefficient s [1/um] (>= 0).
        npfe_fraction: nanophase iron mass fraction f (0 to 1; 0.005 is 0.5 wt %).
        host_density: the host's density [g/cm^3]; needed where npfe_fraction > 0.
        iron: iron's optical constants; default `optical_constants("iron")` (Johnson &
            Christy 1974 at 0.188-1.937 um joined to Ordal et al. 1988 at 2-286 um). Read
            only where an iron fraction is > 0; a wavelength outside its grid is then
            refused.
        mpfe_fraction: microphase (Britt-Pieters) iron mass fraction (0 to 1): spheres
            of `mpfe_diameter`, their absorption from Mie theory (`miepython`),
            alpha_mpFe = (3/2) phi Q_abs / d (Lucey & Riner 2011); their scattering is not
            counted.
        mpfe_diameter: the microphase iron spheres' diameter d [um] (0.05 is 50 nm);
            needed where mpfe_fraction > 0.
        reflections: S_e and S_i: "hapke1993" (S_e = R0 + 0.05,
            S_i = 1.014 - 4/(n (n+1)^2); default) or "hapke2012" (Hapke 2012's fits).
        mean_path: <D>/D: "hapke2001" ((2/3)(n^2 - (n^2-1)^(3/2)/n); default) or
            "lucey1998" (0.9).
        backend: "numpy" (default), "jax" (float64) or "numba": the same equations.

    All array arguments broadcast against each other.

    Returns:
        w, float64, of the arguments' broadcast shape.

    Raises:
        ValueError: an argument out of its domain (named), an unknown variant or backend,
            host_density missing where an iron fraction is > 0, mpfe_diameter missing
            where mpfe_fraction > 0.
    """
    return slab_albedo_and_slopes(
        n,
        k,
        wavelength,
        grain_size,
        internal_scattering=internal_scattering,
        npfe_fraction=npfe_fraction,
        host_density=host_density,
        iron=iron,
        mpfe_fraction=mpfe_fraction,
        mpfe_diameter=mpfe_diameter,
        reflections=reflections,
        mean_path=mean_path,
        backend=backend,
    )[0]
