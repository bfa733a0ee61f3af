"""Posterior sampling of the Hapke parameters (blackjax HMC, batched over problems):
`sample` (`sample.sample`), its options declared once (`options`: `SampleSettings`), its
result (`result`), the problems' layout, start and transforms, the chunk programs
(`program`, `kernel`), the chains' diagnostics and the mode checks (`modes`), and the maps
the front ends write (`maps`). Import the modules themselves: this file holds no code, so
that the command line's parser reads `options` without JAX.
"""
