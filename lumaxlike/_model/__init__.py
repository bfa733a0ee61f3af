"""The Hapke AMSA forward model: equations written once (`equations`), retargeted to JAX
(`jax_model`) and numba (`numba_model`), and the public `amsa` (`forward`)."""
