"""Maintainer tool: draw ``docs/assets/spectral.png``, the Band I depth of w against the
same map of raw I/F over the demo's terrain (docs/spectral-parameters.md).

The demo scene (`lumaxlike._demo`: hills lit at 40 deg from the south-east, patches of
five minerals) is forward-modelled to r without noise, w is inverted from it with the
demo's Hapke parameters, and `spectral_parameters` gives ``BAND1_DEPTH`` of each. Run
from a clone::

    python tools/spectral_figure.py [OUT.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

import lumaxlike
from lumaxlike._demo.figure import FIGURE_DPI
from lumaxlike._demo.forward import demo_hapke_params, simulate_reflectance
from lumaxlike._demo.scene import make_scene

OUT = Path(__file__).resolve().parent.parent / "docs" / "assets" / "spectral.png"
PRODUCT = "BAND1_DEPTH"


def band_depths() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(depth of w, depth of I/F, the DTM) on the demo's grid."""
    scene = make_scene()
    r = simulate_reflectance(scene, backend="numba")
    inverted = lumaxlike.invert(
        r, scene.to_sun, scene.to_sensor, scene.normal, demo_hapke_params(), "numba"
    )
    wavelengths = scene.wavelength_nm / 1000.0
    of_w = lumaxlike.spectral_parameters(inverted.w, wavelengths, PRODUCT, quantity="w")
    of_if = lumaxlike.spectral_parameters(np.pi * r, wavelengths, PRODUCT, quantity="radf")
    return of_w[PRODUCT], of_if[PRODUCT], scene.dtm


def main(argv=None) -> Path:
    out = Path(argv[0]) if argv else OUT
    depth_w, depth_if, dtm = band_depths()
    fig = Figure(figsize=(13.0, 4.2), layout="constrained")
    axes = fig.subplots(1, 3)
    image = axes[0].imshow(dtm, cmap="gray")
    fig.colorbar(image, ax=axes[0], label="height [m]")
    axes[0].set_title("terrain (DTM)")
    low, high = np.nanpercentile(np.concatenate([depth_w.ravel(), depth_if.ravel()]), [1, 99])
    for ax, depth, what in ((axes[1], depth_w, "w (inverted)"), (axes[2], depth_if, "raw I/F")):
        image = ax.imshow(depth, cmap="viridis", vmin=low, vmax=high)
        fig.colorbar(image, ax=ax, label="Band I depth [1]")
        ax.set_title(f"Band I depth of {what}")
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.savefig(out, dpi=FIGURE_DPI // 2, format="png")
    print(f"{out}: Band I depth, w {np.nanmean(depth_w):.3f}, I/F {np.nanmean(depth_if):.3f}")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
