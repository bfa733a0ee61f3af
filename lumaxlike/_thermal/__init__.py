"""Thermal emission: `remove_thermal` (`api`: the temperature of every pixel and its
thermally corrected reflectance), its options declared once (`options`), its arguments
checked (`inputs`), the pixels solved by chunks (`pixels`) by the continuum or prior fit
(`continuum`, `prior`, what they share in `fit_common`) and corrected at T
(`correction`); the directional emissivity of a Hapke model by quadrature of its own
reflectance (`emissivity`), the per-pixel fits' rules written once (`rules`,
`band_rules`, `prior_rules`) and their JAX and numba drivers (`solvers`,
`prior_solvers`, `numba_kernels`, `prior_kernels`). The physics (Planck, the emissivity
series) is `lumaxlike._model.thermal`."""
