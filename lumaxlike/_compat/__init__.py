"""The private parts of lumaxlike's dependencies that it relies on, one small module each.

`numba_internals` (numba's cache classes) and `jax_internals` (the jaxpr structures, the
names of the JAX primitives the jaxpr translators match, and the settings of JAX's
persistent compilation cache). Nothing else in lumaxlike reaches into numba's or JAX's
private modules; each of these two modules' `problems()` lists what a new release moved,
and tests/test_compat.py fails naming it. `xla_log` keeps XLA's "Very slow compile?"
banner, which C++ writes straight to stderr, off it. pyproject.toml bounds both
dependencies below their next release (CONTRIBUTING.md: raising a bound).
"""
