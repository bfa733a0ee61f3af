"""Intimate-mixture unmixing through the Hapke model: mass fractions per pixel.

`unmix` (`unmix`: either route, either solver), its options declared once (`options`:
`UnmixSettings`, which the command line's parser reads: this ``__init__`` imports
nothing), the endmembers (`endmembers`, `band_matching`), the mixing rule (`mixing`,
`phase`), the routes' solvers (`numba_one_step`, `jax_unmix`, `numba_unmix`,
`simplex_qp`), free grain sizes and npFe0 (`optical`, `optical_unmix`, `optical_numba`,
`optical_jax`) and the result (`result`: `UnmixResult`).
"""
