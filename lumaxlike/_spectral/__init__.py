"""Spectral parameters: continuum removal, band analysis and the named M3, Lucey and
CRISM products, on w, on normalised reflectance or on any reflectance, per pixel over
arrays ``(..., bands)``.

By feature:

* :mod:`.options`: `SpectralSettings`, the options of `spectral_parameters` declared once
  (and what spectra can hold, `QUANTITIES`), importing nothing heavy; :mod:`.defaults`:
  the default tolerance it shares with the kernels;
* :mod:`.wavelengths`: the checks of a spectral axis and its bad bands, the band nearest
  a wavelength and its kernel (median over neighbouring bands), refused by name when
  missing;
* :mod:`.continuum`: `continuum_removed`: the upper convex hull (numba) and the straight
  line between two shoulders (NumPy);
* :mod:`.bands`: `band_parameters`: centre, depth, area and asymmetry of one absorption;
* :mod:`.declarations`: `SpectralProduct`, one product declared as data, and the band
  values a product's function reads;
* :mod:`.m3`, :mod:`.lucey`, :mod:`.crism`: the products, each with its published
  definition;
* :mod:`.products`: the registry `SPECTRAL_PRODUCTS`, `spectral_parameters` and its
  result `SpectralParameters`, and `spectral_parameters_block`, the pure function of one
  block the front ends share.

This ``__init__`` imports nothing: the public names are re-exported by
`lumaxlike/__init__.pyi` from their modules.
"""
