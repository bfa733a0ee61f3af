"""Hapke model parameters shared by every part of lumaxlike."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import numpy as np

from ._configuration import H_FUNCTIONS, MULTIPLE_SCATTERING, N_LEGENDRE, PHASE_FUNCTIONS, ModelKey
from ._configuration import HAPKE_FIELD_NAMES as FIELD_NAMES
from ._configuration import HAPKE_PARAMETER_NAMES as PARAMETER_NAMES
from ._validation import finite_scalar as _finite_scalar

__all__ = ["HapkeParams", "FIELD_NAMES", "PARAMETER_NAMES", "porosity_k_from_filling_factor"]

# Largest filling factor of Hapke's (2008) porosity factor: 1.209 phi^(2/3) < 1.
MAX_FILLING_FACTOR = 1.209**-1.5


def porosity_k_from_filling_factor(filling_factor) -> float:
    """Hapke's (2008, eq. 23; 2012 book eq. 7.45b) porosity factor K of a regolith.

    K = -ln(1 - 1.209 phi^(2/3)) / (1.209 phi^(2/3)) for filling factor phi (the volume
    fraction occupied by particles, 1 - porosity); K -> 1 as phi -> 0.

    Args:
        filling_factor: phi [-], 0 <= phi < 0.752 (where 1.209 phi^(2/3) reaches 1).
    Returns:
        K [-], >= 1, as a float.
    """
    phi = _finite_scalar("filling_factor", filling_factor)
    if not 0.0 <= phi < MAX_FILLING_FACTOR:
        raise ValueError(
            f"filling_factor must lie in [0, {MAX_FILLING_FACTOR:.4f}), got {filling_factor!r}"
        )
    if phi == 0.0:
        return 1.0
    x = 1.209 * phi ** (2.0 / 3.0)
    return -math.log1p(-x) / x


class HapkeParams(eqx.Module):
    """A Hapke model: its configuration and its parameters other than the albedo w.

    A pytree (an `equinox.Module`), so it passes through `jax.jit` and `jax.grad`.
    Each numeric field is one finite real number (the same for all pixels and bands);
    anything else (a string, None, an array, NaN, inf) raises a ValueError naming the
    field. The configuration fields (`multiple_scattering`, `h_function`,
    `phase_function`) are static:
    they choose which equations the model is built from, once, not per pixel.

    Attributes:
        b: double Henyey-Greenstein asymmetry, 0 <= b < 1 [-] (phase_function "dhg").
        c: double Henyey-Greenstein back/forward partition, -1 <= c <= 1 [-] (in the form
            p = (1+c)/2 HG(b) + (1-c)/2 HG(-b), so c > 0 is back-scattering).
        roughness: Hapke (1984) mean slope angle theta-bar [rad], 0 <= roughness < pi/2;
            0 (default) is a smooth surface.
        hs: shadow-hiding opposition-effect width h_S [-]; hs = 0 (default) switches
            the effect off.
        bs0: shadow-hiding opposition-effect amplitude B_S0 [-].
        hc: coherent-backscatter opposition-effect width h_C [-]; hc = 0 (default)
            switches the effect off.
        bc0: coherent-backscatter opposition-effect amplitude B_C0 [-].
        legendre: optional Legendre coefficients b_0..b_15 of the phase function,
            p(g) = sum_n b_n P_n(cos g) (b_0 = 1); when given they replace the double
            Henyey-Greenstein (b and c are then unused); only with phase_function
            "dhg" (with another, a ValueError).
        porosity_k: Hapke's (2008) porosity factor K >= 1 [-]: r scales by K and the
            H-functions take mu0e/K and mue/K. 1 (default) is the porosity-free model,
            exactly; `porosity_k_from_filling_factor(phi)` gives K for a filling factor.
        multiple_scattering: ``"amsa"`` (default; Hapke 2002, anisotropic multiple
            scattering with the P(mu), P-bar terms of the phase function) or ``"imsa"``
            (Hapke 1981/1993, isotropic multiple scattering: M = H(mu0e) H(mue) - 1).
        h_function: ``"hapke2002"`` (default; Hapke 2002 eq. 13, within 1 % of the exact
            H), ``"hapke1981"`` (the two-stream H = (1 + 2x)/(1 + 2 gamma x), as in
            USGS ISIS3's photomet, within 4 %) or ``"exact"`` (Chandrasekhar's H for
            isotropic scattering, to 1e-13; see `lumaxlike.h_function`).
        asymmetry: xi, the parameter of the one-parameter phase functions, -1 < xi < 1
            [-]: the mean cosine of the scattering angle pi - g, so xi < 0 is
            back-scattering, xi > 0 forward-scattering (Hapke's convention; the DHG's
            c = 1 lobe is xi = -b). 0 (default) makes "hg" isotropic. Unused by "dhg".
        phase_function: ``"dhg"`` (default; double Henyey-Greenstein in b, c),
            ``"hg"`` (single Henyey-Greenstein, p = (1 - xi^2)/(1 + 2 xi cos g + xi^2)^1.5)
            or ``"cornette_shanks"`` (Cornette & Shanks 1992, eq. 8: p = 3/2 (1 - xi^2)/
            (2 + xi^2) (1 + cos^2 g)/(1 + 2 xi cos g + xi^2)^1.5), in the phase angle g.
    """

    b: float
    c: float
    roughness: float = 0.0
    hs: float = 0.0
    bs0: float = 0.0
    hc: float = 0.0
    bc0: float = 0.0
    legendre: np.ndarray | None = None
    porosity_k: float = 1.0
    multiple_scattering: str = eqx.field(default="amsa", static=True)
    h_function: str = eqx.field(default="hapke2002", static=True)
    asymmetry: float = 0.0
    phase_function: str = eqx.field(default="dhg", static=True)

    def __check_init__(self):
        configuration = (
            ("multiple_scattering", MULTIPLE_SCATTERING),
            ("h_function", H_FUNCTIONS),
            ("phase_function", PHASE_FUNCTIONS),
        )
        for name, choices in configuration:
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"HapkeParams.{name}={getattr(self, name)!r} is not one of {', '.join(map(repr, choices))}"
                )
        if self.legendre is not None and self.phase_function != "dhg":
            raise ValueError(
                f"HapkeParams.legendre is given with HapkeParams.phase_function="
                f"{self.phase_function!r}: Legendre coefficients replace the double "
                f"Henyey-Greenstein only (phase_function='dhg'); give one or the other"
            )
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
            "porosity_k": concrete["porosity_k"] >= 1.0,
            "asymmetry": -1.0 < concrete["asymmetry"] < 1.0,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(
                    f"HapkeParams.{name}={concrete[name]!r} is outside its valid range"
                )
        if self.legendre is not None and not isinstance(self.legendre, jax.core.Tracer):
            shape = np.shape(self.legendre)
            if len(shape) != 1 or not 1 <= shape[0] <= N_LEGENDRE + 1:
                raise ValueError(
                    f"HapkeParams.legendre must be a 1-D sequence of at most {N_LEGENDRE + 1} "
                    f"coefficients b_0..b_{N_LEGENDRE}, got shape {shape}"
                )
            coefficients = np.asarray(self.legendre)
            if coefficients.dtype.kind not in "fiu" or not np.all(np.isfinite(coefficients)):
                raise ValueError(
                    f"HapkeParams.legendre must hold finite numbers, got {self.legendre!r}"
                )

    def legendre_coefficients(self, xp=np, dtype=np.float64):
        """(coefficients of length 16 in `dtype`, use_legendre flag) for the equations."""
        if self.legendre is None:
            return xp.zeros(N_LEGENDRE + 1, dtype), False
        coefficients = xp.asarray(self.legendre, dtype)
        padding = N_LEGENDRE + 1 - coefficients.shape[0]
        return xp.concatenate([coefficients, xp.zeros(padding, coefficients.dtype)]), True

    def scalars(self) -> tuple:
        """(b, c, roughness, hs, bs0, hc, bc0, porosity_k, asymmetry): `FIELD_NAMES`, in the
        order the equations take them."""
        return tuple(getattr(self, name) for name in FIELD_NAMES)

    @property
    def model_key(self) -> ModelKey:
        """The static configuration: which equations the model is built from."""
        return ModelKey(self.multiple_scattering, self.h_function, self.phase_function)
