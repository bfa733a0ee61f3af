"""`remove_thermal`: the temperature of every pixel and its thermally corrected
reflectance, and `ThermalResult`. Its options are `ThermalSettings`'s (`options`); its
arguments are checked in `inputs`, the pixels solved in `pixels`."""

from __future__ import annotations

import dataclasses

import numpy as np
from jaxtyping import Float

from .._declared_options import refuse_unknown, takes_options
from .._inverse.result import _status_counts
from .._params import HapkeParams
from .._status import Status
from .._validation import wavelengths_um
from . import inputs
from .options import ThermalSettings
from .pixels import solve_pixels

__all__ = ["ThermalResult", "remove_thermal"]


@dataclasses.dataclass(frozen=True)
class ThermalResult:
    """The outcome of `remove_thermal` (pixels: refl's shape without its bands axis).

    Attributes:
        temperature: T [K], shape ``pixels``; NaN where not solved (see status); where
            status is NOT_CONSTRAINED, T's one-sided 95 % upper limit (the data bound T
            from above only).
        temperature_sigma: 1-sigma of T [K] (NaN for ``method="given"`` and where
            NOT_CONSTRAINED: a one-sided limit has no symmetric interval).
        status: `Status` codes (int8), shape ``pixels``: of the temperature fit
            (CONVERGED; NOT_CONSTRAINED where T's 1-sigma exceeds `max_temperature_sigma`,
            whether or not the fit converged, or where the emission is not significant
            (docs/thermal.md); MAX_ITER; UNREACHABLE where T ended on a bound, where
            the upper limit of a NOT_CONSTRAINED pixel reached the upper bound, or a
            window band has r <= 0 (for "given": every band): T and every band NaN;
            INVALID_GEOMETRY; NONFINITE_INPUT), then BAND_FAILED where T is CONVERGED
            but some band's w could not be solved (those bands NaN).
        reflectance: thermally corrected r = r(w) [1/sr], shape ``pixels + (bands,)``;
            where NOT_CONSTRAINED, the observed r, uncorrected (no T to remove).
        w: the corrected single-scattering albedo, shape ``pixels + (bands,)`` (where
            NOT_CONSTRAINED, `invert`'s w of the uncorrected r).
        emission: the thermal part eps B d^2 / F [1/sr] removed, ``pixels + (bands,)``
            (0 where NOT_CONSTRAINED).
    """

    temperature: np.ndarray
    temperature_sigma: np.ndarray
    status: np.ndarray
    reflectance: np.ndarray
    w: np.ndarray
    emission: np.ndarray

    def counts(self) -> dict[str, int]:
        """Number of pixels per status name (as the other results' `counts`)."""
        return _status_counts(self.status)


@takes_options(ThermalSettings)
def remove_thermal(
    refl: Float[np.ndarray, "*pixels bands"],  # noqa: F722
    to_sun: Float[np.ndarray, "*pixels 3"],  # noqa: F722
    to_sensor: Float[np.ndarray, "*pixels 3"],  # noqa: F722
    normal: Float[np.ndarray, "*pixels 3"],  # noqa: F722
    wavelengths: Float[np.ndarray, " bands"],  # noqa: F722
    params: HapkeParams,
    *,
    solar_spectrum,
    solar_distance=1.0,
    refl_sigma=None,
    solver: str = "jax",
    max_iter: int = 100,
    tol: float = 1e-10,
    prior_albedo=None,
    settings: ThermalSettings | None = None,
    **options,
) -> ThermalResult:
    """Fit each pixel's temperature and remove its thermal emission from every band.

    The observed r of a warm surface is r(w) + eps(e; w) B_lambda(T) d^2 / F_sun
    (`lumaxlike._model.thermal`; eps = 1 - r_hd of the same Hapke model, Kirchhoff's law).
    ``method="continuum"`` (Clark et al. 2011's assumption): over `window` w is linear in
    wavelength, w = a + b (lambda - window's first band), and (a, b, T) are fitted per
    pixel by Levenberg-Marquardt. ``method="prior"``: T and each window band's w, with a
    Gaussian prior about the line of w continued from shorter bands. ``method="given"``:
    T from outside (a thermophysical model, Bandfield et al. 2018). Then each band's w
    is solved with T fixed, r(w) + eps(w) B d^2 / F = refl, giving the corrected
    reflectance r(w) and w. A pixel too cold for the data to bound T (its 1-sigma above
    `max_temperature_sigma`, or its emission not significant: a likelihood-ratio test
    against no emission, docs/thermal.md) is NOT_CONSTRAINED: it gets T's one-sided 95 %
    upper limit (where the chi^2 profiled over a and b has risen by 2.706) and is left
    uncorrected: removing the emission of an unknown T could over-correct it by far more
    than the emission it has (at most that of the upper limit). See docs/thermal.md.

    Args:
        refl: observed r [1/sr] (I/F / pi), shape ``pixels + (bands,)``.
        to_sun: direction toward the sun (east, north, up), shape ``pixels + (3,)`` or
            ``(3,)`` (as `invert`).
        to_sensor: direction toward the sensor, same rule.
        normal: the surface normal, same rule.
        wavelengths: band centres [um], increasing, shape ``(bands,)``.
        params: the `HapkeParams` of the surface (as for `invert`).
        solar_spectrum: F_sun at 1 au: per-band irradiances [W m^-2 um^-1], shape
            ``(bands,)``, or a solar-spectrum file (M3's ``SOLAR_SPEC.TAB``, read as
            ``--units radiance`` reads it) or `SolarSpectrum`.
        solar_distance: the Sun's distance d [au], a scalar or shape ``pixels``.
        refl_sigma: 1-sigma of refl [1/sr], scalar or per band; None: estimated from each
            pixel's residual (chi^2 / (n - 3)), and the significance test is then an F
            test, weaker (docs/thermal.md); required by "prior".
        solver: ``"jax"`` or ``"numba"``.
        max_iter: Levenberg-Marquardt steps at most.
        tol: step tolerance (in w, and in T / 100 K).
        prior_albedo: "prior"'s w per band instead of its reference bands' line,
            ``(bands,)`` or ``pixels + (bands,)``.
        settings: the options below as one `ThermalSettings` (None: the defaults).
        **options: the options of `ThermalSettings` by name (each there with its unit,
            default and meaning): ``method`` (``"continuum"``, ``"prior"`` or
            ``"given"``), ``temperature`` (T [K] for "given": a number, or a map of shape
            ``pixels``, NaN marking a pixel NONFINITE_INPUT), ``window``,
            ``max_temperature_sigma``, ``temperature_bounds``, ``prior_sigma``,
            ``prior_reference``, ...; None: the default.

    Returns:
        `ThermalResult`.

    Raises:
        ValueError: naming the argument: an option `ThermalSettings` refuses, unknown
            solver, shapes, a window with fewer than `min_window_bands` bands,
            solar_distance not positive and finite, bad solar_spectrum.
        TypeError: a keyword that is no option.
    """
    settings = ThermalSettings.merged(settings, options)
    refuse_unknown("remove_thermal", options)
    refl = np.asarray(refl, dtype=np.float64)
    wavelengths = wavelengths_um("wavelengths", wavelengths)
    inside = inputs.window_of(refl, wavelengths, settings, solver)
    solving = (params, solver, max_iter, tol)
    run = _run(refl, wavelengths, settings, solving, (refl_sigma, prior_albedo, inside))
    pixels, n_bands = refl.shape[:-1], refl.shape[-1]
    flat = refl.reshape(-1, n_bands)
    distance = inputs.distance(solar_distance, pixels)
    vectors = (to_sun, to_sensor, normal)
    geometry, cos_e, status = inputs.geometry_and_status(flat, vectors, pixels, inside)
    solar = inputs.solar_per_band(solar_spectrum, wavelengths)
    spectral = (wavelengths, solar, inputs.band_sigma(refl_sigma, n_bands), inside)
    geometry["distance"] = distance
    if settings.method == "given":
        run["given"] = np.broadcast_to(np.asarray(settings.temperature, float), pixels).reshape(-1)
        nonfinite = np.isnan(run["given"]) & (status == Status.CONVERGED)
        status[nonfinite] = Status.NONFINITE_INPUT
    outputs = solve_pixels(flat, (geometry, cos_e), spectral, run, status)
    shapes = dict.fromkeys(("temperature", "temperature_sigma"), pixels)
    return ThermalResult(
        status=status.reshape(pixels),
        **{k: v.reshape(shapes.get(k, refl.shape)) for k, v in outputs.items()},
    )


def _run(refl, wavelengths, settings: ThermalSettings, solving, data) -> dict:
    """What the chunks read (`solve_pixels`): the model, solver, max_iter and tol
    (`solving`), the method, whether refl_sigma is estimated, the bounds, the largest
    sigma and method="prior"'s inputs (checked); `data`: (refl_sigma, prior_albedo, the
    window's bands)."""
    refl_sigma, prior_albedo, inside = data
    prior = (settings.prior_sigma, settings.prior_reference, prior_albedo)
    if settings.method == "prior":
        prior = inputs.prior_inputs(refl, wavelengths, refl_sigma, settings, prior_albedo, inside)
    params, solver, max_iter, tol = solving
    run: dict = dict(params=params, solver=solver, max_iter=max_iter, tol=tol)
    run.update(method=settings.method, estimate=refl_sigma is None)
    run.update(bounds=settings.temperature_bounds, max_sigma=settings.max_temperature_sigma)
    run["prior"] = prior
    return run
