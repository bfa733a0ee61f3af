"""The AMSA model in numba: the same equations, compiled, parallel over pixels."""

from __future__ import annotations

import numba
import numpy as np

from ._backends import numba_equations

# Module-level names: numba resolves globals, not attributes of a namespace object.
pixel_terms = numba_equations.pixel_terms
reflectance = numba_equations.reflectance

__all__ = ["amsa_pixels"]


@numba.njit(parallel=True, cache=True)
def _amsa_pixels_kernel(w, incidence, emission, normal, scalars, legendre, use_legendre, out):
    b, c, roughness, hs, bs0, hc, bc0 = scalars[0], scalars[1], scalars[2], scalars[3], scalars[4], scalars[5], scalars[6]
    n_pixels, n_bands = w.shape
    for pixel in numba.prange(n_pixels):
        terms = pixel_terms(
            incidence[pixel], emission[pixel], normal[pixel],
            b, c, roughness, hs, bs0, hc, bc0, legendre, use_legendre,
        )  # fmt: skip
        for band in range(n_bands):
            out[pixel, band] = reflectance(w[pixel, band], terms)


def amsa_pixels(w, incidence, emission, normal, params):
    """r [1/sr] for w (pixels, bands) and geometry (pixels, 3) each; returns (pixels, bands).

    Computed in float64 (the float32 results are rounded at the end).
    """
    legendre, use_legendre = params.legendre_coefficients(np)
    scalars = np.array([float(v) for v in params.scalars()], dtype=np.float64)
    out = np.empty(w.shape, dtype=np.float64)
    _amsa_pixels_kernel(
        np.ascontiguousarray(w, dtype=np.float64),
        np.ascontiguousarray(incidence, dtype=np.float64),
        np.ascontiguousarray(emission, dtype=np.float64),
        np.ascontiguousarray(normal, dtype=np.float64),
        scalars,
        np.asarray(legendre, dtype=np.float64),
        bool(use_legendre),
        out,
    )
    return out
