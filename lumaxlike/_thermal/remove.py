"""`remove_thermal`: the temperature of every pixel and its thermally corrected
reflectance, and `ThermalResult`."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
from jaxtyping import Float
from scipy import special

from .._inverse.albedo.invert import albedo_bounds, invert, solver_chunk_pixels
from .._io.read.radiance import SolarSpectrum, band_irradiance, load_solar_spectrum
from .._model.thermal import C1, C2
from .._params import HapkeParams
from .._shapes import check_choice
from .._status import Status
from .._validation import wavelengths_um
from . import emissivity
from .prior_solvers import COLUMNS, solve_prior
from .rules import T_SCALE
from .solvers import solve_bands, solve_thermal
from .upper_limit import UPPER_LIMIT_CHI2, upper_limit

# The emission's significance test (`_emission_significant`): a pixel's T is CONVERGED
# only where the fit with emission beats the fit without it (T held at T_NULL, where the
# emission in any window short of 3 um is < 1e-15 of r) by more than the rise noise
# alone exceeds with probability FALSE_ALARM (nominal; the measured rate of cold pixels
# called CONVERGED is in docs/thermal.md: T's freedom to pick the noise's best shape
# makes the rate above nominal)
FALSE_ALARM = 3e-4
T_NULL = 100.0 / T_SCALE
# [um]: band centres this close outside a window's (or prior_reference's) ends are in it
WAVELENGTH_TOLERANCE = 1e-5

__all__ = ["DEFAULT_WINDOW", "METHODS", "ThermalResult", "remove_thermal", "solar_per_band"]

METHODS = ("continuum", "given", "prior")
DEFAULT_WINDOW = (2.3, 2.65)  # [um]: short of the 3 um hydration band's wing (~2.7 um)
# [um]: method="prior"'s reference bands, whose w is continued into the window: long of
# the 1 um band's wing, where emission is weak (at 400 K ~2 % of r at 2 um, 0.5 % at
# 1.8 um: removed at the fitted T, `PRIOR_PASSES`)
DEFAULT_PRIOR_REFERENCE = (1.55, 2.0)
PRIOR_PASSES = 3  # prior fits, the reference bands' emission removed after each (T to ~0.01 K)
# [w]: method="prior"'s default 1-sigma of w about the prior: lunar soils' w departs from
# a line continued from 1.55-2 um to 2.65 um by ~0.01-0.02 (the continuum's curvature,
# the wing of the 3 um band); 0.02 lets each band's w move that far, and still holds the
# window's w close enough (9 bands) that T is bound to a few K at 375 K, 0.5 % noise
DEFAULT_PRIOR_SIGMA = 0.02
# pixels per call of the JAX solvers (the correction solves pixels x bands problems, each
# with its own state); the numba solvers' chunks are `invert`'s (`solver_chunk_pixels`)
CHUNK = 4096
# the window problems' per-pixel entries (the others are per band, or one value)
PER_PIXEL = (
    "to_sun",
    "to_sensor",
    "normal",
    "coefficients",
    "distance",
    "theta",
    "observed",
    "weight",
)


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


def solar_per_band(solar_spectrum, wavelengths: np.ndarray) -> np.ndarray:
    if isinstance(solar_spectrum, (str, os.PathLike)):
        solar_spectrum = load_solar_spectrum(solar_spectrum)
    if isinstance(solar_spectrum, SolarSpectrum):
        return band_irradiance(solar_spectrum, wavelengths)
    solar = np.asarray(solar_spectrum, dtype=np.float64)
    if solar.shape != wavelengths.shape or not np.all(np.isfinite(solar) & (solar > 0)):
        raise ValueError(
            "solar_spectrum must be a path, a SolarSpectrum or positive irradiances "
            f"[W m^-2 um^-1] at 1 au, one per band {wavelengths.shape}, got {solar.shape}"
        )
    return solar


def _unit(name: str, vectors, pixels: tuple) -> np.ndarray:
    """Unit vectors (n, 3) from shape ``pixels + (3,)`` or ``(3,)``."""
    vectors = np.asarray(vectors, dtype=np.float64)
    try:
        array = np.broadcast_to(vectors, pixels + (3,)).reshape(-1, 3)
    except ValueError:
        raise ValueError(
            f"{name} must have shape pixels + (3,) = {pixels + (3,)} or (3,), got {vectors.shape}"
        ) from None
    return array / np.linalg.norm(array, axis=-1, keepdims=True)


def _check(refl, wavelengths, method, temperature, window, solver):
    check_choice("method", method, METHODS)
    check_choice("solver", solver, ("jax", "numba"))
    if wavelengths.ndim != 1 or wavelengths.shape[0] != refl.shape[-1]:
        raise ValueError(f"wavelengths must have one value per band ({refl.shape[-1]})")
    if not np.all(np.diff(wavelengths) > 0):
        raise ValueError("wavelengths must increase")
    if method == "given" and temperature is None:
        raise ValueError('method="given" needs temperature (an array of T [K] per pixel)')
    if method in ("continuum", "prior"):
        inside = within(wavelengths, window)
        if inside.sum() < 4:
            raise ValueError(f"window={window!r} holds {inside.sum()} bands; the fit needs 4")
        return inside
    return None


def within(wavelengths: np.ndarray, limits) -> np.ndarray:
    """The bands [um] inside (shortest, longest) [um], each end widened by
    `WAVELENGTH_TOLERANCE` (a float32 band centre of 2.30 um is 2.2999999523)."""
    return (wavelengths >= limits[0] - WAVELENGTH_TOLERANCE) & (
        wavelengths <= limits[1] + WAVELENGTH_TOLERANCE
    )


def check_temperature_settings(method, temperature, bounds, max_sigma) -> None:
    """`remove_thermal`'s (and the front ends') temperature arguments, checked: raises
    ValueError naming the argument. ``temperature`` (T [K] for "given" only, a scalar or
    an array: positive, a scalar finite; NaN in an array marks that pixel
    NONFINITE_INPUT), ``temperature_bounds`` (0 < lowest < highest, finite) and
    ``max_temperature_sigma`` (positive, not NaN)."""
    if temperature is not None:
        if method != "given":
            raise ValueError(
                f'temperature is for method="given" only (method={method!r} fits T); '
                "give one or the other"
            )
        values = np.asarray(temperature, dtype=np.float64)
        bad = (values <= 0) | np.isinf(values) | (np.isnan(values) & (values.ndim == 0))
        if np.any(bad):
            raise ValueError(
                f"temperature must be positive and finite [K], got {values[bad].ravel()[0]!r}"
            )
    low, high = (float(b) for b in bounds)
    if not (np.isfinite(low) and np.isfinite(high) and 0 < low < high):
        raise ValueError(
            f"temperature_bounds must be (lowest, highest) [K], 0 < lowest < highest, got {bounds!r}"
        )
    if not float(max_sigma) > 0:
        raise ValueError(f"max_temperature_sigma must be positive [K], got {max_sigma!r}")


def _distance(solar_distance, pixels) -> np.ndarray:
    """The Sun's distance [au] per pixel (flat), checked: positive and finite."""
    distance = np.broadcast_to(np.asarray(solar_distance, dtype=np.float64), pixels).ravel()
    if not np.all(np.isfinite(distance) & (distance > 0)):
        raise ValueError(f"solar_distance must be positive and finite [au], got {solar_distance!r}")
    return distance


def _check_prior(refl, wavelengths, refl_sigma, prior, inside):
    """method="prior"'s arguments, checked: (prior_sigma, the reference bands (a boolean
    mask) or None, the prior spectrum (pixels, bands) or None)."""
    sigma, reference, albedo = prior
    if refl_sigma is None:
        raise ValueError('method="prior" needs refl_sigma: it weighs the data against the prior')
    if not (np.isfinite(sigma) and sigma > 0):
        raise ValueError(f"prior_sigma must be positive and finite [w], got {sigma!r}")
    if albedo is not None:
        try:
            albedo = np.broadcast_to(np.asarray(albedo, np.float64), refl.shape)
        except ValueError:
            raise ValueError(
                f"prior_albedo must have shape pixels + (bands,) or (bands,), got {np.shape(albedo)}"
            ) from None
        return sigma, None, albedo.reshape(-1, refl.shape[-1])
    mask = within(wavelengths, reference)
    if mask.sum() < 2 or wavelengths[mask].max() >= wavelengths[inside].min():
        raise ValueError(
            f"prior_reference={reference!r} must hold 2 bands or more, all short of the window"
        )
    return sigma, mask, None


def _covariance_tt(jtj: np.ndarray) -> np.ndarray:
    """(J^T J)^-1's (t, t) entry from the 6 entries (pixels, 6); inf where singular."""
    j00, j01, j02, j11, j12, j22 = jtj.T
    c22 = j00 * j11 - j01 * j01
    det = (
        j00 * (j11 * j22 - j12 * j12)
        - j01 * (j01 * j22 - j02 * j12)
        + j02 * (j01 * j12 - j02 * j11)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        value = c22 / det
    return np.where((det > 0) & (value > 0), value, np.inf)


def _brightness_start(observed, wavelengths, solar, arrays, bounds):
    """The fit's starting T [K]: the brightness temperature of the window's longest band's
    excess over its shortest (emission grows ~exponentially across the window, the
    continuum barely; eps taken as 1), clipped to [200, 600] K (300 K without an excess),
    then to `bounds` (lowest, highest) [K]."""
    excess = (observed[:, -1] - observed[:, 0]) * solar[-1] / arrays["distance"] ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        temperature = C2 / wavelengths[-1] / np.log1p(C1 / wavelengths[-1] ** 5 / excess)
    start = np.where(excess > 0, np.clip(np.nan_to_num(temperature, nan=300.0), 200, 600), 300.0)
    return np.clip(start, bounds[0], bounds[1])


def _window_problems(arrays, observed, w_first, spectral, bounds):
    """The continuum fit's problems over the window (a dict for `solve_thermal`); w_first:
    the start's w at the window's first band (pixels,)."""
    wavelengths, solar, sigma, inside = spectral
    first = np.flatnonzero(inside)[0]
    a0 = np.where(np.isfinite(w_first), np.clip(w_first, 0.01, 0.99), 0.2)
    t0 = _brightness_start(observed[:, inside], wavelengths[inside], solar[inside], arrays, bounds)
    problems = dict(arrays)
    problems.update(
        theta=np.stack([a0, 0.0 * a0, t0 / T_SCALE], axis=-1),
        wavelength=wavelengths[inside],
        solar=solar[inside],
        observed=observed[:, inside],
        weight=np.broadcast_to(1.0 / sigma[inside], observed[:, inside].shape),
        reference=wavelengths[first],
    )
    return problems


def _fit_temperature(problems, estimate, bounds, max_sigma, settings):
    """(T [K], its 1-sigma [K], status, the solver's output) of each pixel by the
    continuum fit."""
    t_low, t_high = bounds[0] / T_SCALE, bounds[1] / T_SCALE
    out = solve_thermal(
        settings["params"],
        problems,
        (1.0, 1.0, 1.0),
        (t_low, t_high, settings["tol"], settings["max_iter"]),
        settings["solver"],
    )
    variance = _covariance_tt(out[:, 4:10])
    if estimate:
        variance = variance * out[:, 3] / (problems["observed"].shape[1] - 3)
    t_sigma = np.sqrt(variance) * T_SCALE
    status = np.where(out[:, 10] == 0, Status.CONVERGED, Status.MAX_ITER)
    converged = status == Status.CONVERGED
    on_bound = (out[:, 2] <= t_low) | (out[:, 2] >= t_high)
    status = np.where(on_bound & converged, Status.UNREACHABLE, status)
    # too cold to bound T: its sigma is large, and the cost so flat in T that the fit
    # may also end on the lower bound or take max_iter steps there
    status = np.where(~(t_sigma <= max_sigma), Status.NOT_CONSTRAINED, status)
    return out[:, 2] * T_SCALE, t_sigma, status.astype(np.int8), out


def _profiled_cost(problems, out, active, t, settings):
    """The cost of the pixels `active` (indices into `problems`' and `out`'s rows) with
    t = T / T_SCALE held at `t` and (a, b) fitted from the fit's `out`."""
    bounds = settings["bounds"]
    limits = (bounds[0] / T_SCALE, bounds[1] / T_SCALE, settings["tol"], settings["max_iter"])
    # JAX: every pixel each time (one shape, one compilation; the others' values unused)
    subset = active if settings["solver"] == "numba" else np.arange(len(out))
    fixed = {k: (v[subset] if k in PER_PIXEL else v) for k, v in problems.items()}
    t_all = out[:, 2].copy()
    t_all[active] = t
    fixed["theta"] = np.stack([out[subset, 0], out[subset, 1], t_all[subset]], axis=-1)
    cost = solve_thermal(settings["params"], fixed, (1.0, 1.0, 0.0), limits, settings["solver"])
    return cost[:, 3] if settings["solver"] == "numba" else cost[active, 3]


def _upper_limit(problems, out, estimate, bounds, settings):
    """T's one-sided 95 % upper limit [K] of each pixel (`upper_limit`)."""
    n_bands = problems["observed"].shape[1]
    scale = out[:, 3] / (n_bands - 3) if estimate else np.ones(len(out))
    return upper_limit(
        lambda active, t: _profiled_cost(problems, out, active, t, settings),
        out,
        UPPER_LIMIT_CHI2 * scale,
        _covariance_tt(out[:, 4:10]),
        bounds[1] / T_SCALE,
        problems["wavelength"][-1],
    )


def _continuum(arrays, observed, w_first, spectral, estimate, bounds, max_sigma, settings):
    """(T [K], 1-sigma [K], status) by the continuum fit; NOT_CONSTRAINED pixels (T's
    sigma above `max_sigma`, or emission not significant: `_emission_significant`) get
    T's 95 % upper limit and a NaN sigma."""
    problems = _window_problems(arrays, observed, w_first, spectral, bounds)
    inside = spectral[3]
    temp, tsig, status, out = _fit_temperature(problems, estimate, bounds, max_sigma, settings)
    tested = np.flatnonzero(status == Status.CONVERGED)
    if tested.size:
        null = _profiled_cost(problems, out, tested, np.full(tested.size, T_NULL), settings)
        significant = _emission_significant(
            null - out[tested, 3], out[tested, 3], inside.sum() - 3, estimate
        )
        status[tested[~significant]] = Status.NOT_CONSTRAINED
    loose = np.flatnonzero(status == Status.NOT_CONSTRAINED)
    if loose.size:
        subset = {k: (v[loose] if k in PER_PIXEL else v) for k, v in problems.items()}
        temp[loose] = _upper_limit(subset, out[loose], estimate, bounds, settings)
        tsig[loose] = np.nan
    return temp, tsig, _unbounded_limits(temp, status, bounds)


def _emission_significant(rise, minimum, dof, estimate):
    """Whether the emission is significant: the cost's rise from the fit to no emission
    (T held at `T_NULL`, the other parameters refitted), a likelihood-ratio statistic,
    above its `FALSE_ALARM` point. With refl_sigma known the rise is chi^2 with 1 degree
    of freedom, halved (T's emission is >= 0: a parameter on its boundary, Chernoff
    1954); with refl_sigma estimated (None) the rise over the residual's variance
    (minimum / dof) is F(1, dof), halved alike: at 9 bands (dof 6) the threshold is
    43.1, 3.7x the known-sigma one (11.8): the price of a variance estimated from 6
    residuals (fewer warm pixels at 350 K pass: docs/thermal.md)."""
    if not estimate:  # P(chi^2_1 > z^2) = 2 P(N(0, 1) > z)
        return rise >= special.ndtri(1.0 - FALSE_ALARM) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(minimum > 0, rise * dof / minimum, np.where(rise > 0, np.inf, 0.0))
    return ratio >= special.stdtrit(dof, 1.0 - FALSE_ALARM) ** 2  # F(1, dof) = t_dof^2


def _unbounded_limits(temperature, status, bounds):
    """`status` with UNREACHABLE where a NOT_CONSTRAINED pixel's upper limit reached the
    upper bound of T (the data do not bound T within `temperature_bounds`)."""
    # the search returns the bound as t_high * T_SCALE: equal to it but for rounding
    reached = (status == Status.NOT_CONSTRAINED) & (temperature >= bounds[1] * (1 - 1e-12))
    return np.where(reached, Status.UNREACHABLE, status).astype(np.int8)


def _prior_means(observed, arrays, spectral, settings, temperature):
    """The prior's w of each window band (pixels, window bands): the line fitted by least
    squares to the w of the reference bands, continued; their w is `invert`'s where
    `temperature` is None, else that with the emission at `temperature` [K] removed
    (`_correct`; NaN: none)."""
    wavelengths, solar, _, inside = spectral
    reference = settings["prior"][1]
    if temperature is None:
        vectors = (arrays["to_sun"], arrays["to_sensor"], arrays["normal"])
        w = invert(observed[:, reference], *vectors, settings["params"], settings["solver"]).w
    else:
        w = _correct(
            arrays,
            observed[:, reference],
            temperature,
            wavelengths[reference],
            solar[reference],
            settings,
        )[0]
    x = wavelengths[reference] - wavelengths[reference].mean()
    slope = (w * x).sum(axis=1) / (x * x).sum()
    at = wavelengths[inside] - wavelengths[reference].mean()
    return w.mean(axis=1)[:, None] + slope[:, None] * at


def _prior(arrays, observed, mean, spectral, settings):
    """(T [K], 1-sigma [K], status) by the prior fit (`prior_rules`); NOT_CONSTRAINED
    pixels get T's 95 % upper limit (the cost profiled over every w_b) and a NaN sigma."""
    wavelengths, solar, sigma, inside = spectral
    bounds = settings["bounds"]
    limits = (bounds[0] / T_SCALE, bounds[1] / T_SCALE, settings["tol"], settings["max_iter"])
    problems = dict(arrays)
    problems.update(
        t=_brightness_start(observed[:, inside], wavelengths[inside], solar[inside], arrays, bounds)
        / T_SCALE,
        w=np.clip(np.nan_to_num(mean, nan=0.2), 0.01, 0.99),
        mean=mean,
        wavelength=wavelengths[inside],
        solar=solar[inside],
        observed=observed[:, inside],
        weight=np.broadcast_to(1.0 / sigma[inside], observed[:, inside].shape),
    )
    inverse = 1.0 / settings["prior"][0]
    out = solve_prior(settings["params"], problems, (inverse, 1.0), limits, settings["solver"])
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = np.where(out[:, 2] > 0, 1.0 / out[:, 2], np.inf)
    t_sigma = np.sqrt(variance) * T_SCALE
    status = np.where(out[:, 3] == 0, Status.CONVERGED, Status.MAX_ITER)
    on_bound = (out[:, 0] <= limits[0]) | (out[:, 0] >= limits[1])
    status = np.where(on_bound & (status == Status.CONVERGED), Status.UNREACHABLE, status)
    status = np.where(~(t_sigma <= settings["max_sigma"]), Status.NOT_CONSTRAINED, status)
    # no significance test here (`_continuum`'s): T's posterior sigma, which the prior
    # holds wide, called no cold pixel CONVERGED in 1200 (250-300 K, 0.5 % noise), and
    # the test would cost a third of the pixels at 350 K (docs/thermal.md)
    temperature = out[:, 0] * T_SCALE
    loose = np.flatnonzero(status == Status.NOT_CONSTRAINED)
    if loose.size:
        temperature[loose] = _prior_upper_limit(problems, out, loose, variance, settings)
        t_sigma[loose] = np.nan
    return temperature, t_sigma, _unbounded_limits(temperature, status, bounds)


def _prior_passes(chunk, arrays, observed, spectral, settings):
    """(T, 1-sigma, status) of method="prior": with a given prior spectrum, one fit;
    else `PRIOR_PASSES` fits, each after the first with the reference bands' w freed of
    the emission at the previous fit's T (a warm surface's emission is ~2 % of r at 2 um
    at 400 K: left in, it steepens the prior's line and lowers T by ~1 K)."""
    albedo = settings["prior"][2]
    if albedo is not None:
        return _prior(arrays, observed, albedo[chunk][:, spectral[3]], spectral, settings)
    removed = None
    for _ in range(PRIOR_PASSES):
        mean = _prior_means(observed, arrays, spectral, settings, removed)
        temperature, t_sigma, status = _prior(arrays, observed, mean, spectral, settings)
        unsolved = np.isin(status, [Status.NOT_CONSTRAINED, Status.UNREACHABLE])
        removed = np.where(unsolved, np.nan, temperature)
    return temperature, t_sigma, status


def _prior_profiled_cost(problems, out, rows, t, settings):
    """The prior fit's cost of the pixels `rows` with t = T / T_SCALE held at `t` and every
    w_b fitted from the fit's `out`."""
    per_pixel = PER_PIXEL + ("t", "w", "mean")
    fixed = {k: (v[rows] if k in per_pixel else v) for k, v in problems.items()}
    fixed["t"], fixed["w"] = t, out[rows, COLUMNS:]
    bounds = settings["bounds"]
    limits = (bounds[0] / T_SCALE, bounds[1] / T_SCALE, settings["tol"], settings["max_iter"])
    inverse = 1.0 / settings["prior"][0]
    solved = solve_prior(settings["params"], fixed, (inverse, 0.0), limits, settings["solver"])
    return solved[:, 1]


def _prior_upper_limit(problems, out, loose, variance, settings):
    """T's one-sided 95 % upper limit [K] of the pixels `loose` (`upper_limit`, each
    profiled fit one prior fit with t held)."""
    rows = np.zeros((loose.size, 4))
    rows[:, 2], rows[:, 3] = out[loose, 0], out[loose, 1]
    return upper_limit(
        lambda active, t: _prior_profiled_cost(problems, out, loose[active], t, settings),
        rows,
        np.full(loose.size, UPPER_LIMIT_CHI2),
        variance[loose],
        settings["bounds"][1] / T_SCALE,
        problems["wavelength"][-1],
    )


def _correct(arrays, observed, temperature, wavelengths, solar, settings, into=None):
    """(w, corrected r, emission) of every band at the pixels' T (pixels, bands each),
    written into `into` (three C-contiguous float64 arrays) or new arrays; T NaN: nothing
    removed (`invert`'s w)."""
    problems = dict(arrays, observed=observed, temperature=temperature)
    problems.update(wavelength=wavelengths, solar=solar)
    bounds = albedo_bounds(np.float64)
    w, reflectance, emission = into or tuple(np.empty(observed.shape) for _ in range(3))
    solve_bands(
        settings["params"],
        problems,
        (*bounds, settings["tol"], settings["max_iter"]),
        settings["solver"],
        out=(w, emission, reflectance),
    )
    # a band no w in (0, 1) fits ends on a bound of w: NaN, as `invert`'s UNREACHABLE
    failed = (w <= bounds[0]) | (w >= bounds[1])
    for values in (w, reflectance, emission):
        values[failed] = np.nan
    return w, reflectance, emission


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
    method: str = "continuum",
    temperature=None,
    window: tuple[float, float] = DEFAULT_WINDOW,
    refl_sigma=None,
    solver: str = "jax",
    temperature_bounds: tuple[float, float] = (100.0, 1000.0),
    max_temperature_sigma: float = 10.0,
    max_iter: int = 100,
    tol: float = 1e-10,
    prior_sigma: float = DEFAULT_PRIOR_SIGMA,
    prior_reference: tuple[float, float] = DEFAULT_PRIOR_REFERENCE,
    prior_albedo=None,
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
    upper limit
    (where the chi^2 profiled over a and b has risen by 2.706) and is left uncorrected,
    since removing the emission of an unknown T could over-correct it by far more than the
    emission it has (at most that of the upper limit). See docs/thermal.md.

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
        method: ``"continuum"``, ``"prior"`` or ``"given"``.
        temperature: T [K] per pixel (shape ``pixels`` or a scalar), for "given" only:
            positive (NaN in a map: that pixel NONFINITE_INPUT).
        window: (shortest, longest) wavelength [um] of the bands the fit uses (ends
            widened by 1e-5 um: float32 centres stay in): at least 4 bands, short of the
            3 um hydration band.
        refl_sigma: 1-sigma of refl [1/sr], scalar or per band; None: estimated from each
            pixel's residual (chi^2 / (n - 3)), and the significance test is then an F
            test, weaker (docs/thermal.md); required by "prior".
        solver: ``"jax"`` or ``"numba"``.
        temperature_bounds: (lowest, highest) T [K] of the fit.
        max_temperature_sigma: T's 1-sigma [K] above which a pixel is NOT_CONSTRAINED.
        max_iter: Levenberg-Marquardt steps at most.
        tol: step tolerance (in w, and in T / 100 K).
        prior_sigma: "prior"'s 1-sigma of each band's w about its prior (see docs).
        prior_reference: "prior"'s (shortest, longest) wavelength [um] of the bands whose
            w's line is continued into the window (>= 2 bands, short of the window).
        prior_albedo: "prior"'s w per band instead, ``(bands,)`` or ``pixels + (bands,)``.

    Returns:
        `ThermalResult`.

    Raises:
        ValueError: naming the argument: unknown method or solver, shapes, a window with
            fewer than 4 bands, "given" without temperature, temperature not positive
            and finite or given with another method, temperature_bounds not 0 < lowest
            < highest, solar_distance not positive and finite, max_temperature_sigma not
            positive, bad solar_spectrum.
    """
    refl = np.asarray(refl, dtype=np.float64)
    wavelengths = wavelengths_um("wavelengths", wavelengths)
    inside = _check(refl, wavelengths, method, temperature, window, solver)
    check_temperature_settings(method, temperature, temperature_bounds, max_temperature_sigma)
    prior = (prior_sigma, prior_reference, prior_albedo)
    if method == "prior":
        prior = _check_prior(refl, wavelengths, refl_sigma, prior, inside)
    pixels, n_bands = refl.shape[:-1], refl.shape[-1]
    flat = refl.reshape(-1, n_bands)
    vectors = (to_sun, to_sensor, normal)
    distance = _distance(solar_distance, pixels)
    geometry, cos_e, status = _geometry_and_status(flat, vectors, pixels, inside)
    solar, sigma = solar_per_band(solar_spectrum, wavelengths), _band_sigma(refl_sigma, n_bands)
    spectral = (wavelengths, solar, sigma, inside)
    geometry["distance"] = distance
    settings: dict = dict(params=params, solver=solver, max_iter=max_iter, tol=tol)
    settings.update(method=method, estimate=refl_sigma is None, bounds=temperature_bounds)
    settings.update(max_sigma=max_temperature_sigma, prior=prior)
    if method == "given":
        settings["given"] = np.broadcast_to(np.asarray(temperature, float), pixels).reshape(-1)
        nonfinite = np.isnan(settings["given"]) & (status == Status.CONVERGED)
        status[nonfinite] = Status.NONFINITE_INPUT
    outputs = _solve_pixels(flat, (geometry, cos_e), spectral, settings, status)
    shapes = dict.fromkeys(("temperature", "temperature_sigma"), pixels)
    return ThermalResult(
        status=status.reshape(pixels),
        **{k: v.reshape(shapes.get(k, refl.shape)) for k, v in outputs.items()},
    )


def _solve_pixels(flat, geometry_and_cos_e, spectral, settings, status) -> dict:
    """The outputs (`ThermalResult`'s fields but status, flat) of the pixels still
    CONVERGED in `status` (to be solved), by chunks (`CHUNK` for JAX, `invert`'s for
    numba); the others' are NaN. Allocated without a fill: every value is written once."""
    geometry, cos_e = geometry_and_cos_e
    outputs = {k: np.empty(flat.shape[:1]) for k in ("temperature", "temperature_sigma")}
    outputs.update({k: np.empty(flat.shape) for k in ("w", "reflectance", "emission")})
    unsolved = status != Status.CONVERGED
    for value in outputs.values():
        value[unsolved] = np.nan
    good = np.flatnonzero(~unsolved)
    if not good.size:
        return outputs
    params, solver = settings["params"], settings["solver"]
    table = emissivity.cached_emissivity_table(
        (cos_e[good].min(), cos_e[good].max()), params, solver
    )
    size = solver_chunk_pixels(solver, flat.shape[1], np.float64) if solver == "numba" else CHUNK
    for indices in np.array_split(good, -(-good.size // size)):
        chunk = _rows(indices)
        arrays = {k: v[chunk] for k, v in geometry.items()}
        arrays["coefficients"] = emissivity.pixel_coefficients(cos_e[chunk], table)
        _solve_chunk(chunk, arrays, flat[chunk], spectral, settings, status, outputs)
    return outputs


def _rows(indices: np.ndarray):
    """A slice of the flat arrays for consecutive `indices` (views, copies without a
    gather), else `indices`."""
    if indices[-1] - indices[0] + 1 == indices.size:
        return slice(int(indices[0]), int(indices[-1]) + 1)
    return indices


def _band_sigma(refl_sigma, n_bands: int) -> np.ndarray:
    """refl_sigma per band [1/sr] (1 for None), checked."""
    sigma = np.broadcast_to(
        np.asarray(1.0 if refl_sigma is None else refl_sigma, dtype=np.float64), (n_bands,)
    )
    if not np.all(np.isfinite(sigma) & (sigma > 0)):
        raise ValueError(f"refl_sigma must be positive and finite [1/sr], got {refl_sigma!r}")
    return sigma


def _geometry_and_status(flat, vectors, pixels, inside):
    """The unit vectors (n, 3) by name, cos e (n,), and the status (n,) int8: CONVERGED
    (to be solved), INVALID_GEOMETRY, NONFINITE_INPUT (over the window's bands) or
    UNREACHABLE (a window band r <= 0; for "given", every band)."""
    names = ("to_sun", "to_sensor", "normal")
    geometry = {k: _unit(k, v, pixels) for k, v in zip(names, vectors)}
    cos_i = np.sum(geometry["to_sun"] * geometry["normal"], axis=-1)
    cos_e = np.sum(geometry["to_sensor"] * geometry["normal"], axis=-1)
    valid_geometry = (cos_i > 0) & (cos_e > 0)
    finite = np.all(np.isfinite(flat[:, inside] if inside is not None else flat), axis=-1)
    # no r <= 0 in the fit's window (every band for "given"): UNREACHABLE, as `invert`'s
    # bands (the model's r and emission are positive)
    used = flat[:, inside] if inside is not None else flat
    reachable = np.any(used > 0, axis=-1) if inside is None else np.all(used > 0, axis=-1)
    status = np.where(valid_geometry, Status.CONVERGED, Status.INVALID_GEOMETRY)
    status = np.where(valid_geometry & ~reachable, Status.UNREACHABLE, status)
    status = np.where(valid_geometry & ~finite, Status.NONFINITE_INPUT, status).astype(np.int8)
    return geometry, cos_e, status


def _solve_chunk(chunk, arrays, observed, spectral, settings, status, outputs):
    """T (by the continuum fit or given) and the correction of the pixels `chunk` (indices
    into the flat outputs, or a slice; arrays: their problem arrays, observed their r); writes
    `status` and `outputs` there."""
    wavelengths, solar, _, inside = spectral
    if settings["method"] == "continuum":
        # the continuum's start: invert's w at the window's first band
        first = int(np.flatnonzero(inside)[0])
        vectors = (arrays["to_sun"], arrays["to_sensor"], arrays["normal"])
        w_first = invert(
            observed[:, first : first + 1], *vectors, settings["params"], settings["solver"]
        ).w
        temp, tsig, status[chunk] = _continuum(
            arrays,
            observed,
            w_first[:, 0],
            spectral,
            settings["estimate"],
            settings["bounds"],
            settings["max_sigma"],
            settings,
        )
    elif settings["method"] == "prior":
        temp, tsig, status[chunk] = _prior_passes(chunk, arrays, observed, spectral, settings)
    else:
        temp, tsig = settings["given"][chunk], np.full(observed.shape[0], np.nan)
    # UNREACHABLE: no T within temperature_bounds (on a bound, or no upper limit below
    # the upper one): every output NaN, as `invert`'s
    unreachable = status[chunk] == Status.UNREACHABLE
    temp, tsig = np.where(unreachable, np.nan, temp), np.where(unreachable, np.nan, tsig)
    outputs["temperature"][chunk], outputs["temperature_sigma"][chunk] = temp, tsig
    # NOT_CONSTRAINED: T is an upper limit only; nothing is removed (see docs)
    removed = np.where(status[chunk] == Status.NOT_CONSTRAINED, np.nan, temp)
    names = ("w", "reflectance", "emission")
    views = isinstance(chunk, slice)  # rows of the outputs: written in place
    into = tuple(outputs[k][chunk] if views else np.empty(observed.shape) for k in names)
    _correct(arrays, observed, removed, wavelengths, solar, settings, into)
    for values in into:
        values[unreachable] = np.nan
    # a band of a solved pixel that could not be corrected (NaN where r_obs is finite)
    failed = np.any(np.isnan(into[0]) & np.isfinite(observed), axis=-1)
    band_failed = failed & (status[chunk] == Status.CONVERGED)
    status[chunk] = np.where(band_failed, Status.BAND_FAILED, status[chunk])
    if not views:
        for name, values in zip(names, into):
            outputs[name][chunk] = values
