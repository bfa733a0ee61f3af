"""Endmembers from optical constants (`Endmembers.from_optical_constants`): their
arguments checked, n and k (and iron's) on the cube's bands, the single-scattering albedo
of each endmember's equivalent slab at its starting grain size and npFe0, and what is kept
to recompute it (`OpticalMixing`). The method that fits grain sizes and npFe0 with these
endmembers is described in `optical` (`_unmix/optical.py`)."""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = [
    "DEFAULT_GRAIN_SIZE_BOUNDS",
    "DEFAULT_NPFE_BOUNDS",
    "OpticalMixing",
    "endmembers_from_optical_constants",
    "optical_on_bands",
]

DEFAULT_GRAIN_SIZE_BOUNDS = (1.0, 1000.0)  # um
DEFAULT_NPFE_BOUNDS = (0.0, 0.02)  # mass fraction (2 wt %)


def _array(name, value, shape, *, low=None, strict=False):
    array = np.asarray(value)
    if array.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be numeric, got dtype {array.dtype}")
    try:
        array = np.array(np.broadcast_to(array.astype(np.float64), shape))
    except ValueError:
        raise ValueError(f"{name} must broadcast to shape {shape}, got {array.shape}") from None
    bad = ~np.isfinite(array)
    if low is not None:
        bad |= (array <= low) if strict else (array < low)
    if np.any(bad):
        relation = "" if low is None else f" and {'>' if strict else '>='} {low:g}"
        raise ValueError(f"{name} must be finite{relation}, got {array[bad][:3]}")
    array.flags.writeable = False
    return array


@dataclasses.dataclass(frozen=True, eq=False)
class OpticalMixing:
    """What `Endmembers.from_optical_constants` keeps to recompute w_j(D_j, phi).

    Attributes:
        n, k: the endmembers' refractive index on the bands, (n_endmembers, n_bands).
        internal_scattering: s_j [1/um], (n_endmembers,).
        iron_n, iron_k: iron's refractive index on the bands, (n_bands,) (zeros where
            nanophase iron cannot vary: `npfe_bounds` (0, 0), or npFe0 starts at 0 and
            iron's table does not cover the bands: `check_free` then refuses to free it).
        grain_size_bounds: (n_endmembers, 2) [um], lower < upper.
        npfe_bounds: (2,) nanophase iron mass fraction, 0 <= lower <= upper < 1.
        npfe_fraction: the starting (and, when not free, fixed) npFe0 mass fraction.
        reflections, mean_path: the slab model's variants (`slab_albedo`).
    """

    n: np.ndarray
    k: np.ndarray
    internal_scattering: np.ndarray
    iron_n: np.ndarray
    iron_k: np.ndarray
    grain_size_bounds: np.ndarray
    npfe_bounds: np.ndarray
    npfe_fraction: float
    reflections: str
    mean_path: str


def _constants_list(constants):
    from .._optical.constants import OpticalConstants

    items = [constants] if isinstance(constants, OpticalConstants) else list(constants)
    if not items or not all(isinstance(c, OpticalConstants) for c in items):
        raise ValueError("constants must be OpticalConstants or a sequence of them, at least one")
    return items


def _checked_bounds(grain_size, grain_size_bounds, npfe_fraction, npfe_bounds, p):
    bounds = _array(
        "grain_size_bounds",
        DEFAULT_GRAIN_SIZE_BOUNDS if grain_size_bounds is None else grain_size_bounds,
        (p, 2),
        low=0.0,
        strict=True,
    )
    if np.any(bounds[:, 0] > bounds[:, 1]):
        raise ValueError(
            f"grain_size_bounds must be (lower, upper) with lower <= upper, got {bounds}"
        )
    outside = (grain_size < bounds[:, 0]) | (grain_size > bounds[:, 1])
    if np.any(outside):
        raise ValueError(
            f"grain_size {grain_size[outside][0]:g} (endmember {int(np.argmax(outside))}) lies "
            f"outside its grain_size_bounds {tuple(map(float, bounds[int(np.argmax(outside))]))}"
        )
    npfe = _array(
        "npfe_bounds", DEFAULT_NPFE_BOUNDS if npfe_bounds is None else npfe_bounds, (2,), low=0.0
    )
    if not npfe[0] <= npfe[1] < 1.0:
        raise ValueError(
            "npfe_bounds must be (lower, upper) mass fractions with 0 <= lower <= upper < 1, "
            f"got {tuple(map(float, npfe))}"
        )
    start = float(_array("npfe_fraction", npfe_fraction, (), low=0.0))
    if not npfe[0] <= start <= npfe[1]:
        raise ValueError(
            f"npfe_fraction {start:g} lies outside npfe_bounds {tuple(map(float, npfe))}"
        )
    return bounds, npfe, start


def _check_host_index(name, n, wavelengths):
    """ValueError naming endmember `name` where its host's n < 1 (a metal's or iron's
    constants given as a host): the equivalent slab needs n >= 1."""
    below = np.flatnonzero(n < 1.0)
    if below.size:
        raise ValueError(
            f"endmember {name!r}: its host's n is {n[below[0]]:g} < 1 at "
            f"{wavelengths[below[0]]:g} um; the equivalent slab needs n >= 1"
        )


def endmembers_from_optical_constants(
    cls,
    constants,
    grain_size,
    wavelengths,
    *,
    names=None,
    density=None,
    npfe_fraction=0.0,
    internal_scattering=0.0,
    grain_size_bounds=None,
    npfe_bounds=None,
    iron=None,
    reflections="hapke1993",
    mean_path="hapke2001",
    extinction_efficiency=None,
):
    """`Endmembers.from_optical_constants` (documented there)."""
    from .._model._backends import SLAB_MEAN_PATHS, SLAB_REFLECTIONS
    from .._optical.slab import slab_albedo_and_slopes
    from .._shapes import check_choice

    items = _constants_list(constants)
    p = len(items)
    check_choice("reflections", reflections, SLAB_REFLECTIONS)
    check_choice("mean_path", mean_path, SLAB_MEAN_PATHS)
    wavelengths = np.asarray(wavelengths, np.float64)
    if (
        wavelengths.ndim != 1
        or wavelengths.size < 1
        or not np.all(np.isfinite(wavelengths) & (wavelengths > 0))
    ):
        raise ValueError(
            f"wavelengths must be the cube's band centres [um], 1-D, finite and > 0, got shape {wavelengths.shape}"
        )
    names = tuple(c.name for c in items) if names is None else names
    if density is None:
        missing = [c.name for c in items if c.density is None]
        if missing:
            raise ValueError(f"density: the optical constants {missing} carry none; give density=")
        density = [c.density for c in items]
    density = _array("density", density, (p,), low=0.0, strict=True)
    grain_size = _array("grain_size", grain_size, (p,), low=0.0, strict=True)
    scattering = _array("internal_scattering", internal_scattering, (p,), low=0.0)
    bounds, npfe, start = _checked_bounds(
        grain_size, grain_size_bounds, npfe_fraction, npfe_bounds, p
    )
    n = np.empty((p, wavelengths.size))
    k = np.empty((p, wavelengths.size))
    for j, item in enumerate(items):
        n[j], k[j] = item.interpolate(wavelengths)  # ValueError outside its grid
        _check_host_index(names[j], n[j], wavelengths)
    from .._optical.slab import iron_at, iron_covers

    if npfe[1] > 0.0 and (start > 0.0 or iron_covers(wavelengths, iron)):
        iron_n, iron_k = iron_at(wavelengths, iron)  # ValueError outside its grid
        iron_n, iron_k = (
            np.broadcast_to(iron_n, wavelengths.shape),
            np.broadcast_to(iron_k, wavelengths.shape),
        )
    else:  # npFe0 fixed at 0 unless freed, which check_free then refuses
        iron_n = iron_k = np.zeros(wavelengths.shape)
    w = slab_albedo_and_slopes(
        n,
        k,
        wavelengths,
        grain_size[:, None],
        internal_scattering=scattering[:, None],
        npfe_fraction=start,
        host_density=density[:, None],
        iron=iron,
        reflections=reflections,
        mean_path=mean_path,
    )[0]
    frozen = [np.array(a, np.float64) for a in (n, k, iron_n, iron_k)]
    for a in frozen:
        a.flags.writeable = False
    optical = OpticalMixing(
        n=frozen[0],
        k=frozen[1],
        internal_scattering=scattering,
        iron_n=frozen[2],
        iron_k=frozen[3],
        grain_size_bounds=bounds,
        npfe_bounds=npfe,
        npfe_fraction=start,
        reflections=reflections,
        mean_path=mean_path,
    )
    return cls(
        names=names,
        albedo=w,
        density=density,
        grain_size=grain_size,
        extinction_efficiency=extinction_efficiency,
        wavelengths=wavelengths,
        optical=optical,
    )


def optical_on_bands(optical: OpticalMixing, select) -> OpticalMixing:
    """`optical` on the bands ``select`` (indices into its bands; `endmembers_on_bands`)."""
    n, k, iron_n, iron_k = (
        np.array(array[..., select])
        for array in (optical.n, optical.k, optical.iron_n, optical.iron_k)
    )
    for array in (n, k, iron_n, iron_k):
        array.flags.writeable = False
    return dataclasses.replace(optical, n=n, k=k, iron_n=iron_n, iron_k=iron_k)
