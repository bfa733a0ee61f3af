"""The solvers' chunking, tested on the CPU: the JAX solvers' chunk shapes (a few sizes,
shared by calls of nearby sizes), chunk sizes as a pure function of device
memory and dtype, the two-deep pipeline's order, and `invert` using them with a
stand-in device memory."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

import lumaxlike
from lumaxlike._inverse import chunking
from lumaxlike._inverse.albedo import invert as invert_module
from lumaxlike._model import jax_cache, jax_executables
from lumaxlike.testing import multi_angle_geometry, multi_angle_reflectance

from .helpers import FULL_PARAMS, random_geometry


def test_balanced_chunks_are_equal_few_and_within_the_limit():
    for largest in (1, 37, 64, 512, 5000):
        for n_pixels in range(0, 3 * largest + 2):
            chunk = chunking.balanced_chunk(n_pixels, largest)
            assert 1 <= chunk <= largest
            # as many chunks as the limit needs, no more
            assert -(-max(n_pixels, 1) // chunk) == -(-max(n_pixels, 1) // largest)
            if n_pixels > 64:  # at most 63 padded pixels per chunk
                n_chunks = -(-n_pixels // chunk)
                assert chunk * n_chunks - n_pixels < 64 * n_chunks
    # calls of up to 512 pixels: 15 shapes in all, each compiled once
    shapes = {chunking.balanced_chunk(n_pixels, 512) for n_pixels in range(1, 513)}
    assert sorted(shapes) == [1, 2, 4, 8, 16, 32, 64] + list(range(128, 513, 64))
    assert chunking.balanced_chunk(40, 512) == 64
    assert chunking.balanced_chunk(600, 512) == 320  # two chunks of 300
    assert chunking.balanced_chunk(100, 37) == 37  # three of 34, rounded up to 64: capped


def test_solver_chunks_share_one_shape_per_size_class():
    for largest in (1, 37, 64, 512, 5000):
        shapes = set()
        for n_pixels in range(0, 3 * largest + 2):
            chunk = chunking.call_chunk("jax", n_pixels, largest)
            assert 1 <= chunk <= largest
            if n_pixels >= largest:  # every call of a chunk or more: one shape
                assert chunk == largest
            else:  # one chunk, padded by less than the call (and by < 64 above 64)
                assert max(n_pixels, 1) <= chunk < 2 * max(n_pixels, 1)
                assert n_pixels <= 64 or chunk - n_pixels < 64
            shapes.add(chunk)
            # numba's kernels compile once for any shape: as large as allowed
            assert chunking.call_chunk("numba", n_pixels, largest) == min(largest, max(n_pixels, 1))
        assert len(shapes) <= 7 + largest // 64 + 1  # 1, 2, ..., 64, then multiples of 64
    assert chunking.call_chunk("jax", 40, 512) == 64
    assert chunking.call_chunk("jax", 600, 512) == 512  # two chunks of 512, the second padded
    assert chunking.call_chunk("jax", 300, 512) == 320


def test_fit_and_invert_calls_of_nearby_sizes_share_their_compiled_programs(monkeypatch):
    """40 and 50 pixels are both one chunk of 64 for the JAX solvers: the second call
    compiles and loads nothing, and its first 40 pixels' results are the first call's,
    bit for bit (the same program; what fills the rest of the chunk changes nothing)."""
    monkeypatch.delenv(jax_cache.JAX_CACHE_VARIABLE, raising=False)  # the store in use
    monkeypatch.setattr(jax_executables, "_memory", {})  # none compiled in this process
    rng = np.random.default_rng(11)
    params = lumaxlike.HapkeParams(b=0.3, c=0.4)
    geometry = multi_angle_geometry(50, 3, rng)
    refl = multi_angle_reflectance(rng.uniform(0.2, 0.8, (50, 1)), *geometry, params)

    def calls(n_pixels):
        part = [a[:n_pixels] for a in (refl, *geometry)]
        fitted = lumaxlike.fit(*part, params, free=("w",), solver="jax")
        single = [a[:, 0] for a in part]  # invert: one observation per pixel
        return fitted, lumaxlike.invert(*single, params, "jax")

    fitted_40, inverted_40 = calls(40)
    first = dict(jax_executables.store_events)
    assert first["compiled"] + first["loaded"] > 0  # the first call went through the store
    fitted_50, inverted_50 = calls(50)
    assert jax_executables.store_events == first
    assert np.all(fitted_50.status == lumaxlike.Status.CONVERGED)
    np.testing.assert_array_equal(fitted_50.values["w"][:40], fitted_40.values["w"])
    np.testing.assert_array_equal(fitted_50.iterations[:40], fitted_40.iterations)
    np.testing.assert_array_equal(inverted_50.w[:40], inverted_40.w)


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
    chunk = chunking.PROBLEMS_PER_CHUNK // 16 // n_bands  # 256 pixels fit the device
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
