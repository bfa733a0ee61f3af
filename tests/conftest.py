"""Strict test configuration: float64 JAX, rank promotion raises, warnings are errors."""

import os
import tempfile

# numba caches compiled kernels keyed on the kernel's own file only, not on the equations
# it inlines: a fresh cache per test session (shared with the session's subprocesses)
# keeps edited physics from being served stale. Set before numba is imported.
os.environ.setdefault("NUMBA_CACHE_DIR", tempfile.mkdtemp(prefix="lumaxlike-numba-cache-"))

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.filterwarnings("error"))
