"""`fit(..., profile=names)`: the fit, then `profile.profile_ends` of each name."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..fit.arguments import check_bounds, check_free

__all__ = ["fit_with_profile"]


def fit_with_profile(arrays, model, starts_profile, joint, options, _dispatch):
    """`fit` with ``profile``: model = (params, free, solver, bounds), starts_profile =
    (starts, profile), joint and options `fit`'s other keywords (as `fit._dispatch`)."""
    from ..fit.arguments import check_shared
    from .profile import profile_ends

    starts, profile = starts_profile
    params, free, _, bounds = model
    free = check_free(free, params)
    names = check_shared(profile, free, "profile")
    # fit's own reading of shared: a name, "a,b" or a sequence of names
    shared, prior = check_shared(joint["shared"], free), dict(joint["prior"] or {})
    if joint["regional"] or joint["regions"] is not None:
        raise ValueError("profile is not supported with regions= and regional=")
    for name in names:
        if name not in shared:
            raise ValueError(f"profile names {name!r}, which is not in shared={shared!r}")
        if name in prior:
            raise ValueError(f"profile names {name!r}, which has a prior: profile it without")
    if options["refl_sigma"] is None:
        raise ValueError("profile needs refl_sigma (the interval is where chi^2 rises by 4)")
    result = _dispatch(arrays, model, starts, joint, options)
    dtype = np.float32 if np.asarray(arrays[0]).dtype == np.float32 else np.float64
    lower, upper = check_bounds(bounds, names, dtype)

    def fit_held(start, held):
        once = {**options, "start": start}
        return _dispatch(arrays, model, 1, {**joint, "prior": {**prior, **held}}, once)

    ends = {
        name: profile_ends(fit_held, result, name, lower[j], upper[j]).astype(dtype)
        for j, name in enumerate(names)
    }
    return dataclasses.replace(result, profile=ends)
