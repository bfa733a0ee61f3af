"""The spectral parameters' defaults that their options and kernels share, importing
nothing: `SpectralSettings` (which the command line's parser reads) and the spectral axis's
functions (`lumaxlike._spectral.wavelengths`, which the products import) both read them."""

from __future__ import annotations

__all__ = ["DEFAULT_TOLERANCE"]

DEFAULT_TOLERANCE = 0.01
"""How far [um] the band nearest a product's wavelength may lie from it: 10 nm, half of
M3's 20 nm spacing near 1 um (its band centres lie within ~2 nm of the pipeline's
wavelengths), and ~1.5 of CRISM's 6.55 nm channels."""
