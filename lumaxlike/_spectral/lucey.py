"""The Lucey products: FeO and TiO2 wt% (Lucey et al. 2000, JGR 105, 20297) and optical
maturity OMAT (Lucey et al. 2000b, JGR 105, 20377), with their constants as a parameter
(`LuceyConstants`; the published set for Clementine is the default, M3's recalibrations
differ)."""

from __future__ import annotations

import dataclasses

import numpy as np

from .declarations import ProductInputs, SpectralProduct
from .wavelengths import Kernel

__all__ = ["LUCEY_PRODUCTS", "LuceyConstants"]


@dataclasses.dataclass(frozen=True)
class LuceyConstants:
    """The constants of Lucey's FeO, TiO2 and OMAT relations (defaults: Clementine UVVIS,
    Lucey et al. 2000 and 2000b). Reflectances are the 415, 750 and 950 nm bands, as
    Clementine's reflectance at 30 deg incidence, 0 deg emission.

    Attributes:
        fe_x0, fe_y0: the FeO origin (R750, R950/R750) = (0.08, 1.19).
        fe_slope, fe_intercept: FeO [wt%] = 17.427 theta_Fe - 7.565.
        ti_x0, ti_y0: the TiO2 origin (R750, R415/R750) = (0.0, 0.42).
        ti_scale, ti_exponent: TiO2 [wt%] = 3.708 theta_Ti^5.979.
        omat_x0, omat_y0: the OMAT origin (R750, R950/R750) = (0.08, 1.19).
    """

    fe_x0: float = 0.08
    fe_y0: float = 1.19
    fe_slope: float = 17.427
    fe_intercept: float = -7.565
    ti_x0: float = 0.0
    ti_y0: float = 0.42
    ti_scale: float = 3.708
    ti_exponent: float = 5.979
    omat_x0: float = 0.08
    omat_y0: float = 1.19


_LUCEY_2000 = "Lucey et al. 2000, JGR 105, 20297"
_LUCEY_2000B = "Lucey et al. 2000b, JGR 105, 20377"


def theta_fe(inputs: ProductInputs) -> np.ndarray:
    """theta_Fe = -arctan((R950/R750 - y0) / (R750 - x0)) [rad]."""
    c = inputs.constants["lucey"]
    r750 = inputs.R(0.750)
    return -np.arctan((inputs.R(0.950) / r750 - c.fe_y0) / (r750 - c.fe_x0))


def feo(inputs: ProductInputs) -> np.ndarray:
    """FeO [wt%] = slope theta_Fe + intercept."""
    c = inputs.constants["lucey"]
    return c.fe_slope * theta_fe(inputs) + c.fe_intercept


def tio2(inputs: ProductInputs) -> np.ndarray:
    """TiO2 [wt%] = scale theta_Ti^exponent, theta_Ti = arctan((R415/R750 - y0) /
    (R750 - x0)); NaN where theta_Ti < 0 (below the relation's origin, no real power)."""
    c = inputs.constants["lucey"]
    r750 = inputs.R(0.750)
    theta = np.arctan((inputs.R(0.415) / r750 - c.ti_y0) / (r750 - c.ti_x0))
    with np.errstate(invalid="ignore"):
        return c.ti_scale * np.power(theta, c.ti_exponent)


def omat(inputs: ProductInputs) -> np.ndarray:
    """OMAT = sqrt((R750 - x0)^2 + (R950/R750 - y0)^2)."""
    c = inputs.constants["lucey"]
    r750 = inputs.R(0.750)
    return np.hypot(r750 - c.omat_x0, inputs.R(0.950) / r750 - c.omat_y0)


LUCEY_PRODUCTS: tuple[SpectralProduct, ...] = (
    SpectralProduct(
        name="FeO",
        family="Lucey",
        long_name="FeO abundance from the 950/750 nm ratio and 750 nm reflectance",
        units="wt%",
        kernels=(Kernel(0.750), Kernel(0.950)),
        function=feo,
        citation=f"{_LUCEY_2000}: FeO = 17.427 theta_Fe - 7.565",
        constants="lucey",
    ),
    SpectralProduct(
        name="TiO2",
        family="Lucey",
        long_name="TiO2 abundance from the 415/750 nm ratio and 750 nm reflectance",
        units="wt%",
        kernels=(Kernel(0.415), Kernel(0.750)),
        function=tio2,
        citation=f"{_LUCEY_2000}: TiO2 = 3.708 theta_Ti^5.979",
        constants="lucey",
    ),
    SpectralProduct(
        name="OMAT",
        family="Lucey",
        long_name="optical maturity: distance from the hypermature origin",
        units="1",
        kernels=(Kernel(0.750), Kernel(0.950)),
        function=omat,
        citation=f"{_LUCEY_2000B}: OMAT = sqrt((R750 - 0.08)^2 + (R950/R750 - 1.19)^2)",
        constants="lucey",
    ),
)
