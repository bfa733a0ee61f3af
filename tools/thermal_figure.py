"""Maintainer tool: draw ``docs/assets/thermal.png``, a warm pixel's spectrum, its
thermal part and the thermally corrected spectrum (docs/thermal.md).

One M3-like pixel (85 global-mode bands, 0.46-2.98 um): a w spectrum with a 1 um and a
2 um band, a linear continuum beyond 2.2 um and a 3 um hydration band; the default
model's r seen near nadir under 30 deg incidence, plus the emission of a 375 K surface
(eps = 1 - r_hd of the same model, a 5772 K blackbody Sun at 1 au), no noise.
`remove_thermal` (``method="continuum"``, the default window) fits T and removes the
emission. Run from a clone::

    python tools/thermal_figure.py [OUT.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

import lumaxlike
from lumaxlike._demo.figure import FIGURE_DPI
from lumaxlike._model import thermal
from lumaxlike._model._backends import retarget_to_numpy
from lumaxlike._thermal import emissivity
from lumaxlike._thermal.options import ThermalSettings

OUT = Path(__file__).resolve().parent.parent / "docs" / "assets" / "thermal.png"
TEMPERATURE = 375.0  # [K]
PARAMS = lumaxlike.HapkeParams(b=0.25, c=0.3, roughness=np.radians(20))
M3_BANDS_UM = np.array(
    [0.46099, 0.50092, 0.54084, 0.58076, 0.62069, 0.66061, 0.70054, 0.73048]
    + [0.75044 + 0.01996 * k for k in range(40)]
    + [1.54892]
    + [1.57886 + 0.03992 * k for k in range(36)]
)
GEOMETRY = (
    np.array([np.sin(np.radians(30.0)), 0.0, np.cos(np.radians(30.0))]),
    np.array([np.sin(np.radians(5.0)), 0.0, np.cos(np.radians(5.0))]),
    np.array([0.0, 0.0, 1.0]),
)


def warm_pixel():
    """(observed r, true r, true emission [1/sr], F_sun at 1 au) of the pixel, (bands,)."""
    x = M3_BANDS_UM
    numpy_thermal = retarget_to_numpy(thermal)
    w = (
        0.3
        * (1 + 0.1 * np.minimum(x, 2.2))
        * (1 - 0.12 * np.exp(-((x - 0.97) ** 2) / 0.02))
        * (1 - 0.06 * np.exp(-((np.minimum(x, 2.2) - 2.05) ** 2) / 0.03))
        * (1 - 0.15 * np.exp(-((x - 2.95) ** 2) / 0.004))
    )
    r = np.asarray(lumaxlike.amsa(w, *GEOMETRY, PARAMS, "numba"))
    eps = emissivity.directional_emissivity(w, np.full(w.shape, GEOMETRY[1][2]), PARAMS)
    radiance, _ = numpy_thermal.planck_radiance_and_slope(x, 5772.0)
    solar = np.pi * radiance * (6.957e8 / 1.495978707e11) ** 2
    emission = eps * numpy_thermal.thermal_factor_and_slope(x, TEMPERATURE, solar, 1.0)[0]
    return r + emission, r, emission, solar


def main(argv=None) -> Path:
    out = Path(argv[0]) if argv else OUT
    observed, r_true, emission_true, solar = warm_pixel()
    result = lumaxlike.remove_thermal(
        observed[None],
        *GEOMETRY,
        M3_BANDS_UM,
        PARAMS,
        solar_spectrum=solar,
        refl_sigma=0.005 * observed,
        solver="numba",
    )
    fig = Figure(figsize=(8.0, 4.5), layout="constrained")
    ax = fig.subplots()
    um = M3_BANDS_UM
    ax.axvspan(*ThermalSettings().window, color="0.92", label="fit window")
    ax.plot(um, np.pi * observed, "k", lw=2, label=f"observed I/F ({TEMPERATURE:.0f} K)")
    ax.plot(um, np.pi * result.emission[0], "tab:red", label="thermal part removed")
    ax.plot(um, np.pi * result.reflectance[0], "tab:blue", lw=2, label="corrected I/F")
    ax.plot(um, np.pi * r_true, color="orange", ls=":", lw=1.5, label="true reflected I/F")
    ax.set_xlabel("wavelength [um]")
    ax.set_ylabel("I/F")
    ax.set_title(f"remove_thermal: fitted T = {result.temperature[0]:.1f} K")
    ax.legend(loc="upper left")
    fig.savefig(out, dpi=FIGURE_DPI // 2, format="png")
    k = np.argmin(np.abs(um - 2.9))
    print(
        f"{out}: T {result.temperature[0]:.2f} K, corrected/true at 2.9 um "
        f"{result.reflectance[0, k] / r_true[k]:.4f}, emission/true "
        f"{result.emission[0, k] / emission_true[k]:.4f}"
    )
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
