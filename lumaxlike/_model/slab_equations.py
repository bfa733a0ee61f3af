"""Hapke's equivalent slab: the single-scattering albedo w of a particle from its optical
constants, its grain size and its content of nanophase iron, scalar and branch-free.

Written once, like `equations`: the names `sqrt`, `exp`, `where`, ... are module globals
that `_backends` rebinds to `jax.numpy` or to numba-compiled `math`; the same rules apply
(no data-dependent `if`; `where` with both branches finite). Two slots pick the published
variants when the functions are rebuilt (`slab_twins` in `_backends`):
`surface_reflections(n, k)` (`hapke1993_reflections`, the default, or
`hapke2012_reflections`) and `mean_path_factor(n)` (`hapke2001_mean_path_factor`, the
default, or `lucey1998_mean_path_factor`).

Symbols (Hapke 2001, JGR 106, 10039; Hapke 2012, ch. 6): n, k the host's real and
imaginary refractive indices; lambda the wavelength [um]; D the grain size [um]; s the
internal scattering coefficient [1/um]; alpha the absorption coefficient [1/um];
S_e, S_i the external and internal surface reflection coefficients; <D> the mean
path length through a grain [um]; Theta the internal transmission factor.

Nanophase iron (Hapke 2001 eq. 25-27; Lucey & Riner 2011, Icarus 212, 451, eq. 1): a
mass fraction f of iron spheres much smaller than lambda adds
alpha_npFe = 36 pi z phi / lambda to the host's alpha, with
z = n_h^3 n_Fe k_Fe / ((n_Fe^2 - k_Fe^2 + 2 n_h^2)^2 + (2 n_Fe k_Fe)^2) and the volume
fraction phi = f rho_host / rho_Fe. The host's S_e and S_i keep the host's n and k.
Any further absorption [1/um] (microphase iron, from Mie theory in `_optical/microphase.py`)
comes in as `extra_alpha`, added to alpha likewise.

Derivatives: `slab_albedo_and_slopes` gives dw/dD, dw/df and dw/dalpha by the chain rule, written
next to `slab_albedo` (the numba backend's derivatives; the JAX twin may use either it
or autodiff of `slab_albedo`, which the guards below keep finite: no `custom_jvp`).
"""

from ._scalar_math import exp, maximum, sqrt, where

__all__ = [
    "absorption_coefficient",
    "npfe_absorption_coefficient",
    "hapke1993_reflections",
    "hapke2012_reflections",
    "surface_reflections",
    "hapke2001_mean_path_factor",
    "lucey1998_mean_path_factor",
    "mean_path_factor",
    "transmission_terms",
    "slab_albedo",
    "slab_albedo_and_slopes",
    "slab_band_terms",
    "slab_slopes_from_terms",
]

PI = 3.141592653589793
IRON_DENSITY = 7.87  # g/cm^3 (rho_Fe of Hapke 2001 and Lucey & Riner 2011)
# q = sqrt(alpha / (alpha + s)) is floored at sqrt(RATIO_FLOOR) = 1e-150: finite
# derivatives at alpha = 0 with s > 0 (where dq/dalpha is infinite), values unchanged.
RATIO_FLOOR = 1e-300


def absorption_coefficient(k, wavelength):
    """alpha = 4 pi k / lambda [1/um] (wavelength in um)."""
    return 4.0 * PI * k / wavelength


def npfe_absorption_coefficient(n_host, wavelength, n_iron, k_iron, host_density):
    """d alpha / d f: the absorption coefficient [1/um] that a unit mass fraction f of
    nanophase iron adds (Hapke 2001; Lucey & Riner 2011 eq. 1), so that
    alpha_npFe = f * this. host_density in g/cm^3."""
    z = (n_host**3 * n_iron * k_iron) / (
        (n_iron**2 - k_iron**2 + 2.0 * n_host**2) ** 2 + (2.0 * n_iron * k_iron) ** 2
    )
    return 36.0 * PI * z * (host_density / IRON_DENSITY) / wavelength


def hapke1993_reflections(n, k):
    """(S_e, S_i): S_e = R0 + 0.05, S_i = 1.014 - 4 / (n (n + 1)^2), with R0 the normal
    Fresnel reflectance ((n-1)^2 + k^2) / ((n+1)^2 + k^2) (Hapke 1993; Hapke 2001)."""
    r0 = ((n - 1.0) ** 2 + k**2) / ((n + 1.0) ** 2 + k**2)
    return r0 + 0.05, 1.014 - 4.0 / (n * (n + 1.0) ** 2)


def hapke2012_reflections(n, k):
    """(S_e, S_i) from Hapke's (2012, eq. 5.37-5.38) fits: S_e = 0.0587 + 0.8543 R0 +
    0.0870 R0^2 and S_i = 1 - (0.9413 - 0.8543 R0 - 0.0870 R0^2) / n^2.

    S_e's three coefficients are those of an independent implementation of Hapke (2012,
    sec. 6.5) found in public code, not checked against the book. Against the integral
    they fit (eq. 5.36: Fresnel's reflectance averaged over the hemisphere of incidence)
    they hold to 0.006 for n = 1.4-2.5 and k <= 0.05, where `hapke1993_reflections`' R0 +
    0.05 holds to 0.012 (both checked in tests/test_slab.py; neither near n = 1, where
    S_e -> 0). S_i is 1 - (1 - S_e) / n^2, the exact internal average (total reflection
    included) of a clear grain given S_e, also checked there.
    """
    r0 = ((n - 1.0) ** 2 + k**2) / ((n + 1.0) ** 2 + k**2)
    fit = 0.8543 * r0 + 0.0870 * r0**2
    return 0.0587 + fit, 1.0 - (0.9413 - fit) / n**2


surface_reflections = hapke1993_reflections  # a slot: `_backends.slab_twins` binds it


def hapke2001_mean_path_factor(n):
    """<D> / D = (2/3) (n^2 - (n^2 - 1)^(3/2) / n) (Hapke 2001 eq. 9; n >= 1)."""
    n2 = n * n
    excess = maximum(n2 - 1.0, 0.0)
    return (2.0 / 3.0) * (n2 - excess * sqrt(excess) / n)


def lucey1998_mean_path_factor(n):
    """<D> / D = 0.9 (Lucey 1998), whatever n."""
    return 0.9 + 0.0 * n


mean_path_factor = hapke2001_mean_path_factor  # a slot: `_backends.slab_twins` binds it


def transmission_terms(alpha, s, path):
    """(Theta, r_i, q, beta, E) of a slab of mean path `path` [um]: q = sqrt(alpha /
    (alpha + s)), r_i = (1 - q) / (1 + q), beta = sqrt(alpha (alpha + s)) = q (alpha + s),
    E = exp(-beta path) and Theta = (r_i + E) / (1 + r_i E) (Theta = exp(-alpha path) at
    s = 0). alpha = s = 0 gives q = 1 (a transparent grain: Theta = 1)."""
    total = alpha + s
    positive = total > 0.0
    ratio = where(positive, alpha / where(positive, total, 1.0), 1.0)
    q = sqrt(maximum(ratio, RATIO_FLOOR))
    r_i = (1.0 - q) / (1.0 + q)
    beta = q * total
    e = exp(-beta * path)
    return (r_i + e) / (1.0 + r_i * e), r_i, q, beta, e


def slab_albedo(n, k, wavelength, grain_size, s, npfe, n_iron, k_iron, host_density, extra_alpha):
    """w = S_e + (1 - S_e)(1 - S_i) Theta / (1 - S_i Theta) of the equivalent slab.

    Args (scalars): n, k the host's refractive index; wavelength [um]; grain_size D
    [um]; s internal scattering [1/um]; npfe the nanophase iron mass fraction; n_iron,
    k_iron iron's refractive index at this wavelength; host_density [g/cm^3] (only
    multiplies npfe); extra_alpha a further absorption coefficient [1/um] (0: none).
    """
    s_e, s_i = surface_reflections(n, k)
    alpha = (
        absorption_coefficient(k, wavelength)
        + npfe * npfe_absorption_coefficient(n, wavelength, n_iron, k_iron, host_density)
        + extra_alpha
    )
    theta = transmission_terms(alpha, s, mean_path_factor(n) * grain_size)[0]
    return s_e + (1.0 - s_e) * (1.0 - s_i) * theta / (1.0 - s_i * theta)


def slab_band_terms(n, k, wavelength, n_iron, k_iron, host_density):
    """(S_e, S_i, alpha_host [1/um], dalpha/df [1/um], <D>/D): the terms of
    `slab_albedo_and_slopes` that depend on the host and the band only, not on the grain
    size, the iron fraction or `extra_alpha` (computed once per band and endmember by the
    unmixing kernels)."""
    s_e, s_i = surface_reflections(n, k)
    alpha_per_f = npfe_absorption_coefficient(n, wavelength, n_iron, k_iron, host_density)
    return (
        s_e,
        s_i,
        absorption_coefficient(k, wavelength),
        alpha_per_f,
        mean_path_factor(n),
    )


def slab_albedo_and_slopes(
    n, k, wavelength, grain_size, s, npfe, n_iron, k_iron, host_density, extra_alpha
):
    """(w, dw/dD [1/um], dw/df, dw/dalpha [um]): `slab_albedo` and its derivatives in
    grain size, in the nanophase iron mass fraction and in the absorption coefficient
    (for `extra_alpha`'s own parameters): `slab_slopes_from_terms` of `slab_band_terms`."""
    band = slab_band_terms(n, k, wavelength, n_iron, k_iron, host_density)
    return slab_slopes_from_terms(band, grain_size, s, npfe, extra_alpha)


def slab_slopes_from_terms(band, grain_size, s, npfe, extra_alpha):
    """`slab_albedo_and_slopes` from its band's terms `band` (`slab_band_terms`), by the
    chain rule through Theta(E, r_i):

    dTheta/dE = (1 - r_i^2) / (1 + r_i E)^2, dTheta/dr_i = (1 - E^2) / (1 + r_i E)^2,
    dE/dD = -beta m E (m = <D>/D), dE/dalpha = -<D> E dbeta/dalpha with
    dbeta/dalpha = q + s / (2 q (alpha + s)), dr_i/dalpha = -2/(1+q)^2 dq/dalpha with
    dq/dalpha = s / (2 q (alpha + s)^2), and dalpha/df = `npfe_absorption_coefficient`.
    """
    s_e, s_i, alpha_host, alpha_per_f, factor = band
    alpha = alpha_host + npfe * alpha_per_f + extra_alpha
    path = factor * grain_size
    theta, r_i, q, beta, e = transmission_terms(alpha, s, path)
    w = s_e + (1.0 - s_e) * (1.0 - s_i) * theta / (1.0 - s_i * theta)
    dw_dtheta = (1.0 - s_e) * (1.0 - s_i) / (1.0 - s_i * theta) ** 2
    denominator = (1.0 + r_i * e) ** 2
    dtheta_de = (1.0 - r_i * r_i) / denominator
    dtheta_dri = (1.0 - e * e) / denominator
    total = alpha + s
    safe_total = where(total > 0.0, total, 1.0)
    dq_dalpha = where(total > 0.0, s / (2.0 * q * safe_total * safe_total), 0.0)
    dbeta_dalpha = q + dq_dalpha * total
    dtheta_dalpha = dtheta_de * (-path * e * dbeta_dalpha) + dtheta_dri * (
        -2.0 / (1.0 + q) ** 2 * dq_dalpha
    )
    dw_dd = dw_dtheta * dtheta_de * (-beta * factor * e)
    dw_dalpha = dw_dtheta * dtheta_dalpha
    return w, dw_dd, dw_dalpha * alpha_per_f, dw_dalpha
