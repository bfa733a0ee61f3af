"""Reading cubes, geometry, spectral metadata, laboratory spectra and goniometer tables."""
