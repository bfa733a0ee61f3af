"""The per-pixel fit of ``method="prior"``, written once for both solvers (the dialect
of `_model/equations.py`; retargeted by `_backends` with the model's
`reflectance_and_slope` and the LM rules of `_inverse/lm_rules.py` bound).

One problem: the window's bands b of one pixel, unknowns t = T / T_SCALE and w_b of
every band, each w_b with a Gaussian prior N(mu_b, prior_sigma^2):

    cost = sum_b f_b^2 + p_b^2,  f_b = weight_b [r(w_b) + eps(w_b) B(lambda_b, T) d^2 / F_b
           - r_obs,b],  p_b = (w_b - mu_b) / prior_sigma.

J^T J is arrow-shaped: t couples every band, each w_b only itself and t. Per band it
holds A_b = (df_b/dw_b)^2 + 1/prior_sigma^2, C_b = df_b/dw_b df_b/dt, and D = sum_b
(df_b/dt)^2; J^T f holds g_b and g_t. The damped Gauss-Newton step is solved by the Schur
complement of the w block, in O(bands):

    S = D' - sum_b C_b^2 / A_b',  dt = -(g_t - sum_b C_b g_b / A_b') / S,
    dw_b = -(g_b + C_b dt) / A_b'

(primes: Marquardt-damped diagonals, `lm_rules.damped_diagonal`). T's variance is
1 / S at the minimum (undamped): the posterior covariance's (t, t) entry.

These are the scalar pieces (one band, or the pixel's sums); the drivers (`solvers`,
`numba_kernels`) sum over bands and apply `lm_rules`' acceptance and damping.
"""

from .._model._scalar_math import maximum, where
from .._model.equations import reflectance_and_slope
from .._model.thermal import clamped_albedo, emissivity_and_slope, thermal_factor_and_slope
from .rules import T_SCALE

__all__ = [
    "prior_band_terms",
    "schur_terms",
    "temperature_step",
    "albedo_step",
    "predicted_terms",
]

# S is singular where it is below this fraction of D (T not bound beyond the prior's w)
SINGULAR = 1e-14


def prior_band_terms(w_b, t, band, pixel, inverse_prior_sigma):
    """(cost_b, A_b, C_b, D_b, g_b, g_t,b) of one band at (w_b, t).

    Args:
        band: (wavelength [um], F_sun at 1 au, observed r [1/sr], weight [sr], mu_b).
        pixel: (the model's terms, eps coefficients, distance [au]).
        inverse_prior_sigma: 1 / prior_sigma [1/w].
    """
    wavelength, solar, observed, weight, mean = band
    terms, coefficients, distance = pixel
    w, inside = clamped_albedo(w_b)
    r, dr = reflectance_and_slope(w, terms)
    eps, deps = emissivity_and_slope(w, coefficients)
    factor, dfactor = thermal_factor_and_slope(wavelength, t * T_SCALE, solar, distance)
    f = (r + eps * factor - observed) * weight
    fw = (dr + deps * factor) * inside * weight
    ft = eps * dfactor * T_SCALE * weight
    p = (w_b - mean) * inverse_prior_sigma
    cost = f * f + p * p
    return (
        cost,
        fw * fw + inverse_prior_sigma * inverse_prior_sigma,
        fw * ft,
        ft * ft,
        (fw * f + p * inverse_prior_sigma),
        ft * f,
    )


def schur_terms(a_damped, c, g):
    """(C_b^2 / A_b', C_b g_b / A_b'): band b's parts of S and of the reduced g_t."""
    return c * c / a_damped, c * g / a_damped


def temperature_step(d_damped, g_t, schur_s, schur_g, free_t):
    """(dt, whether S is regular): the Schur complement's step; dt = 0 where T is held
    (free_t = 0) or S is singular."""
    s = d_damped - schur_s
    regular = s > SINGULAR * maximum(d_damped, 0.0 * s)
    dt = where(regular, -(g_t - schur_g) / where(regular, s, 1.0), 0.0 * s)
    return dt * free_t, regular | (free_t == 0.0)


def albedo_step(a_damped, c, g, dt):
    """dw_b for the step dt in t."""
    return -(g + c * dt) / a_damped


def predicted_terms(a, c, g, dw, dt):
    """Band b's part of the linearised cost's decrease along (dw, dt), less the t-only
    part -(2 dt g_t + D dt^2) that the driver adds once."""
    return 0.0 - (2.0 * dw * g + a * dw * dw + 2.0 * c * dw * dt)
