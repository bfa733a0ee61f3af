"""JAX `fit` compacts its unconverged problems between rounds (`compaction`):
the same steps, status and values, to the bit, as stepping the whole chunk; batch sizes
from a fixed set."""

import numpy as np
import pytest

import lumaxlike
from lumaxlike._inverse.fit import compaction, jax_solver
from lumaxlike._inverse.fit import fit as fit_module

from .test_fit import CHUNK, scene, start_for


def test_bucket_sizes_are_powers_of_the_base():
    assert compaction.bucket_size(1, 4096) == compaction.SMALLEST_BUCKET
    smallest, base = compaction.SMALLEST_BUCKET, compaction.BUCKET_BASE
    assert compaction.bucket_size(smallest + 1, 4096) == smallest * base
    batch = smallest * base**3
    assert (
        compaction.bucket_size(batch // base + 1, batch) == batch
    )  # no smaller bucket holds them: go on as is
    assert (
        compaction.bucket_size(10, 12) == 12
    )  # a batch below the smallest bucket is never padded up


def test_accelerator_buckets_are_powers_of_its_base():
    smallest, base = compaction.SMALLEST_BUCKET, compaction.ACCELERATOR_BUCKET_BASE
    assert compaction.bucket_size(smallest + 1, 1 << 20, base) == smallest * base
    assert compaction.bucket_size(smallest * base + 1, 1 << 20, base) == smallest * base**2
    batch = smallest * base**2 + 2
    assert compaction.bucket_size(batch - 1, batch, base) == batch  # none smaller holds them


@pytest.fixture(scope="module")
def compacted_and_not():
    """A noisy (w, b, c) fit whose problems need from ~4 to ~20 steps, both ways."""
    refl, geometry, _, rng = scene(CHUNK, 8, 12, seed=5)
    noisy = refl + rng.normal(0.0, 3e-4, refl.shape)
    free = ("w", "b", "c")
    results, sizes = {}, {}
    for compact in (True, False):
        sizes[compact] = []

        def solve(*args, _compact=compact, **kwargs):
            return jax_solver.solve_fit_jax(
                *args, compact=_compact, sizes=sizes[_compact], **kwargs
            )

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(fit_module, "solve_fit_jax", solve)
            results[compact] = lumaxlike.fit(
                noisy, *geometry, start_for(free), free=free, chunk_size=CHUNK
            )
    return results, sizes, noisy.shape[0] * noisy.shape[1]


def test_compaction_takes_the_same_steps(compacted_and_not):
    results, sizes, n_problems = compacted_and_not
    compacted, whole = results[True], results[False]
    assert np.ptp(whole.iterations) >= 4  # a spread of step counts, so compaction happens
    assert min(sizes[True]) < n_problems
    np.testing.assert_array_equal(compacted.status, whole.status)
    np.testing.assert_array_equal(compacted.iterations, whole.iterations)
    for name in compacted.free:
        np.testing.assert_array_equal(compacted[name], whole[name])
    np.testing.assert_array_equal(compacted.covariance, whole.covariance)
    bucket_set = {n_problems} | {
        compaction.SMALLEST_BUCKET * compaction.BUCKET_BASE**k for k in range(8)
    }
    assert set(sizes[True]) <= bucket_set
    assert set(sizes[False]) == {n_problems}
