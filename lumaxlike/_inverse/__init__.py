"""The inversions: `invert` (w of every pixel and band) and `fit` (several Hapke
parameters from multi-angle observations; joint fits with shared parameters and priors,
regional fits), each on either solver: JAX (optimistix) or numba.

One subpackage per feature, each with its solvers named alike (`jax_solver`,
`numba_solver`):

- `albedo`: `invert`, its rules for w alone (`albedo.rules`), its solvers, and the
  closed-form inversion of an empirical photometric function (`albedo.photometric_rules`);
- `fit`: `fit` (the front of every fit), its arguments, its solvers and what they share
  (observation masks, residual columns, compaction, covariance, the UNREACHABLE rule);
- `joint`: joint and regional fits: shared parameters, priors, the Schur-complement step,
  their covariance, `JointFitResult`, restarts.

Here, shared by all three: the Levenberg-Marquardt rules written once (`lm_rules`), run
element-wise over a chunk in JAX or per problem in numba; chunks (`chunking`); sums in
index order (`ordered_sums`); the result types `InversionResult` and `FitResult`
(`result`); the defaults the front ends show (`defaults`). Every problem ends with a
`Status` code (`lumaxlike._status`) instead of an exception. A feature imports the ones
before it (`fit` imports `albedo`, `joint` both), never the other way at module level
(docs/design.md: the module map). This file holds no code.
"""
