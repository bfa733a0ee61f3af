"""Joint and regional fits, `fit`'s ``shared=``, ``prior=``, ``regions=``/``regional=``
and ``starts=``: the driver of joint fits (`joint`) and of regional ones
(`regional_fit`, `regional`), a chunk of joint problems (`chunk`), their JAX and numba
solvers (`jax_solver`, `numba_solver`), the Schur-complement step (`schur`), the priors
(`priors`), the covariance (`covariance`), the result type (`result`) and restarts
(`restarts`). Import the modules themselves: this file holds no code.
"""
