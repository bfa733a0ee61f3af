"""The inversions: `invert` (w of every pixel and band) and `fit` (several Hapke
parameters from multi-angle observations; joint fits with shared parameters and priors,
regional fits), each on either solver: JAX (optimistix) or numba.

The Levenberg-Marquardt rules are written once (`lm_rules`; `albedo_rules` for w alone)
and run element-wise over a chunk in JAX or per problem in numba; an empirical
photometric function is inverted in closed form (`photometric_rules`). Every problem ends
with a `Status` code instead of an exception; the result types are `InversionResult`,
`FitResult` and `JointFitResult`. Chunks, compaction of unconverged problems, covariance,
priors and the UNREACHABLE rule have a module each (docs/design.md: the module map).
"""
