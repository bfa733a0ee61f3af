"""Hapke model parameters shared by every part of lumaxlike."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import numpy as np

from ._model.equations import N_LEGENDRE

__all__ = ["HapkeParams", "FIELD_NAMES", "PARAMETER_NAMES"]

FIELD_NAMES = ("b", "c", "roughness", "hs", "bs0", "hc", "bc0")
PARAMETER_NAMES = ("w",) + FIELD_NAMES  # every parameter `fit` can free


def _finite_scalar(name: str, value) -> float:
    """`value` as a float; ValueError naming `name` unless it is one finite real number."""
    kind = np.asarray(value).dtype.kind if not isinstance(value, (str, bytes)) else "U"
    if kind not in "fiu" or np.ndim(value) != 0:
        raise ValueError(f"{name} must be one real number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return number


class HapkeParams(eqx.Module):
    """Parameters of the Hapke AMSA model other than the single-scattering albedo w.

    A pytree (an `equinox.Module`), so it passes through `jax.jit` and `jax.grad`.
    Each field is one finite real number (the same for all pixels and bands); anything
    else (a string, None, an array, NaN, inf) raises a ValueError naming the field.

    Attributes:
        b: double Henyey-Greenstein asymmetry, 0 <= b < 1 [-].
        c: double Henyey-Greenstein back/forward partition, -1 <= c <= 1 [-] (in the form
            p = (1+c)/2 HG(b) + (1-c)/2 HG(-b), so c > 0 is back-scattering).
        roughness: Hapke (1984) mean slope angle theta-bar [rad], 0 <= roughness < pi/2;
            0 (default) is a smooth surface.
        hs, bs0: shadow-hiding opposition-effect width h_S [-] and amplitude B_S0 [-];
            hs = 0 (default) switches it off.
        hc, bc0: coherent-backscatter width h_C [-] and amplitude B_C0 [-]; hc = 0
            (default) switches it off.
        legendre: optional Legendre coefficients b_0..b_15 of the phase function,
            p(g) = sum_n b_n P_n(cos g) (b_0 = 1); when given they replace the double
            Henyey-Greenstein (b and c are then unused).
    """

    b: float
    c: float
    roughness: float = 0.0
    hs: float = 0.0
    bs0: float = 0.0
    hc: float = 0.0
    bc0: float = 0.0
    legendre: np.ndarray | None = None

    def __check_init__(self):
        concrete = {}
        for name in FIELD_NAMES:
            value = getattr(self, name)
            if isinstance(value, jax.core.Tracer):  # inside jit/grad: checked at the API edge
                return
            concrete[name] = _finite_scalar(f"HapkeParams.{name}", value)
        checks = {
            "b": 0.0 <= concrete["b"] < 1.0,
            "c": -1.0 <= concrete["c"] <= 1.0,
            "roughness": 0.0 <= concrete["roughness"] < math.pi / 2,
            "hs": concrete["hs"] >= 0.0,
            "bs0": concrete["bs0"] >= 0.0,
            "hc": concrete["hc"] >= 0.0,
            "bc0": concrete["bc0"] >= 0.0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"HapkeParams.{name}={concrete[name]!r} is outside its valid range")
        if self.legendre is not None and not isinstance(self.legendre, jax.core.Tracer):
            shape = np.shape(self.legendre)
            if len(shape) != 1 or not 1 <= shape[0] <= N_LEGENDRE + 1:
                raise ValueError(
                    f"HapkeParams.legendre must be a 1-D sequence of at most {N_LEGENDRE + 1} "
                    f"coefficients b_0..b_{N_LEGENDRE}, got shape {shape}"
                )
            coefficients = np.asarray(self.legendre)
            if coefficients.dtype.kind not in "fiu" or not np.all(np.isfinite(coefficients)):
                raise ValueError(f"HapkeParams.legendre must hold finite numbers, got {self.legendre!r}")

    def legendre_coefficients(self, xp=np, dtype=np.float64):
        """(coefficients of length 16 in `dtype`, use_legendre flag) for the equations."""
        if self.legendre is None:
            return xp.zeros(N_LEGENDRE + 1, dtype), False
        coefficients = xp.asarray(self.legendre, dtype)
        padding = N_LEGENDRE + 1 - coefficients.shape[0]
        return xp.concatenate([coefficients, xp.zeros(padding, coefficients.dtype)]), True

    def scalars(self) -> tuple:
        """(b, c, roughness, hs, bs0, hc, bc0) in the order the equations take them."""
        return tuple(getattr(self, name) for name in FIELD_NAMES)
