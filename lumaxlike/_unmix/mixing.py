"""Hapke's intimate-mixing rule (Hapke 2012, ch. 10), written once (plain array algebra).

For mass fractions M_j, solid densities rho_j, grain sizes D_j and extinction
efficiencies Q_j, the geometric cross-section fractions are

    f_j = M_j c_j / sum_k M_k c_k,   c_j = Q_j / (rho_j D_j)   ("cross-section per mass"),

and the mixture's single-scattering albedo is linear in f:

    w_mix(lambda) = sum_j f_j w_j(lambda).

The map M -> f is a bijection of the simplex onto itself that keeps zeros zero, so the
solvers work in f (a linear model in w) and fractions are converted at the end.
The phase function is shared (the `HapkeParams`'s, the common choice) unless the endmembers
have their own (`Endmembers.phase`): then p_mix = sum_j f_j w_j p_j / w_mix (`phase`).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "cross_section_per_mass",
    "cross_section_fractions",
    "mass_fractions",
    "mass_fraction_jacobian",
    "pixel_mass_fractions",
    "mixed_albedo",
]


def cross_section_per_mass(density, grain_size, extinction_efficiency):
    """c_j = Q_j / (rho_j D_j): geometric cross-section per unit mass, up to a common
    factor [cm^3 g^-1 um^-1]; shape (n_endmembers,)."""
    return np.asarray(extinction_efficiency, np.float64) / (
        np.asarray(density, np.float64) * np.asarray(grain_size, np.float64)
    )


def cross_section_fractions(mass, per_mass):
    """f (..., n) from mass fractions M (..., n) and `cross_section_per_mass` c (n,).

    f_j = M_j c_j / sum_k M_k c_k; mass fractions need not sum to one (only their
    ratios matter). NaN where every M_j is 0.
    """
    weighted = np.asarray(mass, np.float64) * per_mass
    total = np.sum(weighted, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return weighted / total


def mass_fractions(fractions, per_mass):
    """M (..., n), summing to one, from cross-section fractions f (..., n): the inverse
    of `cross_section_fractions`, M_j = (f_j / c_j) / sum_k (f_k / c_k). NaN where every
    f_j is 0."""
    scaled = np.asarray(fractions, np.float64) / per_mass
    total = np.sum(scaled, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return scaled / total


def mass_fraction_jacobian(fractions, per_mass):
    """dM_j / df_l (..., n, n) of `mass_fractions` at f (..., n).

    With S = sum_k f_k / c_k: dM_j/df_l = (delta_jl - M_j) / (c_l S).
    """
    fractions = np.asarray(fractions, np.float64)
    mass = mass_fractions(fractions, per_mass)
    total = np.sum(fractions / per_mass, axis=-1)
    n = fractions.shape[-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.eye(n) - mass[..., :, None]) / (per_mass * total[..., None, None])


def pixel_mass_fractions(fractions, per_mass, covariance, mass_out, covariance_out, rows):
    """One pixel's mass fractions and their covariance, written as loops (they run as
    plain Python and compile with numba: the kernels' form of `mass_fractions`).

    Args:
        fractions: f (n,); per_mass: c (n,); covariance: of f (n, n).
        mass_out: M (n,) = (f_j / c_j) / S, S = sum_k f_k / c_k (NaN where every f is 0).
        covariance_out: of M (n, n): G C G^T with G = (I - M 1^T) D, D = diag(1 / (c S))
            (`mass_fraction_jacobian`), computed as K - M (1^T K) - (K 1) M^T +
            (1^T K 1) M M^T, K = D C D.
        rows: scratch (n,).
    """
    n = fractions.shape[0]
    total = 0.0
    for j in range(n):
        total += fractions[j] / per_mass[j]
    for j in range(n):
        mass_out[j] = fractions[j] / per_mass[j] / total
    grand = 0.0
    for a in range(n):
        rows[a] = 0.0
        for b in range(n):
            covariance_out[a, b] = covariance[a, b] / (per_mass[a] * per_mass[b] * total * total)
            rows[a] += covariance_out[a, b]
        grand += rows[a]
    for a in range(n):
        for b in range(n):
            covariance_out[a, b] += (
                grand * mass_out[a] * mass_out[b] - mass_out[a] * rows[b] - rows[a] * mass_out[b]
            )


def mixed_albedo(fractions, albedo):
    """w_mix (..., bands) = sum_j f_j w_j from cross-section fractions f (..., n) and the
    endmembers' albedos w_j (n, bands)."""
    return np.asarray(fractions, np.float64) @ np.asarray(albedo, np.float64)
