"""The empirical photometric functions, written once: Lambert, Lommel-Seeliger,
Lunar-Lambert (McEwen 1991), Minnaert, and Shkuratov et al. (2011).

Each is linear in one albedo-like parameter A:

    r = A * pht(i, e, g) / pi   [1/sr]

where pht is the photometric function of USGS ISIS3's ``photomet`` (its
``PhotoModelAlgorithm``: the radiance factor I/F of a surface of albedo 1), so A is the
albedo ISIS calls "Albedo" and pht = 1 at i = e = g = 0 for every function here. The
kind is static: `photometric_function` is a slot that `photometric_backends` binds, per
kind, to one of the ``*_function``\\ s below when it retargets this module to JAX or
numba (as `family` does for `equations`).

Same rules as `equations`: scalar, branch-free (`where`, both branches finite), only the
primitives imported below. The geometry (unit vectors, cos i, cos e, tan(g/2), validity)
is `equations.geometry_terms`, bound to its backend twin.

Every ``*_function`` takes (mu0, mu, cos_g, tan_half_g, limb_darkening, minnaert_k,
mu1, m, mu2, eta) with mu0 = cos i > 0, mu = cos e > 0 (the caller substitutes safe
values where the geometry is invalid) and returns pht [-].
"""

# the kinds, the parameters (in the order `photometric_scale` takes them) and their
# defaults, shared with `lumaxlike._photometric`: `lumaxlike._configuration`'s, also read
# from here (`photometric_backends`, the command line)
from .._configuration import PHOTOMETRIC_DEFAULTS as DEFAULTS  # noqa: F401
from .._configuration import PHOTOMETRIC_KINDS as KINDS  # noqa: F401
from .._configuration import PHOTOMETRIC_PARAMETER_NAMES as PARAMETER_NAMES  # noqa: F401
from ._scalar_math import NAN, atan2, cos, exp, minimum, sqrt, where
from .equations import geometry_terms

__all__ = [
    "lambert_function",
    "lommel_seeliger_function",
    "lunar_lambert_function",
    "minnaert_function",
    "shkuratov_phase",
    "akimov_disk",
    "shkuratov_function",
    "photometric_function",
    "photometric_scale",
    "reflectance",
]

PI = 3.141592653589793


def lambert_function(mu0, mu, cos_g, tan_half_g, limb_darkening, minnaert_k, mu1, m, mu2, eta):
    """Lambert: pht = mu0 (ISIS3 ``Lambert.cpp``)."""
    return mu0 + 0.0 * mu


def lommel_seeliger_function(
    mu0, mu, cos_g, tan_half_g, limb_darkening, minnaert_k, mu1, m, mu2, eta
):
    """Lommel-Seeliger: pht = 2 mu0/(mu0 + mu) (ISIS3 ``LommelSeeliger.cpp``; 1 at
    i = e = 0). The single-scattering limit of Hapke's model with an isotropic phase
    function, r = w/(4 pi) mu0/(mu0 + mu), is this with A = w/8."""
    return 2.0 * mu0 / (mu0 + mu)


def lunar_lambert_function(
    mu0, mu, cos_g, tan_half_g, limb_darkening, minnaert_k, mu1, m, mu2, eta
):
    """Lunar-Lambert (McEwen 1991): pht = mu0 [(1 - L) + 2 L/(mu0 + mu)] (ISIS3
    ``LunarLambert.cpp``), L = `limb_darkening`: L = 0 is Lambert, L = 1 Lommel-Seeliger."""
    L = limb_darkening
    return mu0 * ((1.0 - L) + 2.0 * L / (mu0 + mu))


def minnaert_function(mu0, mu, cos_g, tan_half_g, limb_darkening, minnaert_k, mu1, m, mu2, eta):
    """Minnaert: pht = mu0 (mu0 mu)^(k - 1) = mu0^k mu^(k - 1) (ISIS3 ``Minnaert.cpp``),
    k = `minnaert_k`; k = 1 is Lambert."""
    return mu0 * (mu0 * mu) ** (minnaert_k - 1.0)


def shkuratov_phase(alpha, mu1, m, mu2):
    """Shkuratov et al. (2011) phase function f(alpha) = [exp(-mu1 alpha) + m
    exp(-mu2 alpha)]/(1 + m), alpha the phase angle [rad]; f(0) = 1."""
    return (exp(-mu1 * alpha) + m * exp(-mu2 * alpha)) / (1.0 + m)


def akimov_disk(mu0, mu, cos_g, tan_half_g, eta):
    """The Akimov disk function with Shkuratov et al.'s (2011) roughness exponent:

    D = cos(alpha/2) cos[pi/(pi - alpha) (gamma - alpha/2)] cos(beta)^(eta alpha/(pi - alpha))
        / cos(gamma),

    in the photometric latitude beta and longitude gamma: mu = cos beta cos gamma,
    mu0 = cos beta cos(alpha - gamma), i.e. tan gamma = (mu0/mu - cos alpha)/sin alpha.
    D = 1 at alpha = 0 whatever gamma (gamma is then undefined and taken as 0); D -> 0
    at the terminator (gamma = alpha - pi/2).
    """
    alpha = 2.0 * atan2(tan_half_g, 1.0)
    sin_g = 2.0 * tan_half_g / (1.0 + tan_half_g * tan_half_g)
    tilted = sin_g > 0.0
    gamma = where(tilted, atan2(mu0 - mu * cos_g, mu * where(tilted, sin_g, 1.0)), 0.0 * alpha)
    cos_gamma = cos(gamma)  # > 0: |gamma| < pi/2 since mu sin g > 0
    cos_beta = minimum(mu / cos_gamma, 1.0)  # <= 1 but for rounding
    cos_half_alpha = 1.0 / sqrt(1.0 + tan_half_g * tan_half_g)
    exponent = eta * alpha / (PI - alpha)
    longitude = cos(PI / (PI - alpha) * (gamma - 0.5 * alpha))
    return cos_half_alpha * longitude * cos_beta**exponent / cos_gamma


def shkuratov_function(mu0, mu, cos_g, tan_half_g, limb_darkening, minnaert_k, mu1, m, mu2, eta):
    """Shkuratov et al. (2011, PSS 59:1326): pht = f(alpha) D(alpha, beta, gamma), the
    phase function `shkuratov_phase` times the disk function `akimov_disk`; the albedo A
    is then the normal albedo A_N (pht = 1 at alpha = 0)."""
    alpha = 2.0 * atan2(tan_half_g, 1.0)
    return shkuratov_phase(alpha, mu1, m, mu2) * akimov_disk(mu0, mu, cos_g, tan_half_g, eta)


# The photometric function of the model: bound per kind (`photometric_backends`).
photometric_function = lambert_function


def photometric_scale(to_sun, to_sensor, normal, limb_darkening, minnaert_k, mu1, m, mu2, eta):
    """pht / pi [1/sr] for one pixel: r = A * scale. NaN unless cos i > 0 and cos e > 0.

    Args:
        to_sun, to_sensor, normal: length-3 direction vectors (any length > 0).
        limb_darkening, minnaert_k, mu1, m, mu2, eta: the functions' parameters (each
            function uses its own).
    """
    geometry = geometry_terms(to_sun, to_sensor, normal)
    valid = geometry.valid
    mu0 = where(valid, geometry.cos_i, 1.0)
    mu = where(valid, geometry.cos_e, 1.0)
    cos_g = where(valid, geometry.cos_g, 1.0)
    tan_half_g = where(valid, geometry.tan_half_g, 0.0)
    pht = photometric_function(
        mu0, mu, cos_g, tan_half_g, limb_darkening, minnaert_k, mu1, m, mu2, eta
    )
    return where(valid, pht / PI, NAN + 0.0 * pht)


def reflectance(albedo, scale):
    """r = A * pht / pi [1/sr] from a pixel's `photometric_scale`."""
    return albedo * scale
