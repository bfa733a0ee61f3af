"""Photometric normalisation: reflectance at each pixel's geometry -> reflectance at a
standard geometry (`normalize.normalize`), through the albedo `invert` recovers."""
