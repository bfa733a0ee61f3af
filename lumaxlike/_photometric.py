"""`PhotometricFunction`: the empirical photometric functions as a model object."""

from __future__ import annotations

import equinox as eqx
import jax

from ._configuration import PHOTOMETRIC_DEFAULTS as DEFAULTS
from ._configuration import PHOTOMETRIC_KINDS as KINDS
from ._configuration import PHOTOMETRIC_PARAMETER_NAMES as PARAMETER_NAMES
from ._validation import finite_scalar

__all__ = ["PhotometricFunction", "PHOTOMETRIC_KINDS", "PHOTOMETRIC_PARAMETERS", "DEFAULTS"]

PHOTOMETRIC_KINDS = tuple(KINDS)
PHOTOMETRIC_PARAMETERS = PARAMETER_NAMES


class PhotometricFunction(eqx.Module):
    """An empirical photometric function, linear in one albedo-like parameter A.

    The bidirectional reflectance is r = A * pht(i, e, g) / pi [1/sr], pht being the
    photometric function of USGS ISIS3's ``photomet`` (I/F of a surface of albedo 1;
    pht = 1 at i = e = g = 0), mu0 = cos i, mu = cos e, alpha = g the phase angle:

    - ``"lambert"``: pht = mu0.
    - ``"lommel_seeliger"``: pht = 2 mu0/(mu0 + mu) (ISIS's normalisation; Hapke's
      single-scattering limit w/(4 pi) mu0/(mu0 + mu) is A = w/8).
    - ``"lunar_lambert"`` (McEwen 1991): pht = mu0 [(1 - L) + 2 L/(mu0 + mu)];
      L = 0 is Lambert, L = 1 Lommel-Seeliger.
    - ``"minnaert"``: pht = mu0^k mu^(k - 1); k = 1 is Lambert.
    - ``"shkuratov"`` (Shkuratov et al. 2011, PSS 59:1326): pht = f(alpha) D, with
      f = [exp(-mu1 alpha) + m exp(-mu2 alpha)]/(1 + m) and the Akimov disk function
      D = cos(alpha/2) cos[pi/(pi - alpha)(gamma - alpha/2)] cos(beta)^(eta alpha/(pi -
      alpha)) / cos(gamma) in photometric latitude beta and longitude gamma; A is the
      normal albedo A_N.

    `lumaxlike.reflectance` evaluates it, `lumaxlike.invert` recovers A per pixel and
    band in closed form (`InversionResult.w` then holds A). A pytree (an
    `equinox.Module`) whose `kind` is static. Each parameter is one finite real
    number, at least 0; a parameter the kind does not use must keep its default (a
    ValueError naming the field otherwise, so that nothing given is silently ignored).

    Attributes:
        kind: ``"lambert"``, ``"lommel_seeliger"``, ``"lunar_lambert"``, ``"minnaert"``
            or ``"shkuratov"``.
        limb_darkening: Lunar-Lambert's L [-], >= 0 (default 1, as in ISIS).
        minnaert_k: Minnaert's exponent k [-], >= 0 (default 1, as in ISIS).
        mu1: Shkuratov's phase-function parameter mu1 [1/rad], >= 0 (default 0).
        m: Shkuratov's phase-function parameter m [-], >= 0 (default 0: f = 1).
        mu2: Shkuratov's phase-function parameter mu2 [1/rad], >= 0 (default 0).
        eta: Shkuratov's disk-function roughness parameter [-], >= 0 (default 0: the
            Akimov function).
    """

    kind: str = eqx.field(static=True)
    limb_darkening: float = DEFAULTS["limb_darkening"]
    minnaert_k: float = DEFAULTS["minnaert_k"]
    mu1: float = DEFAULTS["mu1"]
    m: float = DEFAULTS["m"]
    mu2: float = DEFAULTS["mu2"]
    eta: float = DEFAULTS["eta"]

    def __check_init__(self):
        if self.kind not in KINDS:
            raise ValueError(
                f"PhotometricFunction.kind={self.kind!r} is not one of {', '.join(map(repr, KINDS))}"
            )
        used = KINDS[self.kind][1]
        for name in PARAMETER_NAMES:
            value = getattr(self, name)
            if isinstance(value, jax.core.Tracer):  # inside jit/grad: checked at the API edge
                return
            number = finite_scalar(f"PhotometricFunction.{name}", value)
            if number < 0.0:
                raise ValueError(
                    f"PhotometricFunction.{name}={number!r} is outside its valid range (>= 0)"
                )
            if name not in used and number != DEFAULTS[name]:
                users = [kind for kind, (_, names) in KINDS.items() if name in names]
                raise ValueError(
                    f"PhotometricFunction.{name}={number!r} is given with kind={self.kind!r}, which "
                    f"does not use it (only {', '.join(map(repr, users))} does)"
                )

    def scalars(self) -> tuple:
        """(limb_darkening, minnaert_k, mu1, m, mu2, eta), in the order the equations
        take them."""
        return tuple(getattr(self, name) for name in PARAMETER_NAMES)

    @property
    def used_parameters(self) -> tuple:
        """The names of the parameters this kind uses."""
        return KINDS[self.kind][1]
