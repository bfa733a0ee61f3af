"""Strict test configuration: float64 JAX, rank promotion raises, warnings are errors."""

import atexit
import os
import shutil
import tempfile

# lumaxlike caches its compiled numba kernels in LUMAXLIKE_CACHE_DIR: a fresh directory per
# test session (shared with the session's subprocesses, removed at its end) keeps the
# tests off the user's own cache and measures them from a cold start. Set before
# lumaxlike is imported.
if "LUMAXLIKE_CACHE_DIR" not in os.environ:
    os.environ["LUMAXLIKE_CACHE_DIR"] = tempfile.mkdtemp(prefix="lumaxlike-cache-")
    atexit.register(shutil.rmtree, os.environ["LUMAXLIKE_CACHE_DIR"], ignore_errors=True)

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.filterwarnings("error"))
