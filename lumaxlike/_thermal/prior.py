"""``method="prior"``: T and each window band's w of each pixel, w held near the line of
w over the reference bands continued (`prior_fit`), and T's one-sided 95 % upper limit
where the data do not bound it."""

from __future__ import annotations

import numpy as np

from .._inverse.albedo.invert import invert
from .._status import Status
from .correction import correct
from .fit_common import PER_PIXEL, brightness_start, unbounded_limits
from .prior_solvers import COLUMNS, solve_prior
from .rules import T_SCALE
from .upper_limit import UPPER_LIMIT_CHI2, upper_limit

__all__ = ["PRIOR_PASSES", "prior_fit"]

PRIOR_PASSES = 3  # prior fits, the reference bands' emission removed after each (T to ~0.01 K)


def _prior_means(observed, arrays, spectral, settings, temperature):
    """The prior's w of each window band (pixels, window bands): the line fitted by least
    squares to the w of the reference bands, continued; their w is `invert`'s where
    `temperature` is None, else that with the emission at `temperature` [K] removed
    (`correct`; NaN: none)."""
    wavelengths, solar, _, inside = spectral
    reference = settings["prior"][1]
    if temperature is None:
        vectors = (arrays["to_sun"], arrays["to_sensor"], arrays["normal"])
        w = invert(observed[:, reference], *vectors, settings["params"], settings["solver"]).w
    else:
        w = correct(
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
        t=brightness_start(observed[:, inside], wavelengths[inside], solar[inside], arrays, bounds)
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
    # no significance test here (`continuum_fit`'s): T's posterior sigma, which the prior
    # holds wide, called no cold pixel CONVERGED in 1200 (250-300 K, 0.5 % noise), and
    # the test would cost a third of the pixels at 350 K (docs/thermal.md)
    temperature = out[:, 0] * T_SCALE
    loose = np.flatnonzero(status == Status.NOT_CONSTRAINED)
    if loose.size:
        temperature[loose] = _prior_upper_limit(problems, out, loose, variance, settings)
        t_sigma[loose] = np.nan
    return temperature, t_sigma, unbounded_limits(temperature, status, bounds)


def prior_fit(chunk, arrays, observed, spectral, settings):
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
