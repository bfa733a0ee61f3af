"""A small convex quadratic programme on the simplex, solved exactly by an active set (numba).

    minimise  1/2 x^T A x - c^T x   over x (p,)
    subject to x_j >= 0, and sum_j x_j = 1 (`equality`) or sum_j x_j <= 1 (otherwise).

Both unmixing routes need it: the two-step route's w-space least squares (A = W S W^T,
c = W S w_obs) is one such problem per pixel; the one-step route's Levenberg-Marquardt
solves one per step for its damped linearised subproblem. It is Lawson and Hanson's
(1974, ch. 23) NNLS active-set method with the sum constraint added to the working set:
a set `free` of variables allowed to move and a flag `sum_active` (always on with
`equality`). Inner phase: solve the equality-constrained problem on the working set
(`equality_solve`); if the solution z is feasible, move there and go to the outer phase,
else step from x toward z until the first variable reaches 0 (or the sum reaches 1; a
z_j at or below `FRACTION_FLOOR` counts as reaching 0),
take it out of `free` (or set `sum_active`) and repeat. Outer phase: Lagrange
multipliers of the bounds at x (mu_j = (A x - c)_j + nu, nu the sum's multiplier);
if none is below -`MULTIPLIER_FLOOR` (relative to A's scale), x is optimal; else free the
variable with the most negative multiplier (or drop the sum inequality) and go to the inner
phase. Variables at their bound come back exactly 0.

The equality-constrained problem with the sum on is solved in the null space of the
constraint, relative to a reference variable r (the free one with the largest x):
x = e_r + sum_a y_a (e_a - e_r), a reduced Hessian B_ab = A_ab - A_ar - A_rb + A_rr.
The reduced system is scaled to unit diagonal and factorised by Cholesky; a pivot below
`PIVOT_FLOOR` (a variance inflation above `covariance.MAX_VARIANCE_INFLATION`) means the
working set does not determine the solution (collinear endmembers): `QP_SINGULAR`.

The JAX twin (`jax_unmix`) follows the same rules, step for step, on lanes of problems.
"""

from __future__ import annotations

import math

import numba

from .._inverse.fit.covariance import MAX_VARIANCE_INFLATION

__all__ = [
    "PIVOT_FLOOR",
    "MULTIPLIER_FLOOR",
    "FRACTION_FLOOR",
    "FLOAT32_FRACTION_FLOOR",
    "FLOAT32_MULTIPLIER_FLOOR",
    "QP_OK",
    "QP_SINGULAR",
    "QP_STALLED",
    "max_qp_steps",
    "scaled_cholesky",
    "scaled_solve",
    "equality_solve",
    "simplex_qp",
    "vertex_start",
    "interior_start",
    "reduced_covariance",
]

PIVOT_FLOOR = 1.0 / MAX_VARIANCE_INFLATION
# Fractions are resolved to 1e-10 (the solvers' default step tolerance): a fraction the
# equality-constrained solution puts at or below FRACTION_FLOOR [-] is taken to its bound
# 0, and a bound whose multiplier is above -MULTIPLIER_FLOOR * max_a A_aa (a pull that
# would move the fraction by less than ~FRACTION_FLOOR) is kept. At a noise-free
# solution an absent endmember's multiplier is 0 (the bound is weakly active): without
# the floors the solver's tolerance and rounding would leave it at ~1e-11 instead of 0.
# MULTIPLIER_FLOOR is 10 x FRACTION_FLOOR, so a variable freed for its multiplier is not
# dropped again at once (its fraction moves by ~|mu| / (4 max A) or more).
FRACTION_FLOOR = 1e-10
MULTIPLIER_FLOOR = 1e-9
# The same in float32 (the JAX lanes on float32 input), as its tolerance (1e-5, not 1e-10)
# resolves fractions: float32 rounds a multiplier to ~1e-7 of max A, and with the float64
# floors a weakly active bound was freed by its rounding and dropped again, step after step
# (QP_STALLED, seen at a noise-free pixel).
FLOAT32_FRACTION_FLOOR = 1e-6
FLOAT32_MULTIPLIER_FLOOR = 1e-5
QP_OK = 0
QP_SINGULAR = 1  # the working set does not determine the solution
QP_STALLED = 2  # more than `max_qp_steps` steps (cycling by rounding)


def max_qp_steps(p: int) -> int:
    """Steps (inner and outer) allowed per programme: Lawson-Hanson needs ~2-3 p."""
    return 6 * p + 10


@numba.njit(error_model="numpy", inline="always")
def scaled_cholesky(system, factor, scale):
    """Cholesky factor of `system` scaled to unit diagonal (scale = sqrt(diag)); False if
    a diagonal entry is not positive or a pivot falls below `PIVOT_FLOOR`."""
    p = system.shape[0]
    for a in range(p):
        if not system[a, a] > 0.0:
            return False
        scale[a] = math.sqrt(system[a, a])
    for j in range(p):
        pivot = system[j, j] / (scale[j] * scale[j])
        for k in range(j):
            pivot -= factor[j, k] * factor[j, k]
        if not pivot > PIVOT_FLOOR:
            return False
        root = math.sqrt(pivot)
        factor[j, j] = root
        for i in range(j + 1, p):
            value = system[i, j] / (scale[i] * scale[j])
            for k in range(j):
                value -= factor[i, k] * factor[j, k]
            factor[i, j] = value / root
    return True


@numba.njit(error_model="numpy", inline="always")
def scaled_solve(factor, scale, rhs, solution):
    """Solve system y = rhs from `scaled_cholesky`'s factor and scale, into `solution`."""
    p = rhs.shape[0]
    for i in range(p):
        value = rhs[i] / scale[i]
        for k in range(i):
            value -= factor[i, k] * solution[k]
        solution[i] = value / factor[i, i]
    for i in range(p - 1, -1, -1):
        value = solution[i]
        for k in range(i + 1, p):
            value -= factor[k, i] * solution[k]
        solution[i] = value / factor[i, i]
    for i in range(p):
        solution[i] /= scale[i]


@numba.njit(error_model="numpy", inline="always")
def _reference(x, free, sum_active):
    """The reference variable of the null-space solve: the free one with the largest x
    (the first on ties); -1 without the sum constraint."""
    reference = -1
    if sum_active:
        best = -math.inf
        for j in range(x.shape[0]):
            if free[j] and x[j] > best:
                best = x[j]
                reference = j
    return reference


@numba.njit(error_model="numpy", inline="always")
def _reduced_system(a_matrix, c, reference, free, system, rhs):
    """The (p, p) reduced system of the working set: identity rows for variables that do
    not move (not free, or the reference)."""
    p = c.shape[0]
    r = reference
    for a in range(p):
        active_a = free[a] and a != r
        for b in range(p):
            value = 0.0
            if active_a and free[b] and b != r:
                value = a_matrix[a, b]
                if r >= 0:
                    value += a_matrix[r, r] - a_matrix[a, r] - a_matrix[r, b]
            system[a, b] = value
        if active_a:
            rhs[a] = c[a]
            if r >= 0:
                rhs[a] += a_matrix[r, r] - c[r] - a_matrix[a, r]
        else:
            rhs[a] = 0.0
            system[a, a] = 1.0


@numba.njit(error_model="numpy")
def equality_solve(a_matrix, c, x, free, sum_active, system, factor, scale, rhs, z):
    """Minimiser z of the objective with z_j = 0 off `free` (and sum z = 1 if
    `sum_active`); False if the working set does not determine it."""
    p = c.shape[0]
    reference = _reference(x, free, sum_active)
    _reduced_system(a_matrix, c, reference, free, system, rhs)
    if not scaled_cholesky(system, factor, scale):
        return False
    scaled_solve(factor, scale, rhs, z)
    total = 0.0
    for a in range(p):
        if not free[a] or a == reference:
            z[a] = 0.0
        total += z[a]
    if reference >= 0:
        z[reference] = 1.0 - total
    return True


@numba.njit(error_model="numpy")
def simplex_qp(a_matrix, c, x, free, sum_state, equality, max_steps, system, factor, scale, rhs, z):
    """Solve the programme from the feasible `x` (in/out, p) with working set `free`
    (in/out bool, p; x_j = 0 off it) and `sum_state` (in/out, a 1-element bool array:
    the sum constraint in the working set; always True with `equality`).

    Returns QP_OK, QP_SINGULAR or QP_STALLED.
    """
    p = c.shape[0]
    largest = 0.0
    for a in range(p):
        largest = max(largest, a_matrix[a, a])
    floor = MULTIPLIER_FLOOR * largest
    inner = True
    for _ in range(max_steps):
        if inner:
            if not equality_solve(
                a_matrix, c, x, free, sum_state[0], system, factor, scale, rhs, z
            ):
                return QP_SINGULAR
            alpha = 1.0
            blocked = False
            block = -1
            for j in range(p):
                if free[j] and z[j] <= FRACTION_FLOOR:
                    blocked = True
                    gap = x[j] - z[j]
                    t = x[j] / gap if gap > 0.0 else 0.0
                    if block < 0 or t < alpha:
                        alpha = min(t, 1.0)
                        block = j
            if not equality and not sum_state[0]:
                total_x = 0.0
                total_z = 0.0
                for j in range(p):
                    total_x += x[j]
                    total_z += z[j]
                if total_z > 1.0:
                    blocked = True
                    t = max(0.0, (1.0 - total_x) / (total_z - total_x))
                    if block < 0 or t < alpha:
                        alpha = min(t, 1.0)
                        block = p
            if not blocked:
                for j in range(p):
                    x[j] = z[j]
                inner = False
                continue
            for j in range(p):
                if free[j]:
                    x[j] += alpha * (z[j] - x[j])
            if block == p:
                sum_state[0] = True
            else:
                x[block] = 0.0
            for j in range(p):
                if free[j] and x[j] <= 0.0:
                    x[j] = 0.0
                    free[j] = False
        else:
            count = 0
            total = 0.0
            for j in range(p):
                if free[j]:
                    gradient = -c[j]
                    for k in range(p):
                        gradient += a_matrix[j, k] * x[k]
                    total += gradient
                    count += 1
            nu = -total / count if sum_state[0] and count > 0 else 0.0
            best = -floor
            release = -1
            for j in range(p):
                if not free[j]:
                    multiplier = nu - c[j]
                    for k in range(p):
                        multiplier += a_matrix[j, k] * x[k]
                    if multiplier < best:
                        best = multiplier
                        release = j
            if not equality and sum_state[0] and nu < best:
                release = p
            if release < 0:
                return QP_OK
            if release == p:
                sum_state[0] = False
            else:
                free[release] = True
            inner = True
    return QP_STALLED


@numba.njit(error_model="numpy")
def interior_start(x, free, sum_state, equality):
    """A feasible start with every variable free: x_j = 1/p (with `equality`), else
    1/(p + 1) (the sum inequality out of the working set)."""
    p = x.shape[0]
    for j in range(p):
        x[j] = 1.0 / p if equality else 1.0 / (p + 1)
        free[j] = True
    sum_state[0] = equality


@numba.njit(error_model="numpy")
def vertex_start(a_matrix, c, x, free, sum_state, equality):
    """A feasible start: the best vertex e_j (with `equality`), else x = 0."""
    p = c.shape[0]
    best = 0
    for j in range(p):
        x[j] = 0.0
        free[j] = False
        if 0.5 * a_matrix[j, j] - c[j] < 0.5 * a_matrix[best, best] - c[best]:
            best = j
    sum_state[0] = equality
    if equality:
        x[best] = 1.0
        free[best] = True


@numba.njit(error_model="numpy", inline="always")
def reduced_covariance(
    hessian, gradient, x, sum_active, system, factor, scale, rhs, column, free, tested, out
):
    """Covariance (p, p) of x with its active set held: the inverse of `hessian` on the
    free variables (x_j > 0) in the null space of the sum constraint, mapped back (rows
    and columns of variables at their bound are 0).

    Returns False (out NaN) if the solution is not determined: the reduced Hessian is
    singular on the free variables together with those held at a weakly active bound
    (multiplier within `MULTIPLIER_FLOOR` of 0, from the gradient (p,) of the objective,
    J^T f, at x). A bound with a vanishing multiplier holds nothing: a twin of a free
    endmember sits there, and the split between the two is arbitrary.
    `free`, `tested`: (p,) bool scratch (nothing is allocated per call).
    """
    p = x.shape[0]
    count = 0
    total = 0.0
    largest = 0.0
    for a in range(p):
        free[a] = x[a] > 0.0
        largest = max(largest, hessian[a, a])
        if free[a]:
            count += 1
            total += gradient[a]
    nu = -total / count if sum_active and count > 0 else 0.0
    extended = False  # a bound with a vanishing multiplier joins the free variables
    for a in range(p):
        tested[a] = free[a] or abs(gradient[a] + nu) <= MULTIPLIER_FLOOR * largest
        extended = extended or (tested[a] and not free[a])
    for a in range(p):
        for b in range(p):
            out[a, b] = math.nan
    if extended:  # else the test is the factorisation below
        _reduced_system(
            hessian, column, _reference(x, tested, sum_active), tested, system, rhs
        )  # rhs unused
        if not scaled_cholesky(system, factor, scale):
            return False
    reference = _reference(x, free, sum_active)
    _reduced_system(hessian, column, reference, free, system, rhs)
    if not scaled_cholesky(system, factor, scale):
        return False
    # The inverse, (D L L^T D)^-1 = D^-1 L^-T L^-1 D^-1: L^-1 by forward substitution
    # (into `system`, no longer needed), with p reciprocals of the pivots and of the scale
    # in place of a division per entry of p triangular solves.
    inverse_factor = system
    for a in range(p):
        rhs[a] = 1.0 / factor[a, a]
        column[a] = 1.0 / scale[a]
    for b in range(p):
        for i in range(p):
            if i < b:
                inverse_factor[i, b] = 0.0
            else:
                value = 1.0 if i == b else 0.0
                for k in range(b, i):
                    value -= factor[i, k] * inverse_factor[k, b]
                inverse_factor[i, b] = value * rhs[i]
    for a in range(p):
        for b in range(a + 1):
            value = 0.0
            if free[a] and a != reference and free[b] and b != reference:
                for k in range(a, p):  # a >= b: rows below both
                    value += inverse_factor[k, a] * inverse_factor[k, b]
                value *= column[a] * column[b]
            out[a, b] = value
            out[b, a] = value
    if reference >= 0:  # x_r = -sum_a y_a
        total = 0.0
        for a in range(p):
            column[a] = 0.0
            for b in range(p):
                column[a] += out[a, b]
            total += column[a]
        for a in range(p):
            out[a, reference] = -column[a]
            out[reference, a] = -column[a]
        out[reference, reference] = total
    return True
