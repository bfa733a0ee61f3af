"""Strict test configuration: float64 JAX, rank promotion raises, warnings are errors."""

import jax
import pytest

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.filterwarnings("error"))
