"""The damped Levenberg-Marquardt step of a joint problem, by the Schur complement.

A joint problem (`joint`) has, per band k, p per-band parameters x_k and, for all its
bands, s shared parameters x_s. Its normal equations H delta = -g have arrow structure:

    [ A_1          C_1 ] [ d_1 ]     [ g_1 ]
    [      ...     ... ] [ ... ] = - [ ... ]
    [          A_B C_B ] [ d_B ]     [ g_B ]
    [ C_1^T ... C_B^T D ] [ d_s ]     [ g_s ]

with A_k = J_k^T J_k (p x p), C_k = J_k^T J_{s,k} (p x s) and D = sum_k J_{s,k}^T
J_{s,k} (s x s) (plus the prior precisions on the diagonal). Eliminating the per-band
blocks (as bundle adjustment does) leaves the s x s Schur complement

    S = D - sum_k C_k^T A_k^-1 C_k,   S d_s = -(g_s - sum_k C_k^T A_k^-1 g_k),

then d_k = -A_k^-1 (g_k + C_k d_s): B factorisations of p x p and one of s x s, so the
cost grows linearly with the bands. The damping and the parameters held at their bounds
follow `lm_rules` exactly as the dense solve of `fit.numba_solver` does (Marquardt's diagonal
with the floor relative to the largest diagonal entry of the whole problem; a held
parameter's row and column leave the system).

`arrow_step` is the numba version (one problem, loops), `arrow_step_jax` the JAX one
(a whole chunk of problems at once, p and s unrolled); they compute the same step.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numba

from ..._model._backends import retarget_to_jax, retarget_to_numba
from .. import lm_rules
from ..fit.numba_solver import cholesky, cholesky_solve
from ..ordered_sums import sum_last

__all__ = ["arrow_step", "arrow_step_jax"]

_numba_rules = retarget_to_numba(lm_rules)
_pinned = _numba_rules.pinned
_damped_diagonal = _numba_rules.damped_diagonal
_lm = retarget_to_jax(lm_rules)


@numba.njit(error_model="numpy")
def arrow_step(damping, x, blocks, bounds, scratch, step):
    """The damped step (step_b (bands, p), step_s (s)) of one joint problem; False if
    singular (`numba_lm`'s solve: the state (x, blocks), then the steps' tuple).

    x = (xb (bands, p), xs (s)): the parameters; bounds = (lower, upper) (p + s,),
    per-band ones first; blocks = (a_blocks (bands, p, p), c_blocks (bands, p, s),
    d_block (s, s), gb (bands, p), gs (s)): H and g; scratch = (held_b (bands, p), held_s
    (s) bool, system, factor (p, p), y_blocks (bands, p, s), y_vector (bands, p), schur,
    schur_factor (s, s), rhs (s), column, solution (p)); step = (step_b, step_s), written.
    """
    xb, xs = x
    lower, upper = bounds
    a_blocks, c_blocks, d_block, gb, gs = blocks
    held_b, held_s, system, factor, y_blocks, y_vector = scratch[:6]
    schur, schur_factor, rhs, column, solution = scratch[6:]
    step_b, step_s = step
    n_bands, p = gb.shape
    s = gs.shape[0]
    largest = 0.0
    for band in range(n_bands):
        for a in range(p):
            largest = max(largest, a_blocks[band, a, a])
    for q in range(s):
        largest = max(largest, d_block[q, q])
    for band in range(n_bands):
        for a in range(p):
            held_b[band, a] = _pinned(xb[band, a], lower[a], upper[a], gb[band, a])
    for q in range(s):
        held_s[q] = _pinned(xs[q], lower[p + q], upper[p + q], gs[q])
    for q in range(s):
        rhs[q] = 0.0 if held_s[q] else gs[q]
        for r in range(s):
            schur[q, r] = 0.0 if held_s[q] or held_s[r] else d_block[q, r]
        schur[q, q] = 1.0 if held_s[q] else _damped_diagonal(d_block[q, q], largest, damping)
    for band in range(n_bands):
        for a in range(p):
            for b in range(p):
                held = held_b[band, a] or held_b[band, b]
                system[a, b] = 0.0 if held else a_blocks[band, a, b]
            diagonal = _damped_diagonal(a_blocks[band, a, a], largest, damping)
            system[a, a] = 1.0 if held_b[band, a] else diagonal
        if not cholesky(system, factor):
            return False
        for a in range(p):
            column[a] = 0.0 if held_b[band, a] else gb[band, a]
        cholesky_solve(factor, column, solution)
        for a in range(p):
            y_vector[band, a] = solution[a]
        for q in range(s):
            for a in range(p):
                column[a] = 0.0 if held_b[band, a] or held_s[q] else c_blocks[band, a, q]
            cholesky_solve(factor, column, solution)
            for a in range(p):
                y_blocks[band, a, q] = solution[a]
        for q in range(s):  # S -= C_k^T A_k^-1 C_k, rhs -= C_k^T A_k^-1 g_k (C_k masked)
            if held_s[q]:
                continue
            for a in range(p):
                if held_b[band, a]:
                    continue
                coupling = c_blocks[band, a, q]
                rhs[q] -= coupling * y_vector[band, a]
                for r in range(s):
                    schur[q, r] -= coupling * y_blocks[band, a, r]
    if not cholesky(schur, schur_factor):
        return False
    cholesky_solve(schur_factor, rhs, step_s)
    for q in range(s):
        step_s[q] = -step_s[q]
    for band in range(n_bands):
        for a in range(p):
            value = y_vector[band, a]
            for q in range(s):
                value += y_blocks[band, a, q] * step_s[q]
            step_b[band, a] = -value
    return True


def _cholesky(system):
    """Lower factor (lists) of p x p lists of arrays, and where it is positive definite."""
    p = len(system)
    factor: list[list[Any]] = [[None] * p for _ in range(p)]
    ok = None
    for j in range(p):
        pivot = system[j][j] - sum((factor[j][k] * factor[j][k] for k in range(j)), 0.0)
        ok = (pivot > 0.0) if ok is None else ok & (pivot > 0.0)
        factor[j][j] = jnp.sqrt(jnp.where(pivot > 0.0, pivot, 1.0))
        for i in range(j + 1, p):
            value = system[i][j] - sum((factor[i][k] * factor[j][k] for k in range(j)), 0.0)
            factor[i][j] = value / factor[j][j]
    return factor, ok


def _cholesky_solve(factor, rhs):
    """L L^T x = rhs over lists of arrays."""
    p = len(rhs)
    forward: list[Any] = []
    for i in range(p):
        value = rhs[i] - sum((factor[i][k] * forward[k] for k in range(i)), 0.0)
        forward.append(value / factor[i][i])
    solution: list[Any] = [None] * p
    for i in reversed(range(p)):
        value = forward[i] - sum((factor[k][i] * solution[k] for k in range(i + 1, p)), 0.0)
        solution[i] = value / factor[i][i]
    return solution


def _schur_system(shared, couplings, y_blocks, y_vector):
    """The damped Schur complement S (s x s lists of (n,)) and its right-hand side (s
    of (n,)) of `arrow_step_jax`: shared = (d_block (n, s, s), gs (n, s), held_s (n, s),
    largest (n,), damping (n,)); couplings [q][a], y_blocks [q][a] (n, bands), the C_k
    entries (held ones 0) and A_k^-1 C_k; y_vector [a] (n, bands), A_k^-1 g_k."""
    d_block, gs, held_s, largest, damping = shared
    s, p = len(couplings), len(y_vector)
    schur: list[list[Any]] = [[None] * s for _ in range(s)]
    rhs = []
    for q in range(s):
        for r in range(s):
            entry = jnp.where(held_s[:, q] | held_s[:, r], 0.0, d_block[:, q, r])
            if q == r:
                damped = _lm.damped_diagonal(d_block[:, q, q], largest, damping)
                entry = jnp.where(held_s[:, q], 1.0, damped)
            correction = sum((couplings[q][a] * y_blocks[r][a] for a in range(p)), 0.0)
            schur[q][r] = entry - sum_last(correction)
        correction = sum((couplings[q][a] * y_vector[a] for a in range(p)), 0.0)
        rhs.append(jnp.where(held_s[:, q], 0.0, gs[:, q]) - sum_last(correction))
    return schur, rhs


def arrow_step_jax(x, lower, upper, blocks, gradient, damping):
    """`arrow_step` for a chunk of problems: returns (step_b, step_s, solvable).

    x = (xb (n, bands, p), xs (n, s)); lower, upper: the bounds in x's structure and
    shapes; blocks = (a_blocks (n, bands, p, p), c_blocks (n, bands, p, s), d_block
    (n, s, s)); gradient = (gb (n, bands, p), gs (n, s)); damping (n,). Where a
    problem's damped system is singular its step is 0 and solvable False.
    """
    xb, xs = x
    a_blocks, c_blocks, d_block = blocks
    gb, gs = gradient
    p, s = xb.shape[-1], xs.shape[-1]
    largest = jnp.max(jnp.diagonal(a_blocks, axis1=-2, axis2=-1), axis=(-2, -1))
    if s:
        largest = jnp.maximum(largest, jnp.max(jnp.diagonal(d_block, axis1=-2, axis2=-1), axis=-1))
    held_b = _lm.pinned(xb, lower[0], upper[0], gb)
    held_s = _lm.pinned(xs, lower[1], upper[1], gs)
    band_largest, band_damping = largest[:, None], damping[:, None]
    system = [
        [jnp.where(held_b[..., a] | held_b[..., b], 0.0, a_blocks[..., a, b]) for b in range(p)]
        for a in range(p)
    ]
    for a in range(p):
        damped = _lm.damped_diagonal(a_blocks[..., a, a], band_largest, band_damping)
        system[a][a] = jnp.where(held_b[..., a], 1.0, damped)
    factor, ok_bands = _cholesky(system)
    y_vector = _cholesky_solve(
        factor, [jnp.where(held_b[..., a], 0.0, gb[..., a]) for a in range(p)]
    )
    couplings = [
        [jnp.where(held_b[..., a] | held_s[:, None, q], 0.0, c_blocks[..., a, q]) for a in range(p)]
        for q in range(s)
    ]
    y_blocks = [_cholesky_solve(factor, couplings[q]) for q in range(s)]  # [q][a]: (n, bands)
    solvable = jnp.all(ok_bands, axis=-1)
    if s:
        shared = (d_block, gs, held_s, largest, damping)
        schur, rhs = _schur_system(shared, couplings, y_blocks, y_vector)
        schur_factor, ok_shared = _cholesky(schur)
        solvable = solvable & ok_shared
        steps_s = [-v for v in _cholesky_solve(schur_factor, rhs)]
    else:
        steps_s = []
    steps_b = []
    for a in range(p):
        value = y_vector[a] + sum((y_blocks[q][a] * steps_s[q][:, None] for q in range(s)), 0.0)
        steps_b.append(-value)
    step_b = jnp.stack(steps_b, axis=-1)
    step_s = jnp.stack(steps_s, axis=-1) if s else jnp.zeros_like(xs)
    return (
        jnp.where(solvable[:, None, None], step_b, 0.0),
        jnp.where(solvable[:, None], step_s, 0.0),
        solvable,
    )
