"""The directional emissivity eps(e; w) = 1 - r_hd(e; w) of a Hapke model (Kirchhoff's
law; Hapke 2012, ch. 13 and 15), by quadrature of the model's own r over the hemisphere.

By reciprocity the directional-hemispherical reflectance at e is the integral of the
bidirectional reflectance over the incidence directions (r already holds cos i),

    r_hd(e) = int_0^(2 pi) int_0^1 r(i, e, psi) d(cos i) d psi,

evaluated with the package's own `amsa` (so for every multiple-scattering
approximation, H-function, phase function, roughness and porosity alike): Gauss-Legendre
in psi over [0, pi] (twice, by symmetry) and in i, split at i = e (where the roughness
equations change branch): over [0, e] in the angle i, over [e, pi/2] in s with
cos i = cos e s^2 (which smooths H's x log x at the horizon). A narrow opposition peak
(h_S, h_C of a few 0.01) is a cusp at i = e, psi = 0 that the product rule resolves to
about 1e-5 only; for isotropic scatterers without roughness or opposition effect (IMSA,
exact H) the result is the closed form gamma H(cos e) to 1e-10.

eps of one model is tabulated once per call on a grid of Chebyshev nodes in
gamma = sqrt(1 - w) (`N_EMISSIVITY`) and in cos e over the pixels' range (`N_COSINE`);
each pixel then gets the `N_EMISSIVITY` coefficients of its series in gamma
(`pixel_coefficients`), which the solvers evaluate (`_model.thermal.emissivity_and_slope`).
"""

from __future__ import annotations

import numpy as np

from .._model.forward import amsa
from .._model.numba_model import kernel_params
from .._model.thermal import N_EMISSIVITY
from .._params import HapkeParams

__all__ = [
    "N_COSINE",
    "hemispherical_reflectance",
    "emissivity_table",
    "cached_emissivity_table",
    "pixel_coefficients",
    "directional_emissivity",
]

N_COSINE = 24  # Chebyshev nodes in cos e of the table
N_POLAR = 24  # Gauss-Legendre nodes in i on each side of e
N_AZIMUTH = 32  # Gauss-Legendre nodes in psi over [0, pi]
# the narrowest range of cos e a table spans (a scene seen at one angle)
MIN_COSINE_SPAN = 1e-3
COSINE_STEP = 1.0 / 64.0  # `cached_emissivity_table`'s ranges: multiples of this
TABLE_CACHE_SIZE = 16  # tables kept by `cached_emissivity_table`
_TABLE_CACHE: dict = {}


def _incidence_nodes(cos_e: np.ndarray):
    """Directions toward the sun (..., nodes, 3) and weights (..., nodes) of the rule."""
    x, wx = np.polynomial.legendre.leggauss(N_POLAR)
    s, ws = (x + 1.0) / 2.0, wx / 2.0
    psi, wpsi = np.polynomial.legendre.leggauss(N_AZIMUTH)
    psi, wpsi = (psi + 1.0) * np.pi / 2.0, wpsi * np.pi / 2.0
    cos_e = np.asarray(cos_e, dtype=np.float64)[..., None]
    e = np.arccos(cos_e)
    # [0, e] in the angle i: d(cos i) = sin i di
    i_near = e * s
    cos_near, w_near = np.cos(i_near), np.sin(i_near) * e * ws
    # [e, pi/2] in s: cos i = cos e s^2, d(cos i) = 2 cos e s ds
    cos_far, w_far = cos_e * s * s, 2.0 * cos_e * s * ws
    cos_i = np.concatenate([cos_near, cos_far], axis=-1)[..., :, None]
    weight = np.concatenate([w_near, w_far], axis=-1)[..., :, None] * (2.0 * wpsi)
    sin_i = np.sqrt(np.maximum(1.0 - cos_i * cos_i, 0.0))
    shape = np.broadcast_shapes(cos_i.shape, psi.shape)
    to_sun = np.stack(
        [
            np.broadcast_to(sin_i * np.cos(psi), shape),
            np.broadcast_to(sin_i * np.sin(psi), shape),
            np.broadcast_to(cos_i, shape),
        ],
        axis=-1,
    )
    return to_sun.reshape(*shape[:-2], -1, 3), weight.reshape(*shape[:-2], -1)


def hemispherical_reflectance(w, cos_e, params: HapkeParams, backend: str = "numba"):
    """r_hd(e; w) [-] of the model `params`, by the quadrature of the module docstring.

    Args:
        w: single-scattering albedos, shape ``(n_w,)``.
        cos_e: emission cosines in (0, 1], shape ``(n_e,)``.
        params: the model; backend: of `amsa`.
    Returns:
        r_hd, shape ``(n_e, n_w)``.
    """
    w = np.atleast_1d(np.asarray(w, dtype=np.float64))
    cos_e = np.atleast_1d(np.asarray(cos_e, dtype=np.float64))
    to_sun, weight = _incidence_nodes(cos_e)  # (n_e, nodes, 3), (n_e, nodes)
    sin_e = np.sqrt(np.maximum(1.0 - cos_e * cos_e, 0.0))
    to_sensor = np.stack([sin_e, 0.0 * sin_e, cos_e], axis=-1)[:, None, :]
    to_sensor = np.broadcast_to(to_sensor, to_sun.shape)
    normal = np.array([0.0, 0.0, 1.0])
    albedo = np.broadcast_to(w, (*to_sun.shape[:-1], w.size))
    r = amsa(np.ascontiguousarray(albedo), to_sun, to_sensor, normal, params, backend=backend)
    return np.einsum("enw,en->ew", np.asarray(r, dtype=np.float64), weight)


def _chebyshev_nodes(n: int) -> np.ndarray:
    return np.cos(np.pi * (np.arange(n) + 0.5) / n)


def _chebyshev_coefficients(values: np.ndarray, axis: int) -> np.ndarray:
    """Coefficients of the series through `values` at `_chebyshev_nodes` along `axis`."""
    n = values.shape[axis]
    k = np.arange(n)
    basis = np.cos(np.pi * np.outer(k, k + 0.5) / n) * (2.0 / n)
    basis[0] /= 2.0
    return np.moveaxis(np.tensordot(basis, np.moveaxis(values, axis, 0), axes=1), 0, axis)


def emissivity_table(cos_range, params: HapkeParams, backend: str = "numba"):
    """eps's Chebyshev coefficients in (cos e, gamma) over `cos_range`.

    Args:
        cos_range: (lowest, highest) cos e of the pixels, in (0, 1].
    Returns:
        (coefficients (N_COSINE, N_EMISSIVITY), (lo, hi)): eps(cos e, gamma) =
        sum_jk C[j, k] T_j(u) T_k(2 gamma - 1), u = (2 cos e - lo - hi) / (hi - lo).
    """
    lo, hi = float(cos_range[0]), float(cos_range[1])
    if hi - lo < MIN_COSINE_SPAN:
        mid = min(max((lo + hi) / 2.0, MIN_COSINE_SPAN / 2.0), 1.0 - MIN_COSINE_SPAN / 2.0)
        lo, hi = mid - MIN_COSINE_SPAN / 2.0, mid + MIN_COSINE_SPAN / 2.0
    cosines = (lo + hi) / 2.0 + (hi - lo) / 2.0 * _chebyshev_nodes(N_COSINE)
    gamma = (_chebyshev_nodes(N_EMISSIVITY) + 1.0) / 2.0
    eps = 1.0 - hemispherical_reflectance(1.0 - gamma * gamma, cosines, params, backend)
    coefficients = _chebyshev_coefficients(_chebyshev_coefficients(eps, 0), 1)
    return coefficients, (lo, hi)


def cached_emissivity_table(cos_range, params: HapkeParams, backend: str = "numba"):
    """`emissivity_table` over `cos_range` widened to multiples of `COSINE_STEP` (within
    (0, 1]; one below `COSINE_STEP` is kept), kept for later calls with the same model (the `_TABLE_CACHE` most recent):
    the blocks of a cube, and repeated calls on one scene, share their table instead of
    each computing its own (the quadrature is ~10^5 model evaluations).
    """
    lo = float(np.floor(float(cos_range[0]) / COSINE_STEP) * COSINE_STEP)
    lo = lo if lo > 0.0 else float(cos_range[0])  # grazing views: not widened to 0
    hi = float(min(np.ceil(float(cos_range[1]) / COSINE_STEP) * COSINE_STEP, 1.0))
    scalars, legendre, use_legendre = kernel_params(params)
    model = (params.model_key, scalars.tobytes(), legendre.tobytes(), use_legendre)
    return _cached_table(lo, max(hi, lo), model, params, backend)


def _cached_table(lo, hi, model, params, backend):
    key = (lo, hi, model, backend)
    table = _TABLE_CACHE.pop(key, None)
    if table is None:
        table = emissivity_table((lo, hi), params, backend)
        while len(_TABLE_CACHE) >= TABLE_CACHE_SIZE:
            _TABLE_CACHE.pop(next(iter(_TABLE_CACHE)))
    _TABLE_CACHE[key] = table  # the most recent last
    return table


def pixel_coefficients(cos_e, table) -> np.ndarray:
    """Each pixel's coefficients of eps in gamma: shape ``cos_e.shape + (N_EMISSIVITY,)``
    (the table's series in cos e summed as one matrix product: the Chebyshev basis of each
    pixel's u times the table)."""
    coefficients, (lo, hi) = table
    u = (2.0 * np.asarray(cos_e, dtype=np.float64) - lo - hi) / (hi - lo)
    basis = np.polynomial.chebyshev.chebvander(u.ravel(), coefficients.shape[0] - 1)
    return (basis @ coefficients).reshape(*np.shape(cos_e), N_EMISSIVITY)


def directional_emissivity(w, cos_e, params: HapkeParams, backend: str = "numba"):
    """eps(e; w) = 1 - r_hd(e; w) [-] from the tabulated series, shapes broadcast.

    Args:
        w: single-scattering albedo in [0, 1]; cos_e: emission cosine in (0, 1].
    """
    w, cos_e = np.broadcast_arrays(np.asarray(w, float), np.asarray(cos_e, float))
    table = emissivity_table((cos_e.min(), cos_e.max()), params, backend)
    coefficients = pixel_coefficients(cos_e.ravel(), table)
    t = 2.0 * np.sqrt(np.clip(1.0 - w.ravel(), 0.0, 1.0)) - 1.0
    basis = np.polynomial.chebyshev.chebvander(t, N_EMISSIVITY - 1)
    return np.sum(basis * coefficients, axis=-1).reshape(w.shape)
