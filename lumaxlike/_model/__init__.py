"""The forward models: the Hapke model family (AMSA by default; its configurations in
`family`) and the empirical photometric functions (`photometric`), their equations
written once (`equations`, `h_functions`) and retargeted to JAX (`jax_model`) and numba
(`numba_model`) by `_backends`; the public `amsa` and `h_function` (`forward`) and
`reflectance` (`model_forward`).

Also the derivatives `fit` and `sample` take (`columns_program`, one program of JAX's
JVPs, evaluated in parts by `jaxpr_split` and printed for numba by `numba_jacobian`), the
numba kernels' parallel loop (`numba_threads`), and the caches of compiled numba kernels
and JAX programs (`numba_cache`, `jax_cache`, `jax_executables`).
"""
