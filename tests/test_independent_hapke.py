"""The independent model of the tests (`independent_hapke`) is lumaxlike's default model."""

import numpy as np

import lumaxlike
from lumaxlike import HapkeParams

from . import independent_hapke
from .helpers import random_geometry


def test_independent_model_agrees_with_amsa():
    """`independent_hapke.reflectance` is lumaxlike's default model to rounding, over random
    tilted geometries (some below the horizon: NaN in both), smooth and rough, K = 1 and
    K > 1. (The default JAX backend: tests/test_forward.py checks numba against it.)"""
    rng = np.random.default_rng(2)
    geometry = random_geometry(400, rng)
    w = rng.uniform(0.02, 0.98, 400)
    models = (
        HapkeParams(b=0.3, c=0.4, roughness=0.3, hs=0.06, bs0=1.0, hc=0.05, bc0=0.5),
        HapkeParams(b=0.6, c=-0.3),
        HapkeParams(b=0.1, c=0.9, roughness=0.7, hs=0.2, bs0=0.4, hc=0.02, bc0=0.8, porosity_k=1.7),
    )
    for params in models:
        expected = lumaxlike.amsa(w[:, None], *geometry, params)[:, 0]
        actual = independent_hapke.reflectance(w, *geometry, *params.scalars()[:8])
        np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
        assert 0 < np.isnan(expected).sum() < 100
        valid = ~np.isnan(expected)
        np.testing.assert_allclose(
            actual[valid], expected[valid], rtol=independent_hapke.AGREEMENT, atol=0
        )
