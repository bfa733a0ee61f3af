"""The private parts of lumaxlike's dependencies that it relies on, one small module each.

`numba_internals` (numba's cache classes) and `jax_internals` (the jaxpr structures and
the names of the JAX primitives the jaxpr translators match). Nothing else in lumaxlike
reaches into numba's or JAX's private modules; each module's `problems()` lists what a
new release moved, and tests/test_compat.py fails naming it. pyproject.toml bounds both
dependencies below their next release (CONTRIBUTING.md: raising a bound).
"""
