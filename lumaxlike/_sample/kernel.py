"""The sampler of one problem: blackjax's HMC with a per-problem adaptation, written to
run under `jax.vmap` over many problems and chains.

The kernel is blackjax's HMC (`blackjax.mcmc.hmc.build_kernel`) with a fixed number of
leapfrog steps, so every lane of a batch does the same work at every iteration (NUTS
under `vmap` runs each iteration as long as the longest trajectory in the batch, as
blackjax's documentation warns). The adaptation is per problem, shared by the problem's
chains, in one `lax.scan` over warm-up and sampling (one copy of the kernel to compile):

1. the chains start from draws of `fit`'s Laplace Gaussian in the unconstrained
   coordinates z, and HMC moves first in z with the Laplace covariance as its dense
   metric (inverse mass matrix);
2. warm-up: the step size is tuned by blackjax's dual averaging
   (`blackjax.adaptation.step_size.dual_averaging_adaptation`) on the mean acceptance
   of the problem's chains; at the end of each of the `WINDOWS` a chain stuck in a
   local mode of negligible mass restarts from the best chain (`_window_end`), HMC's
   coordinates become `transport`'s map estimated from the window's draws of the other
   chains (whitening and a quadratic shear that straightens the b-c ridge), the metric
   the covariance of those draws in the new coordinates, and dual averaging restarts
   from the step size reached (Stan's windowed adaptation, with the Laplace covariance
   in place of its first guess and a map in place of a linear metric alone);
3. at every iteration the trajectory length is drawn uniform in [`MIN_TRAJECTORY`, 1] x
   `MAX_TRAJECTORY` (whitened units) and the step size is the smaller of the tuned one
   and that length over the leapfrog steps (so no fixed length resonates with the
   posterior's scales).

The draws are returned in z.
"""

from __future__ import annotations

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from blackjax.adaptation.step_size import dual_averaging_adaptation

from . import transport

__all__ = [
    "MAX_TRAJECTORY",
    "MIN_TRAJECTORY",
    "REJOIN_LOG_DENSITY",
    "TARGET_ACCEPTANCE",
    "WINDOWS",
    "sample_problem",
]

# Mean acceptance the step size is tuned to: 0.9 rather than Stan's 0.8, for the curved
# b-c ridges, where 0.8 left divergences in most problems (benchmarks/bench_sample.py).
TARGET_ACCEPTANCE = 0.9
# Metric windows as fractions of the warm-up (the last 20 % tunes the step size alone).
WINDOWS = ((0.1, 0.3), (0.3, 0.8))
# Trajectory length (in the metric's whitened units) drawn per iteration, uniform in
# [MIN_TRAJECTORY, 1] x MAX_TRAJECTORY: on a Gaussian a length L correlates successive
# draws of x by cos(L) and of |x - median| by cos(2 L); over [3/8, 3/2] pi both average
# negative (-0.54, -0.1), where [1/4, 1] x 2 pi leaves the tails' at 0 (R-hat of the
# folded draws above 1.01 with 300 draws per chain) and [1/4, 1] x pi was too short for
# the curved posteriors (where the tuned step size mostly limits the length anyway).
MAX_TRAJECTORY = float(1.5 * np.pi)
MIN_TRAJECTORY = 0.25
# A chain whose mean log density over a metric window is this far below the best
# chain's restarts from the best chain (`_window_end`).
REJOIN_LOG_DENSITY = 10.0
# Weight of the previous metric in a window's covariance estimate, in draws.
_SHRINKAGE_DRAWS = 20.0


def _schedule(num_warmup: int, num_samples: int):
    """Per iteration (numpy arrays, the scan's inputs): whether it is in a window, its
    index in the window's draws (the longest window's length where none: a scratch
    slot), and whether a window ends there; and the longest window's length."""
    total = num_warmup + num_samples
    in_window = np.zeros(total, np.bool_)
    offset = np.zeros(total, np.int32)
    ends = np.zeros(total, np.bool_)
    longest = 1
    for start, end in WINDOWS:
        first, last = int(start * num_warmup), int(end * num_warmup)
        if last - first >= 2:
            in_window[first:last] = True
            offset[first:last] = np.arange(last - first)
            ends[last - 1] = True
            longest = max(longest, last - first)
    offset[~in_window] = longest
    return in_window, offset, ends, longest


def sample_problem(
    rng,
    logdensity,
    z_center,
    metric,
    *,
    num_chains,
    num_warmup,
    num_samples,
    integration_steps,
):
    """Draws of one problem's posterior.

    Args:
        rng: a JAX key; logdensity: z (p,) -> the problem's log density (unconstrained
            coordinates); z_center (p,): the chains' starting centre; metric (p, p): the
            Laplace covariance in unconstrained coordinates (positive definite).
    Returns:
        dict: path (num_chains, num_samples, p), the draws in unconstrained
        coordinates; acceptance (mean acceptance probability while sampling),
        step_size, divergences (count while sampling).
    """
    dtype = z_center.dtype
    p = z_center.shape[0]
    kernel = blackjax.mcmc.hmc.build_kernel()
    da_init, da_update, da_final = dual_averaging_adaptation(TARGET_ACCEPTANCE)
    key_start, key_run = jax.random.split(rng)
    noise = jax.random.normal(key_start, (num_chains, p), dtype)
    positions = z_center[None, :] + noise @ jnp.linalg.cholesky(metric).T
    coordinates = transport.identity(p, dtype)
    states = jax.vmap(blackjax.mcmc.hmc.init, in_axes=(0, None))(positions, logdensity)
    step0 = jnp.asarray(1.0 / p**0.25 / integration_steps**0.5, dtype)
    in_window, slot, ends, longest = _schedule(num_warmup, num_samples)
    # a window's draws of z (and a scratch slot for the iterations outside windows),
    # and its per-chain sums: count, log density
    window_draws = jnp.zeros((longest + 1, num_chains, p), dtype)
    zero_sums = (jnp.zeros((), dtype), jnp.zeros(num_chains, dtype))

    def body(carry, xs):
        states, da_state, metric, z_covariance, coordinates, step_size, sums, draws = carry
        i, add, at, window_ends, key = xs
        warming = i < num_warmup
        key_jitter, key_step = jax.random.split(key)
        largest = jnp.where(warming, jnp.exp(da_state.log_step_size), step_size)
        used = _jittered_step(key_jitter, largest, integration_steps, dtype)
        step = (used, metric, integration_steps)
        states, info = _hmc_moves(kernel, key_step, states, logdensity, coordinates, step)
        acceptance = jnp.where(jnp.isfinite(info.acceptance_rate), info.acceptance_rate, 0.0)
        da_state = jax.tree.map(
            lambda new, old: jnp.where(warming, new, old),
            da_update(da_state, jnp.mean(acceptance)),
            da_state,
        )
        z = jax.vmap(transport.to_z, in_axes=(0, None))(states.position, coordinates)
        sums = (
            sums[0] + jnp.where(add, 1.0, 0.0),
            sums[1] + jnp.where(add, states.logdensity, 0.0),
        )
        draws = jax.lax.dynamic_update_index_in_dim(draws, z, at, 0)
        # a real branch (its predicate is the same for every lane): the map's estimate
        # runs at the ends of the windows only, not at every iteration
        states, metric, z_covariance, coordinates = jax.lax.cond(
            window_ends,
            lambda: _window_end(states, z_covariance, coordinates, sums, draws[:-1]),
            lambda: (states, metric, z_covariance, coordinates),
        )
        da_state = jax.tree.map(
            lambda new, old: jnp.where(window_ends, new, old),
            da_init(da_final(da_state)),
            da_state,
        )
        sums = jax.tree.map(lambda a: jnp.where(window_ends, jnp.zeros_like(a), a), sums)
        step_size = jnp.where(i == num_warmup - 1, da_final(da_state), step_size).astype(dtype)
        carry = (states, da_state, metric, z_covariance, coordinates, step_size, sums, draws)
        return carry, (z, acceptance, info.is_divergent)

    total = num_warmup + num_samples
    xs = (
        jnp.arange(total),
        jnp.asarray(in_window),
        jnp.asarray(slot),
        jnp.asarray(ends),
        jax.random.split(key_run, total),
    )
    carry = (states, da_init(step0), metric, metric, coordinates, step0, zero_sums, window_draws)
    carry, (path, acceptance, divergent) = jax.lax.scan(body, carry, xs)
    path, acceptance, divergent = (a[num_warmup:] for a in (path, acceptance, divergent))
    return {
        "path": jnp.swapaxes(path, 0, 1),
        "acceptance": jnp.mean(acceptance),
        "step_size": carry[5],
        "divergences": jnp.sum(divergent),
    }


def _jittered_step(key, largest, integration_steps, dtype):
    """`sample_problem`'s leapfrog step size: at most `largest`, and at most a trajectory
    of random length between MIN_TRAJECTORY and 1 times MAX_TRAJECTORY."""
    fraction = MIN_TRAJECTORY + (1.0 - MIN_TRAJECTORY) * jax.random.uniform(key, (), dtype)
    length = MAX_TRAJECTORY * fraction
    return jnp.minimum(largest, length / integration_steps).astype(dtype)  # dual averaging: float64


def _hmc_moves(kernel, key, states, logdensity, coordinates, step):
    """One HMC transition of every chain (states batched over chains) in the coordinates
    u of `transport`; step = (step size, metric, integration steps)."""
    used, metric, integration_steps = step

    def density(u):
        return logdensity(transport.to_z(u, coordinates))

    def one(key, state):
        return kernel(key, state, density, used, metric, integration_steps)

    return jax.vmap(one)(jax.random.split(key, states.position.shape[0]), states)


def _window_end(states, z_covariance, coordinates, sums, draws):
    """At the end of a metric window: the chains stuck where the posterior has almost no
    mass restarted from the best chain, and HMC's coordinates and metric from the
    window's draws of the others (`transport.fit_coordinates`).

    A chain is stuck where its mean log density over the window is more than
    `REJOIN_LOG_DENSITY` below the best chain's: a local mode (the posterior's b-c
    ridge has them at bounds) whose mass is below exp(-REJOIN_LOG_DENSITY) times its
    volume relative to the best chain's (chains in one mode differ in that mean by a
    fraction of sqrt(p / 2)). It continues from the best chain's state (its own
    momenta make it a chain of its own within a few transitions).

    draws (longest window, chains, p): the window's draws of z, its first `count` rows
    filled.
    """
    count, log_density = sums
    n_per_chain = jnp.maximum(count, 1.0)
    mean_log_density = log_density / n_per_chain
    best = jnp.argmax(mean_log_density)
    kept = mean_log_density >= mean_log_density[best] - REJOIN_LOG_DENSITY
    restart = ~kept
    states = jax.tree.map(
        lambda a: jnp.where(restart.reshape((-1,) + (1,) * (a.ndim - 1)), a[best][None], a),
        states,
    )
    weight = ((jnp.arange(draws.shape[0]) < count)[:, None] & kept[None, :]).astype(draws.dtype)
    new_coordinates, new_covariance, new_metric = transport.fit_coordinates(
        draws, weight, z_covariance, _SHRINKAGE_DRAWS
    )
    moved = transport.move_states(states, coordinates, new_coordinates)
    return moved, new_metric, new_covariance, new_coordinates
