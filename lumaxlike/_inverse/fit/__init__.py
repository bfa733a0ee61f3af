"""`fit`: several Hapke parameters per pixel and band from multi-angle observations
(`fit`, the front of every fit, joint and regional ones included), the arguments it
checks (`arguments`), its JAX and numba solvers (`jax_solver`, `numba_solver`), and what
they share: observation masks, residual columns, compaction, covariance, the UNREACHABLE
rule. Import the modules themselves: this file holds no code.
"""
