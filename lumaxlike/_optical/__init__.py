"""Optical constants: `OpticalConstants` and its readers, the shipped sets, w from n, k and
grain size (Hapke's equivalent slab) and k from a laboratory spectrum."""
