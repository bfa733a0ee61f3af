"""The JAX solver's chunking for accelerators, tested on the CPU: chunk sizes as a pure
function of device memory and dtype, the two-deep pipeline's order, and `invert` using
both with a stand-in device memory."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

import lumaxlike
from lumaxlike._inverse import chunking
from lumaxlike._inverse import invert as invert_module

from .helpers import FULL_PARAMS, random_geometry


def test_cpu_chunks_are_the_fixed_default():
    assert chunking.chunk_problems(np.float64, None) == chunking.PROBLEMS_PER_CHUNK
    assert chunking.chunk_problems(np.float32, None) == chunking.PROBLEMS_PER_CHUNK
    assert invert_module.default_chunk_pixels(64) == chunking.PROBLEMS_PER_CHUNK // 64


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_accelerator_chunks_follow_device_memory(dtype):
    itemsize = np.dtype(dtype).itemsize
    gib = 2**30
    # 16 GiB: an eighth of it at 48 floats per problem, down to a power of two (by hand)
    fitting = 16 * gib // 8 // (48 * itemsize)
    expected = 2 ** math.floor(math.log2(fitting))
    assert chunking.chunk_problems(dtype, 16 * gib) == expected
    # more memory never gives smaller chunks; float32 chunks hold at least float64's
    sizes = [chunking.chunk_problems(dtype, m * gib) for m in (1, 2, 4, 8, 16, 32, 64, 141)]
    assert sizes == sorted(sizes)
    assert chunking.chunk_problems(np.float32, 4 * gib) == 2 * chunking.chunk_problems(
        np.float64, 4 * gib
    )
    # bounded on both sides: a huge device stops at the cap, a tiny one at the floor
    assert chunking.chunk_problems(dtype, 1 << 50) == chunking.ACCELERATOR_MAX_PROBLEMS
    assert chunking.chunk_problems(dtype, 1 << 20) == chunking.PROBLEMS_PER_CHUNK // 16
    # the pipeline's two chunks fit in a quarter of the device
    for m in (8, 16, 141):
        assert 2 * chunking.chunk_problems(dtype, m * gib) * 48 * itemsize <= m * gib / 4


def test_device_memory_is_read_from_the_accelerators_stats_only():
    gpu = SimpleNamespace(
        platform="gpu", memory_stats=lambda: {"bytes_limit": 80 * 2**30, "bytes_in_use": 0}
    )
    assert chunking.device_memory_bytes(gpu) == 80 * 2**30
    assert (
        chunking.device_memory_bytes(SimpleNamespace(platform="gpu", memory_stats=lambda: None))
        is None
    )
    cpu = SimpleNamespace(platform="cpu", memory_stats=lambda: {"bytes_limit": 1})
    assert chunking.device_memory_bytes(cpu) is None


def test_pipeline_launches_one_chunk_ahead_of_each_collect():
    events = []
    chunking.pipelined(
        range(3),
        lambda k: events.append(("launch", k)) or k,
        lambda k: events.append(("collect", k)),
    )
    assert events == [
        ("launch", 0),
        ("launch", 1),
        ("collect", 0),
        ("launch", 2),
        ("collect", 1),
        ("collect", 2),
    ]
    events.clear()
    chunking.pipelined([], lambda k: events.append(k), lambda k: events.append(k))
    assert events == []


def test_invert_sizes_jax_chunks_from_the_device_and_pipelines_them(monkeypatch):
    """A stand-in accelerator with little memory: chunks of its size (the floor, 16384
    problems: 256 pixels of 64 bands), each launched before the previous one is
    collected, the results those of the numba solver."""
    n_pixels, n_bands = 300, 64
    rng = np.random.default_rng(3)
    geometry = random_geometry(n_pixels, rng)
    refl = lumaxlike.amsa(
        rng.uniform(0.05, 0.95, (n_pixels, n_bands)), *geometry, FULL_PARAMS, backend="numba"
    )
    events = []
    launch, fetch = invert_module._launch_chunk_jax, invert_module._fetch

    def recording_launch(pieces, *rest):
        events.append(("launch", len(pieces[0]), rest[1]))
        return launch(pieces, *rest)

    def recording_fetch(solved, with_slope):
        events.append(("collect", with_slope))
        return fetch(solved, with_slope)

    monkeypatch.setattr(invert_module, "device_memory_bytes", lambda device: 2**20)
    monkeypatch.setattr(invert_module, "_launch_chunk_jax", recording_launch)
    monkeypatch.setattr(invert_module, "_fetch", recording_fetch)
    result = lumaxlike.invert(refl, *geometry, FULL_PARAMS, solver="jax", refl_sigma=1e-3)
    chunk = chunking.PROBLEMS_PER_CHUNK // 16 // n_bands
    assert events == [
        ("launch", chunk, chunk),
        ("launch", n_pixels - chunk, chunk),
        ("collect", True),
        ("collect", True),
    ]
    numba = lumaxlike.invert(refl, *geometry, FULL_PARAMS, solver="numba", refl_sigma=1e-3)
    np.testing.assert_array_equal(result.status, numba.status)
    np.testing.assert_array_equal(result.iterations, numba.iterations)
    np.testing.assert_allclose(result.w, numba.w, atol=1e-9, rtol=0)
    np.testing.assert_allclose(result.sigma, numba.sigma, rtol=1e-6)
