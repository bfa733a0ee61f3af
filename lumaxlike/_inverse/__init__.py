"""Per-pixel inversion: `invert`, its two solvers (JAX/optimistix and numba), the shared
Levenberg-Marquardt rules, the status codes and the result type."""
