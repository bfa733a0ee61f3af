"""Thermal emission: `remove_thermal` (the temperature of every pixel and its
thermally corrected reflectance), the directional emissivity of a Hapke model by
quadrature of its own reflectance (`emissivity`), the per-pixel fits' rules written once
(`rules`) and their JAX and numba drivers (`jax_solver`, `numba_solver`). The physics
(Planck, the emissivity series) is `lumaxlike._model.thermal`."""
