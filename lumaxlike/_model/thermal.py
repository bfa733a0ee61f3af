"""Thermal emission of a Hapke surface, written once (the dialect and editing rules of
`equations`; `_backends` retargets the functions of `__all__` to JAX and to numba).

The observed bidirectional reflectance of a warm surface (Hapke 2012, *Theory of
Reflectance and Emittance Spectroscopy*, 2nd ed., ch. 13 and 15) is

    r_obs = r(w) + eps(e; w) B_lambda(T) d^2 / F_sun(lambda)        [1/sr]

(I/F = pi r_obs): r(w) the model's reflectance, eps(e; w) = 1 - r_hd(e; w) the
directional emissivity at the emission angle e (Kirchhoff's law, with r_hd the
directional-hemispherical reflectance of the same model and parameters), B_lambda(T)
Planck's spectral radiance [W m^-2 sr^-1 um^-1], d the Sun's distance [au] and F_sun the
solar irradiance at 1 au [W m^-2 um^-1]. The factor B d^2 / F is `thermal_factor` [1/sr].

eps(e; w) of one pixel is a Chebyshev series in gamma = sqrt(1 - w) whose
`N_EMISSIVITY` coefficients come from `_thermal.emissivity` (a quadrature of the model's
own r over the hemisphere, once per model and emission angle): eps is analytic in gamma
(the H-functions are), so the series converges fast.
"""

from scipy import constants as _constants

from ._scalar_math import expm1, maximum, minimum, sqrt, where

__all__ = [
    "planck_exponent",
    "planck_from_exponent",
    "planck_radiance_and_slope",
    "thermal_factor_from_exponent",
    "thermal_factor_and_slope",
    "emissivity_and_slope",
    "clamped_albedo",
]

# Planck's constants in the units used here (wavelength in um, radiance per um):
# B = C1 / lambda^5 / (exp(C2 / (lambda T)) - 1) [W m^-2 sr^-1 um^-1].
C1 = 2.0 * _constants.h * _constants.c**2 * 1e24  # 2 h c^2 [W m^-2 sr^-1 um^4]
C2 = _constants.h * _constants.c / _constants.k * 1e6  # h c / k [um K]
# Beyond this exponent exp(x) - 1 = exp(x) to float64 and B underflows far below any
# measurable signal; clamping keeps exp finite (no inf, no NaN in gradients).
MAX_EXPONENT = 700.0
# Terms of the emissivity's Chebyshev series in gamma (`_thermal.emissivity`).
N_EMISSIVITY = 16
# w is held in [MIN_ALBEDO, 1 - MIN_ALBEDO] where eps and r are evaluated: d gamma/dw is
# infinite at w = 1, and the continuum of a fit may wander outside (0, 1) in a step.
MIN_ALBEDO = 1e-9


def planck_exponent(wavelength, temperature):
    """x = C2 / (lambda T) of Planck's law, held at `MAX_EXPONENT` (wavelength [um], T [K])."""
    return minimum(C2 / (wavelength * temperature), MAX_EXPONENT)


def planck_from_exponent(wavelength, temperature, x, denominator):
    """`planck_radiance_and_slope` from x = `planck_exponent` and denominator = expm1(x):
    the one exponential split out, so that a solver evaluating many bands calls it in a
    loop of its own and the rest in loops without calls (the same numbers)."""
    radiance = C1 / wavelength**5 / denominator
    slope = radiance * x / temperature * (1.0 + 1.0 / denominator)
    return radiance, slope


def planck_radiance_and_slope(wavelength, temperature):
    """Planck's spectral radiance B_lambda(T) [W m^-2 sr^-1 um^-1] and dB/dT [... K^-1].

    B = C1 / lambda^5 / (exp(x) - 1), x = C2 / (lambda T); dB/dT = B x / T / (1 - exp(-x))
    = B x / T (1 + 1 / (exp(x) - 1)) (one exponential for both).

    Args:
        wavelength: lambda [um], > 0.
        temperature: T [K], > 0.
    """
    x = planck_exponent(wavelength, temperature)
    return planck_from_exponent(wavelength, temperature, x, expm1(x))


def thermal_factor_from_exponent(
    wavelength, temperature, solar_irradiance, distance_au, x, denominator
):
    """`thermal_factor_and_slope` from x = `planck_exponent` and denominator = expm1(x)
    (as `planck_from_exponent`)."""
    radiance, slope = planck_from_exponent(wavelength, temperature, x, denominator)
    scale = distance_au * distance_au / solar_irradiance
    return radiance * scale, slope * scale


def thermal_factor_and_slope(wavelength, temperature, solar_irradiance, distance_au):
    """B_lambda(T) d^2 / F_sun [1/sr] and its derivative in T [1/(sr K)].

    Args:
        wavelength: [um]; temperature: [K]; solar_irradiance: F_sun at 1 au
            [W m^-2 um^-1]; distance_au: the Sun's distance d [au].
    """
    x = planck_exponent(wavelength, temperature)
    return thermal_factor_from_exponent(
        wavelength, temperature, solar_irradiance, distance_au, x, expm1(x)
    )


def clamped_albedo(w):
    """w held in [MIN_ALBEDO, 1 - MIN_ALBEDO], and 1 where it was not clamped, else 0."""
    inside = (w > MIN_ALBEDO) & (w < 1.0 - MIN_ALBEDO)
    held = minimum(maximum(w, MIN_ALBEDO), 1.0 - MIN_ALBEDO)
    return held, where(inside, 1.0 + 0.0 * w, 0.0 * w)


def emissivity_and_slope(w, coefficients):
    """eps(w) = sum_n c_n T_n(2 gamma - 1), gamma = sqrt(1 - w), and d eps/dw.

    Clenshaw's recurrence for the series and for its derivative in t = 2 gamma - 1
    (T_n' = n U_(n-1)); d eps/dw = d eps/dt * 2 d gamma/dw = -d eps/dt / gamma.

    Args:
        w: single-scattering albedo, in (0, 1) (`clamped_albedo`).
        coefficients: the pixel's `N_EMISSIVITY` Chebyshev coefficients (element by
            element).
    """
    gamma = sqrt(1.0 - w)
    t = 2.0 * gamma - 1.0
    # value: b_k = c_k + 2 t b_(k+1) - b_(k+2); derivative: sum c_n n U_(n-1)(t)
    b1 = 0.0 * w
    b2 = 0.0 * w
    d1 = 0.0 * w
    d2 = 0.0 * w
    for n in range(N_EMISSIVITY - 1, 0, -1):
        b1, b2 = coefficients[n] + 2.0 * t * b1 - b2, b1
        # U-series Clenshaw for sum_(m=0)^(N-2) (m+1) c_(m+1) U_m(t), m = n - 1
        d1, d2 = n * coefficients[n] + 2.0 * t * d1 - d2, d1
    value = coefficients[0] + t * b1 - b2
    slope_t = d1  # U_0 = 1: the recurrence's last step is the sum
    return value, -slope_t / gamma
