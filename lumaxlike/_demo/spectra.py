"""Vendored USGS splib07 mineral spectra and their conversion to single-scattering albedo."""

from __future__ import annotations

import csv
import importlib.resources
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DEMO_SPECTRA_FILE",
    "MINERAL_DENSITY",
    "MINERAL_GRAIN_SIZE_UM",
    "W_MARGIN",
    "MineralSpectra",
    "load_mineral_spectra",
    "albedo_from_diffusive_reflectance",
]

#: File name of the vendored spectra, in ``lumaxlike/_demo/data/`` (see ``SOURCES.md``).
DEMO_SPECTRA_FILE = "usgs_splib07_demo_minerals.csv"

#: Solid densities of the demo's minerals [g/cm^3] (typical handbook values: Anthony et
#: al., Handbook of Mineralogy), for the intimate-mixing rule.
MINERAL_DENSITY = {
    "calcite": 2.71,
    "siderite": 3.96,
    "chlorite": 2.65,
    "buddingtonite": 2.32,
    "antigorite": 2.6,
}

#: Grain sizes of the demo's minerals [um] (a choice: a fine sand to silt regolith).
MINERAL_GRAIN_SIZE_UM = {
    "calcite": 60.0,
    "siderite": 40.0,
    "chlorite": 80.0,
    "buddingtonite": 50.0,
    "antigorite": 70.0,
}

#: Single-scattering albedos are clipped into ``[W_MARGIN, 1 - W_MARGIN]``.
W_MARGIN = 1e-4


@dataclass(frozen=True)
class MineralSpectra:
    """Reflectance spectra of a few minerals sampled at common bands.

    Attributes:
        wavelength_nm: band centres [nm], shape ``(bands,)``, strictly increasing.
        names: mineral names, length ``minerals``.
        reflectance: directional-hemispherical reflectance (dimensionless, in (0, 1)),
            shape ``(minerals, bands)``.
    """

    wavelength_nm: np.ndarray
    names: tuple[str, ...]
    reflectance: np.ndarray


def load_mineral_spectra() -> MineralSpectra:
    """Load the vendored USGS splib07 spectra of the demo's minerals.

    Returns:
        MineralSpectra with 51 bands over 450-2450 nm and 5 minerals (calcite, siderite,
        chlorite, buddingtonite, antigorite); provenance in ``data/SOURCES.md``.
    """
    resource = importlib.resources.files("lumaxlike._demo") / "data" / DEMO_SPECTRA_FILE
    lines = [
        line
        for line in resource.read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    header, *rows = list(csv.reader(lines))
    if header[0] != "wavelength_nm":
        raise ValueError(
            f"{DEMO_SPECTRA_FILE}: first column must be wavelength_nm, got {header[0]!r}"
        )
    table = np.array(rows, dtype=np.float64)
    wavelength_nm = table[:, 0]
    reflectance = table[:, 1:].T.copy()
    if not np.all(np.diff(wavelength_nm) > 0):
        raise ValueError(f"{DEMO_SPECTRA_FILE}: wavelengths are not strictly increasing")
    if not np.all((reflectance > 0) & (reflectance < 1)):
        raise ValueError(f"{DEMO_SPECTRA_FILE}: reflectances must lie strictly inside (0, 1)")
    return MineralSpectra(wavelength_nm, tuple(header[1:]), reflectance)


def albedo_from_diffusive_reflectance(reflectance, margin: float = W_MARGIN):
    """Single-scattering albedo of isotropic scatterers with a given diffusive reflectance.

    Inverts Hapke's diffusive (bihemispherical) reflectance of a medium of isotropic
    scatterers, ``r0 = (1 - gamma) / (1 + gamma)`` with ``gamma = sqrt(1 - w)``
    (Hapke 2012, *Theory of Reflectance and Emittance Spectroscopy*, ch. 8):
    ``gamma = (1 - r0) / (1 + r0)``, ``w = 1 - gamma**2 = 4 r0 / (1 + r0)**2``.
    Laboratory directional-hemispherical reflectance stands in for ``r0``: an
    approximation good enough to give the demo realistic w spectra, not a retrieval.

    Args:
        reflectance: diffusive reflectance (dimensionless), any shape, in [0, 1].
        margin: the result is clipped into ``[margin, 1 - margin]``, strictly inside
            (0, 1) where the inversion is defined; ``0 < margin < 0.5``.

    Returns:
        ndarray of the same shape: single-scattering albedo w (dimensionless).
    """
    if not 0.0 < margin < 0.5:
        raise ValueError(f"margin must lie in (0, 0.5), got {margin!r}")
    reflectance = np.asarray(reflectance, dtype=np.float64)
    if not np.all((reflectance >= 0) & (reflectance <= 1)):
        raise ValueError("diffusive reflectance must lie in [0, 1]")
    w = 4.0 * reflectance / (1.0 + reflectance) ** 2
    return np.clip(w, margin, 1.0 - margin)
