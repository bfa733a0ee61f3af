"""JAX `fit` steps its problems in rounds (`compaction`): refilled into one batch of
fixed slots (the default), or compacted into smaller batches between rounds; either way
the same steps, status and values, to the bit, as stepping the whole chunk, and batch
sizes from a fixed set (one round program for the refilled batch)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lumaxlike
from lumaxlike._inverse.fit import compaction, jax_solver, refill
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
                *args,
                schedule="compact" if _compact else "whole",
                sizes=sizes[_compact],
                **kwargs,
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


def _stand_in_solver(need, max_steps, round_steps):
    """`refill.run_refilled`'s functions for problems that are not solved but counted:
    problem k converges after need[k] steps (0: at its start); a batch is a dict of
    (slots,) arrays need, iterations, converged."""

    def stepped(batch, steps):
        batch = dict(batch)
        for _ in range(steps):
            moving = ~batch["converged"] & (batch["iterations"] < max_steps)
            batch["iterations"] = batch["iterations"] + moving
            batch["converged"] = batch["converged"] | (
                moving & (batch["iterations"] >= batch["need"])
            )
        return batch, jnp.asarray(True)

    def gather(batch, slots, padding):
        batch = {name: jnp.asarray(a)[slots] for name, a in batch.items()}
        batch["converged"] = batch["converged"] | padding
        return batch

    def scatter(results, batch, origin):
        if results is None:
            return {name: jnp.asarray(a) for name, a in batch.items()}
        return {name: r.at[origin].set(batch[name], mode="drop") for name, r in results.items()}

    def progress_of(batch):
        return batch["converged"], batch["iterations"]

    rounds = partial(
        refill.refilled_rounds,
        run_round=lambda batch: stepped(batch, round_steps),
        progress_of=progress_of,
        scatter=scatter,
        max_steps=max_steps,
    )
    chunk = {
        "need": jnp.asarray(need),
        "iterations": jnp.zeros(need.shape, jnp.int32),
        "converged": jnp.asarray(need == 0),
    }
    return dict(
        chunk=chunk,
        progress_of=progress_of,
        gather=gather,
        rounds=rounds,
        run_tail=lambda batch, steps=max_steps: stepped(batch, steps),
        scatter=scatter,
    )


@pytest.mark.parametrize(("tail", "round_steps"), [(None, 3), (4, 3), (4, 5)])
def test_refilled_problems_take_their_own_steps(tail, round_steps):
    """Every problem gets its own steps up to max_steps, also those that enter the batch
    late, whatever the others need; those done at their start never enter."""
    need = np.random.default_rng(3).integers(0, 25, 60).astype(np.int32)
    need[-3:] = 30  # the last queued: they enter late and reach max_steps there
    max_steps = 10
    sizes = []
    results = refill.run_refilled(
        **_stand_in_solver(need, max_steps, round_steps),
        n_problems=need.size,
        slots=8,
        tail=tail,
        sizes=sizes,
    )
    np.testing.assert_array_equal(results["iterations"], np.minimum(need, max_steps))
    np.testing.assert_array_equal(results["converged"], need <= max_steps)
    assert set(sizes) == ({8} if tail is None else {8, tail})
    if tail is not None:
        assert sizes.count(tail) == 1  # the tail runs to its end in one round
    assert len(sizes) > max_steps  # many rounds: the queue went through the slots


@pytest.fixture(scope="module")
def refilled_and_not():
    """A noisy (w, b, c) fit (problems need ~4 to max_iter steps) stepped whole, in
    lockstep with a tail of 64, and through a refilled batch of 96 slots of its 512 problems (a batch size used nowhere
    else, so its round program is traced here), max_iter 12: some problems stop there,
    several after entering the batch late. Every solve's raw outputs,
    the refilled solves' round sizes and the round programs traced."""
    refl, geometry, _, rng = scene(CHUNK, 8, 12, seed=5)
    noisy = refl + rng.normal(0.0, 3e-4, refl.shape)
    free = ("w", "b", "c")
    outputs, sizes, traced = {}, [], []

    def on_duration(event, duration_secs, **kwargs):
        if event == "/jax/core/compile/jaxpr_trace_duration":
            traced.append(kwargs.get("fun_name"))

    for schedule in ("whole", "refill", "lockstep"):
        outputs[schedule] = []

        def solve(*args, _schedule=schedule, **kwargs):
            extra = {
                "refill": {"refill_sizes": (96, None), "sizes": sizes},
                "lockstep": {"refill_sizes": (96, 64)},  # a tail of 64
            }.get(_schedule, {})
            solved = jax_solver.solve_fit_jax(*args, schedule=_schedule, **extra, **kwargs)
            outputs[_schedule].append(solved)
            return solved

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(fit_module, "solve_fit_jax", solve)
            if schedule == "refill":
                jax.monitoring.register_event_duration_secs_listener(on_duration)
            try:
                lumaxlike.fit(
                    noisy, *geometry, start_for(free), free=free, chunk_size=CHUNK, max_iter=12
                )
            finally:
                if schedule == "refill":
                    jax.monitoring.unregister_event_duration_listener(on_duration)
    return outputs, sizes, traced


def test_refill_takes_the_same_steps(refilled_and_not):
    outputs, sizes, _ = refilled_and_not
    assert len(outputs["whole"]) == len(outputs["refill"]) == 1  # one chunk
    whole, refilled = outputs["whole"][0], outputs["refill"][0]
    iterations = np.asarray(whole["iterations"])
    assert np.ptp(iterations) >= 6  # a spread of step counts
    # problems past the first 96 (in queue order) that stop at max_iter: they entered late
    stopped = np.asarray(whole["status"]).reshape(-1) == int(lumaxlike.Status.MAX_ITER)
    assert np.sum(stopped[96:]) >= 5
    assert set(sizes) == {96}
    for name in ("values", "status", "iterations", "cost", "jtj"):
        np.testing.assert_array_equal(np.asarray(refilled[name]), np.asarray(whole[name]))


def test_lockstep_takes_the_same_steps(refilled_and_not):
    outputs, _, _ = refilled_and_not
    whole, lockstep = outputs["whole"][0], outputs["lockstep"][0]
    # problems left after the first lockstep round: the tail took them
    assert np.sum(np.asarray(whole["iterations"]) >= refill.LOCKSTEP_STEPS) > 0
    for name in ("values", "status", "iterations", "cost", "jtj"):
        np.testing.assert_array_equal(np.asarray(lockstep[name]), np.asarray(whole[name]))


@pytest.mark.parametrize("tail", [4, 40])
def test_lockstep_problems_take_their_own_steps(tail):
    """In lockstep, the whole chunk goes on in rounds while more than `tail` problems
    are left; then they finish in the tail, each with its own steps."""
    need = np.random.default_rng(3).integers(0, 25, 60).astype(np.int32)
    max_steps, round_steps, sizes = 10, 3, []
    solver = _stand_in_solver(need, max_steps, round_steps)
    del solver["rounds"]
    results = refill.run_lockstep(
        **solver,
        run_round=lambda batch: solver["run_tail"](batch, round_steps),
        n_problems=need.size,
        max_steps=max_steps,
        tail=tail,
        sizes=sizes,
    )
    np.testing.assert_array_equal(results["iterations"], np.minimum(need, max_steps))
    np.testing.assert_array_equal(results["converged"], need <= max_steps)
    expected = []  # whole rounds until none or at most `tail` are left, then the tail
    for k in range(1, max_steps):
        expected.append(need.size)
        left = np.sum(np.minimum(need, max_steps) > k * round_steps)
        if left <= tail:
            expected += [tail] if left else []
            break
    assert sizes == expected and len(expected) >= 2


def test_refill_compiles_one_program_for_its_rounds(refilled_and_not):
    _, sizes, traced = refilled_and_not
    assert len(sizes) > 12  # many rounds, with problems refilled between them
    # "_refill_rounds", or "_refill_rounds_stored" where lumaxlike's JAX cache stores it:
    # the rounds and their refills in one program, no round program of their own
    assert sum(name.startswith("_refill_rounds") for name in traced) == 1
    assert not any(name.startswith("_lm_round") for name in traced)
