"""`fit(..., regions=labels, regional=(...))`: the driver of regional fits (`regional`).

The pixels of every region (label >= 0) are evaluated in chunks by the joint solvers for
0 steps (the arrow blocks of the model at a point, in either solver), and the regions'
Levenberg-Marquardt (`regional.solve_regions`) steps them all. Pixels that cannot be
fitted on their own terms (INVALID_GEOMETRY, TOO_FEW_OBSERVATIONS, NONFINITE_INPUT) are
left out of their region; so are pixels labelled negative (TOO_FEW_OBSERVATIONS, with 0
observations counted). A region left with no pixel gets TOO_FEW_OBSERVATIONS.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..._status import Status
from ..fit.observation_masks import masked_chunk
from . import members
from .chunk import chunk_starts, solve_chunk
from .priors import degrees_of_freedom, prior_arrays
from .regional import regional_covariance, solve_regions
from .result import JointFitResult
from .setup import JointSetup

__all__ = ["fit_regional"]


def _labels(regions, pixel_shape):
    labels = np.asarray(regions)
    if labels.shape != pixel_shape:
        raise ValueError(
            f"regions must be a label map of shape pixels = {pixel_shape}, got {labels.shape}"
        )
    if labels.dtype.kind not in "iu":
        if labels.dtype.kind != "f" or not np.all(
            np.isfinite(labels) & (labels == np.round(labels))
        ):
            raise ValueError(f"regions must hold integer labels, got dtype {labels.dtype}")
        labels = labels.astype(np.int64)
    return labels.reshape(-1).astype(np.int64)


def _per_region(values, label, n_regions, name, what):
    """The one value of every region of a per-pixel array (constant within a region)."""
    out = np.full(n_regions, np.nan)
    out[label[::-1]] = values[::-1]  # the first pixel's value
    if not np.all(values == out[label]):
        raise ValueError(f"{what}[{name!r}] of a regional parameter must be one value per region")
    return out


def fit_regional(setup: JointSetup) -> JointFitResult:
    """Solve a regional fit (see the module docstring); returns its `JointFitResult`."""
    n_bands = setup.flat_refl.shape[1]
    labels = _labels(setup.regions, setup.pixel_shape)
    region_labels = np.unique(labels[labels >= 0])
    pixels = np.nonzero(labels >= 0)[0]
    region_of = np.searchsorted(region_labels, labels[pixels])  # (M,) region of each pixel
    p, s, r = len(setup.band_free), len(setup.shared), len(setup.regional)
    gathered = _gather(setup, pixels)
    first_look = (
        _evaluate(setup, gathered, np.arange(len(pixels)), gathered.start_b, gathered.start_sr)
        if len(pixels)
        else None
    )
    status = first_look["status"].copy() if first_look else np.zeros(0, np.int8)
    status[~np.any(gathered.any_finite, axis=1)] = Status.NONFINITE_INPUT
    active = (status == Status.CONVERGED) | (status == Status.MAX_ITER)
    used_regions, label = np.unique(region_of[active], return_inverse=True)
    n_used = len(used_regions)
    start_r, region_prior = _region_starts(setup, gathered, pixels, active, (label, n_used))
    which = np.nonzero(active)[0]
    state = _solve(setup, gathered, which, active, (label, n_used, start_r, region_prior))
    left_out = None
    if state is not None:
        state, which, active, label, left_out = _screen_members(
            setup, gathered, (which, active), (label, n_used, region_prior), state
        )
    pixel = {
        "status": status,
        "values_b": np.full((len(pixels), n_bands, p), np.nan),
        "values_sr": np.full((len(pixels), s + r), np.nan),
        "iterations": np.zeros(len(pixels), np.int32),
        "cost": np.full(len(pixels), np.nan),
        "cov_b": np.full((len(pixels), n_bands, p, p), np.nan),
        "cov_sr": np.full((len(pixels), s + r, s + r), np.nan),
        "cov_x": np.full((len(pixels), n_bands, p, s + r), np.nan),
        "n_valid": gathered.n_valid,
    }
    region = {
        "labels": region_labels,
        "status": np.full(len(region_labels), Status.TOO_FEW_OBSERVATIONS, np.int8),
        "iterations": np.zeros(len(region_labels), np.int32),
        "values": {name: np.full(len(region_labels), np.nan) for name in setup.regional},
        "cost": np.full(len(region_labels), np.nan),
        "sigma": {name: np.full(len(region_labels), np.nan) for name in setup.regional},
    }
    if len(which):
        regions = (label, n_used, used_regions, region_prior)
        _fill_solution(setup, state, which, active, regions, gathered.n_valid, pixel, region)
    if left_out is not None:
        _fill_excluded(left_out, pixel, region, used_regions)
    return _regional_result(setup, pixels, pixel, region)


def _screen_members(setup: JointSetup, gathered: _Gathered, pixels, regions, state):
    """`members`' steps, up to `members.ROUNDS` times: suspects' own fits, the regions
    fitted again from them, and members that do not share their region's values left
    out. pixels = (which, active), regions = (label, n_used, region_prior); returns
    (state, which, active, label, left_out), left_out None or (rows, region of each,
    their own fits)."""
    which, active = pixels
    label, n_used, region_prior = regions
    n_bands = setup.flat_refl.shape[1]
    p, s, r = len(setup.band_free), len(setup.shared), len(setup.regional)
    dof = np.sum(gathered.n_valid[which], axis=1) - (n_bands * p + s)
    assert gathered.masked is not None  # there are region pixels
    floor = members.variance_floor(gathered.masked[0][which], setup.tol)
    weighted = setup.band_sigma is not None
    own: dict = {}  # position in `which` -> that pixel's own fit
    keep = np.ones(len(which), bool)  # not excluded
    for _ in range(members.ROUNDS):
        cost, in_label = state["pixel_cost"], label[keep]
        variance = members.noise_variance(cost, dof[keep], in_label, n_used, floor, weighted)
        suspect = np.zeros(len(which), bool)
        suspect[keep] = members.far_above(cost, variance[in_label], dof[keep], members.P_SUSPECT)
        new = np.array([i for i in np.nonzero(suspect)[0] if i not in own], int)
        if not np.any(suspect):
            break
        if len(new):
            fits = _own_fits(setup, gathered, which[new])
            own.update({i: {k: v[n] for k, v in fits.items()} for n, i in enumerate(new)})
        start_b, start_s = np.array(state["xb"]), np.array(state["xs"])
        for n, i in enumerate(np.nonzero(keep)[0]):
            if suspect[i]:
                start_b[n], start_s[n] = own[i]["xb"], own[i]["xsr"][:s]
        again = (in_label, n_used, state["xr"], region_prior)
        state = _solve(setup, gathered, which[keep], active, again, (start_b, start_s))
        own_cost = np.array([own[i]["cost"] if i in own else np.inf for i in np.nonzero(keep)[0]])
        cost = state["pixel_cost"]
        out = members.excluded(
            cost, own_cost, variance[in_label], in_label, n_used, r, suspect[keep]
        )
        if not np.any(out):
            continue
        kept = ~out
        active = active.copy()
        active[which[keep][out]] = False
        keep[np.nonzero(keep)[0][out]] = False
        again = (label[keep], n_used, state["xr"], region_prior)
        state = _solve(
            setup, gathered, which[keep], active, again, (state["xb"][kept], state["xs"][kept])
        )
    gone = np.nonzero(~keep)[0]
    if not len(gone):
        return state, which, active, label, None
    fits = {k: np.stack([own[i][k] for i in gone]) for k in own[gone[0]]}
    return state, which[keep], active, label[keep], (which[gone], label[gone], fits)


def _own_fits(setup: JointSetup, gathered: _Gathered, rows):
    """The region pixels `rows`' own joint fits (their regional parameters their own),
    the lowest cost of `members.OWN_STARTS` starts: dict of xb, xsr, cost, iterations."""
    from .restarts import GRID_SPAN, start_points

    p = len(setup.band_free)
    names = setup.shared + setup.regional
    lower, upper = setup.lower[p:], setup.upper[p:]
    gridded = [
        j
        for j, name in enumerate(names)
        if np.isfinite(lower[j]) and (np.isfinite(upper[j]) or name in GRID_SPAN)
    ]
    points = start_points(
        members.OWN_STARTS,
        [names[j] for j in gridded],
        lower[gridded],
        upper[gridded],
    )
    best = None
    for point in points:
        xsr = gathered.start_sr[rows].copy()
        for name, value in point.items():
            xsr[:, names.index(name)] = value
        solved = _evaluate(setup, gathered, rows, gathered.start_b[rows], xsr, setup.max_iter)
        fitted = {
            "xb": solved["values_b"],
            "xsr": solved["values_s"],
            "cost": np.where(np.isfinite(solved["cost"]), solved["cost"], np.inf),
            "iterations": solved["iterations"],
        }
        if best is None:
            best = fitted
            continue
        lower_cost = fitted["cost"] < best["cost"]
        for name, value in fitted.items():
            shape = (-1,) + (1,) * (value.ndim - 1)
            best[name] = np.where(lower_cost.reshape(shape), value, best[name])
    assert best is not None
    return best


def _fill_excluded(left_out, pixel, region, used_regions):
    """The excluded pixels' own fits into `pixel`, EXCLUDED there and in their
    regions where these converged (in place)."""
    rows, of_region, own = left_out
    pixel["status"][rows] = Status.EXCLUDED
    pixel["values_b"][rows] = own["xb"]
    pixel["values_sr"][rows] = own["xsr"]
    pixel["cost"][rows] = own["cost"]
    pixel["iterations"][rows] = own["iterations"]
    regions = used_regions[np.unique(of_region)]
    converged = region["status"][regions] == Status.CONVERGED
    region["status"][regions[converged]] = Status.EXCLUDED


class _Gathered(NamedTuple):
    """The region pixels' masked inputs, starts and priors (gathered once), in the
    order of `pixels`; masked and priors None where there is no region pixel."""

    any_finite: np.ndarray  # (M, bands) bool
    start_b: np.ndarray  # (M, bands, p)
    start_sr: np.ndarray  # (M, s + r)
    priors: list | None  # mean_b, weight_b, mean_s, weight_s
    n_valid: np.ndarray  # (M, bands)
    masked: list | None  # refl, to_sun, to_sensor, normal


def _gather(setup: JointSetup, pixels) -> _Gathered:
    """`_Gathered` for the region pixels `pixels` (indices into the flat image)."""
    n_bands = setup.flat_refl.shape[1]
    p, s, r = len(setup.band_free), len(setup.shared), len(setup.regional)
    shared_all = setup.shared + setup.regional
    pieces, finite_parts, starts, priors = [], [], [], []
    chunk = setup.chunk
    for first in range(0, len(pixels), chunk):
        index = pixels[first : first + chunk]
        piece, finite = masked_chunk(
            setup.flat_refl[index],
            [g[index] for g in setup.flat_geometry],
            setup.limits,
        )
        pieces.append(piece)
        finite_parts.append(finite)
        given = {name: value[index] for name, value in setup.given.items()}
        starts.append(
            chunk_starts(
                given,
                0,
                len(index),
                setup.free,
                shared_all,
                setup.params,
                piece,
                setup.solver,
                setup.lower,
                setup.upper,
            )
        )
        priors.append(
            prior_arrays(
                {n: tuple(a[index] for a in v) for n, v in setup.priors.items()},
                setup.band_free,
                shared_all,
                0,
                len(index),
                n_bands,
            )
        )
    return _Gathered(
        any_finite=np.concatenate(finite_parts) if pieces else np.zeros((0, n_bands), bool),
        start_b=np.concatenate([a for a, _ in starts]) if pieces else np.zeros((0, n_bands, p)),
        start_sr=np.concatenate([b for _, b in starts]) if pieces else np.zeros((0, s + r)),
        priors=[np.concatenate([c[k] for c in priors]) for k in range(4)] if pieces else None,
        n_valid=(
            np.concatenate([np.sum(np.isfinite(pc[0]), axis=-1) for pc in pieces])
            if pieces
            else np.zeros((0, n_bands))
        ),
        masked=[np.concatenate([pc[k] for pc in pieces]) for k in range(4)] if pieces else None,
    )


def _evaluate(setup: JointSetup, gathered: _Gathered, which, xb, xsr, max_iter=0):
    """The arrow blocks (0 solver steps) of the region pixels `which` at (xb, xsr); with
    max_iter > 0, each pixel's own joint fit (regional parameters its own) from there."""
    n_bands, chunk, s = setup.flat_refl.shape[1], setup.chunk, len(setup.shared)
    config = dict(
        free=setup.free,
        n_band_free=len(setup.band_free),
        fixed=setup.fixed,
        lower=setup.lower,
        upper=setup.upper,
        min_obs=setup.min_obs,
        max_iter=max_iter,
        tol=setup.tol,
        key=setup.params.model_key,
        dtype=setup.dtype,
    )
    weight_of_band = np.ones(n_bands) if setup.band_sigma is None else 1.0 / setup.band_sigma
    outputs = []
    for first in range(0, len(which), chunk):
        rows = which[first : first + chunk]
        # rows exist only where pieces did, and with them masked and priors
        assert gathered.masked is not None and gathered.priors is not None
        refl, *geometry = (a[rows] for a in gathered.masked)
        mean_b, weight_b, mean_s, weight_s = (a[rows] for a in gathered.priors)
        weight_s = weight_s.copy()
        weight_s[:, s:] = 0.0  # a regional prior counts once per region, not per pixel
        weight = np.broadcast_to(weight_of_band, (len(rows), n_bands))
        arrays = [
            refl,
            weight,
            xb[first : first + chunk],
            xsr[first : first + chunk],
            mean_b,
            weight_b,
            mean_s,
            weight_s,
        ]
        outputs.append(solve_chunk(setup.solver, arrays, geometry, chunk, config))
    return (
        {name: np.concatenate([o[name] for o in outputs]) for name in outputs[0]}
        if outputs
        else None
    )


def _region_starts(setup: JointSetup, gathered: _Gathered, pixels, active, regions):
    """The regional parameters' starts (n_used, r) and priors (mean, weight) per used
    region; regions = (label of each active pixel, n_used)."""
    label, n_used = regions
    s, r = len(setup.shared), len(setup.regional)
    start_r = np.empty((n_used, r))
    prior_mean_r, prior_weight_r = np.zeros((n_used, r)), np.zeros((n_used, r))
    for q, name in enumerate(setup.regional):
        start_r[:, q] = _per_region(gathered.start_sr[active, s + q], label, n_used, name, "start")
        if name in setup.priors:
            mean, sigma = (a[pixels][active] for a in setup.priors[name])
            prior_mean_r[:, q] = np.nan_to_num(_per_region(mean, label, n_used, name, "prior"))
            prior_weight_r[:, q] = 1.0 / _per_region(sigma, label, n_used, name, "prior")
    return start_r, (prior_mean_r, prior_weight_r)


def _solve(setup: JointSetup, gathered: _Gathered, which, active, regions, starts=None):
    """`regional.solve_regions` over the active pixels `which`, or None if there are
    none; regions = (label, n_used, start_r, region_prior); starts (start_b, start_s) of
    the pixels `which`, by default the gathered ones."""
    if not len(which):
        return None
    label, n_used, start_r, region_prior = regions
    p, s = len(setup.band_free), len(setup.shared)
    start_b, start_s = starts or (gathered.start_b[active], gathered.start_sr[active, :s])

    def blocks(xb, xsr):
        solved = _evaluate(setup, gathered, which, xb, xsr)
        return {
            "cost": solved["cost"],
            "a": solved["a_blocks"],
            "c": solved["c_blocks"],
            "d": solved["d_block"],
            "gb": solved["gb"],
            "g": solved["gs"],
        }

    lower, upper = setup.lower, setup.upper
    bounds = (
        (lower[:p], upper[:p]),
        (lower[p : p + s], upper[p : p + s]),
        (lower[p + s :], upper[p + s :]),
    )
    return solve_regions(
        blocks,
        label,
        n_used,
        start_b,
        start_s,
        start_r,
        bounds,
        region_prior,
        setup.max_iter,
        setup.tol,
    )


def _fill_solution(setup: JointSetup, state, which, active, regions, n_valid, pixel, region):
    """Covariances, values and statuses of the active pixels and used regions from the
    solver's `state`, into the `pixel` and `region` arrays in place; regions = (label,
    n_used, used_regions, region_prior)."""
    label, n_used, used_regions, region_prior = regions
    n_bands = setup.flat_refl.shape[1]
    p, s, r = len(setup.band_free), len(setup.shared), len(setup.regional)
    if setup.band_sigma is not None:
        variance = np.ones(len(which))
    else:
        observations = np.zeros(n_used)
        np.add.at(observations, label, np.sum(n_valid[active], axis=1))
        parameters = np.bincount(label, minlength=n_used) * (n_bands * p + s) + r
        with np.errstate(invalid="ignore", divide="ignore"):
            region_variance = np.where(
                observations > parameters,
                state["cost"] / (observations - parameters),
                np.nan,
            )
        variance = region_variance[label]
    solved = np.isin(state["status"][label], [Status.CONVERGED, Status.MAX_ITER])
    a_cov_b, a_cov_sr, a_cov_x, determined = regional_covariance(
        state, label, n_used, region_prior, variance, solved
    )
    pixel_status = state["status"][label].copy()
    pixel_status[(pixel_status == Status.CONVERGED) & ~determined] = Status.UNDETERMINED
    pixel["status"][which] = pixel_status
    pixel["cov_b"][which], pixel["cov_sr"][which], pixel["cov_x"][which] = (
        a_cov_b,
        a_cov_sr,
        a_cov_x,
    )
    pixel["values_b"][which] = state["xb"]
    pixel["values_sr"][which, :s] = state["xs"]
    pixel["values_sr"][which, s:] = state["xr"][label]
    pixel["iterations"][which] = state["iterations"][label]
    pixel["cost"][which] = state["pixel_cost"]
    for q, name in enumerate(setup.regional):
        region["sigma"][name][used_regions] = np.sqrt(
            _first_of_region(a_cov_sr[:, s + q, s + q], label, n_used)
        )
    region_state = state["status"].copy()
    any_determined = np.zeros(n_used, bool)
    np.logical_or.at(any_determined, label, determined)
    region_state[(region_state == Status.CONVERGED) & ~any_determined] = Status.UNDETERMINED
    region["status"][used_regions] = region_state
    region["iterations"][used_regions] = state["iterations"]
    region["cost"][used_regions] = state["cost"]
    for q, name in enumerate(setup.regional):
        region["values"][name][used_regions] = state["xr"][:, q]


def _first_of_region(values, label, n_regions):
    out = np.full(n_regions, np.nan)
    out[label[::-1]] = values[::-1]
    return out


def _regional_result(setup: JointSetup, pixels, pixel, region) -> JointFitResult:
    """The `JointFitResult` of a regional fit from the region pixels' arrays `pixel`
    (`pixels` indexing the flat image) and the regions' arrays `region`."""
    status, values_b, values_sr = pixel["status"], pixel["values_b"], pixel["values_sr"]
    cov_b, cov_sr, cov_x, n_valid = (
        pixel["cov_b"],
        pixel["cov_sr"],
        pixel["cov_x"],
        pixel["n_valid"],
    )
    n_pixels, n_bands, _ = setup.flat_refl.shape
    p, s, r = len(setup.band_free), len(setup.shared), len(setup.regional)
    shape = setup.pixel_shape

    def full(array, fill):
        out = np.full((n_pixels,) + array.shape[1:], fill, array.dtype)
        out[pixels] = array
        return out

    all_status = full(status, np.int8(Status.TOO_FEW_OBSERVATIONS))
    all_b, all_sr = full(values_b, np.nan), full(values_sr, np.nan)
    all_cov_b, all_cov_sr, all_cov_x = (
        full(cov_b, np.nan),
        full(cov_sr, np.nan),
        full(cov_x, np.nan),
    )
    observations = full(n_valid.astype(np.int32), np.int32(0))
    values, dfs = {}, {}
    for j, name in enumerate(setup.band_free):
        values[name] = all_b[..., j].reshape(shape + (n_bands,)).astype(setup.dtype)
        sigma = (
            None if name not in setup.priors else setup.priors[name][1].reshape(shape + (n_bands,))
        )
        dfs[name] = degrees_of_freedom(
            all_cov_b[..., j, j].reshape(shape + (n_bands,)), sigma
        ).astype(setup.dtype)
    for q, name in enumerate(setup.shared + setup.regional):
        values[name] = all_sr[:, q].reshape(shape).astype(setup.dtype)
        sigma = None if name not in setup.priors else setup.priors[name][1].reshape(shape)
        dfs[name] = degrees_of_freedom(all_cov_sr[:, q, q].reshape(shape), sigma).astype(
            setup.dtype
        )
    del p, s, r
    return JointFitResult(
        free=setup.free,
        shared=setup.shared,
        values=values,
        status=all_status.reshape(shape),
        iterations=full(pixel["iterations"], np.int32(0)).reshape(shape),
        cost=full(pixel["cost"], np.nan).reshape(shape).astype(setup.dtype),
        covariance_bands=all_cov_b.reshape(shape + all_cov_b.shape[1:]).astype(setup.dtype),
        covariance_shared=all_cov_sr.reshape(shape + all_cov_sr.shape[1:]).astype(setup.dtype),
        covariance_cross=all_cov_x.reshape(shape + all_cov_x.shape[1:]).astype(setup.dtype),
        dfs=dfs,
        observations=observations.reshape(shape + (n_bands,)),
        regional=setup.regional,
        region_labels=region["labels"],
        region_values={name: v.astype(setup.dtype) for name, v in region["values"].items()},
        region_status=region["status"],
        region_iterations=region["iterations"],
        region_cost=region["cost"].astype(setup.dtype),
        region_sigma={name: v.astype(setup.dtype) for name, v in region["sigma"].items()},
    )
