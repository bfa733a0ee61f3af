"""`invert`: the single-scattering albedo w of every pixel and band (`invert`), its
rules written once (`rules`), its JAX and numba solvers (`jax_solver`, `numba_solver`),
and the closed-form inversion of an empirical photometric function (`photometric_rules`,
`photometric_solver`). Import the modules themselves: this file holds no code.
"""
