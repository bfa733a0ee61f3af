"""Timing of the shared element-wise Levenberg-Marquardt on an accelerator (issue 54):
`invert` and `fit` in float32, host to host and device-resident, compile time,
iterations, converged fractions. One process (one process at a time can hold a TPU).

Usage: python benchmarks/tpu_lm.py [--out DIR] [--side 1024] [--fit-pixels 65536]
Writes DIR/tpu_lm.json (and the compile log DIR/compiles.log).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import time
from pathlib import Path

import numpy as np


def _timed(function):
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def invert_rows(side, bands, record):
    import jax
    import jax.numpy as jnp

    import lumaxlike
    from lumaxlike import Status
    from lumaxlike._inverse.albedo.invert import albedo_bounds, solver_chunk_pixels
    from lumaxlike._inverse.albedo.jax_solver import solve_albedo_jax

    cube, generated = _timed(
        lambda: lumaxlike.testing.synthetic_cube(side, bands, np.float32, seed=0)
    )
    record["invert_generate_s"] = generated
    arrays = [cube[k] for k in ("refl", "to_sun", "to_sensor", "normal")]
    params = cube["params"]
    n = arrays[0].size
    call = lambda: lumaxlike.invert(*arrays, params, "jax")  # noqa: E731
    result, first = _timed(call)
    times = [_timed(call)[1] for _ in range(2)]
    converged = result.status == Status.CONVERGED
    record["invert_f32"] = {
        "problems": n,
        "first_call_s": first,
        "steady_s": min(times),
        "host_to_host_per_s": n / min(times),
        "converged_fraction_of_valid": float(
            converged.sum() / np.isin(result.status, (Status.CONVERGED, Status.MAX_ITER)).sum()
        ),
        "mean_iterations": float(result.iterations[converged].mean()),
        "max_iterations": int(result.iterations.max()),
    }
    # accuracy against float64 (numba on this host's CPU) on a subsample of pixels
    rows = slice(0, 64)
    sub = [a[rows].astype(np.float64) for a in arrays]
    reference = lumaxlike.invert(*sub, params, "numba")
    valid = reference.status == Status.CONVERGED
    difference = np.abs(result.w[rows].astype(np.float64) - reference.w)
    record["invert_f32"]["within_1e-5_of_f64"] = float(np.mean(difference[valid] <= 1e-5))
    record["invert_f32"]["max_abs_error"] = float(np.nanmax(difference[valid]))
    # device-resident: chunks of the default shape already on the chip, results left there
    chunk = solver_chunk_pixels("jax", bands, np.float32)
    flat = [a.reshape(-1, a.shape[-1]) for a in arrays]
    chunk = min(chunk, flat[0].shape[0])
    n_chunks = flat[0].shape[0] // chunk
    on_device = [
        [jax.device_put(jnp.asarray(a[k * chunk : (k + 1) * chunk])) for a in flat]
        for k in range(n_chunks)
    ]
    jax.block_until_ready(on_device)
    bounds = albedo_bounds(np.float32)
    solve = lambda c: solve_albedo_jax(*c, params, None, 50, 1e-5, bounds)  # noqa: E731
    jax.block_until_ready(solve(on_device[0]))

    def resident():
        outs = [solve(c) for c in on_device]
        jax.block_until_ready(outs)
        return outs

    outs, t = _timed(resident)
    t = min(t, _timed(resident)[1])
    steps = [int(np.max(np.asarray(o["iterations"]))) for o in outs]
    record["invert_f32"]["device_resident"] = {
        "chunk_pixels": chunk,
        "chunks": n_chunks,
        "problems": n_chunks * chunk * bands,
        "per_s": n_chunks * chunk * bands / t,
        "loop_steps_per_chunk": steps,
    }


def fit_rows(n_pixels, record, deadline):
    import lumaxlike
    from lumaxlike import HapkeParams, Status
    from lumaxlike.testing import multi_angle_geometry, multi_angle_reflectance

    truth = HapkeParams(
        b=0.25, c=0.5, roughness=math.radians(20.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5
    )
    start = HapkeParams(
        b=0.3, c=0.4, roughness=math.radians(15.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5
    )
    rng = np.random.default_rng(0)
    bands, n_obs = 16, 16
    geometry = multi_angle_geometry(n_pixels, n_obs, rng)
    w_true = rng.uniform(0.2, 0.9, (n_pixels, bands))
    refl = multi_angle_reflectance(w_true, *geometry, truth)
    refl = (refl + rng.normal(0.0, 1e-4, refl.shape)).astype(np.float32)
    geometry = [g.astype(np.float32) for g in geometry]
    free = ("w", "b", "c", "roughness")

    def call(k):
        return lumaxlike.fit(
            refl[:k], *(g[:k] for g in geometry), start, free=free, solver="jax", refl_sigma=1e-4
        )

    small, first = _timed(lambda: call(4096))
    record["fit_f32"] = {"first_call_4096_pixels_s": first}
    _, again = _timed(lambda: call(4096))
    record["fit_f32"]["second_call_4096_pixels_s"] = again
    if time.time() > deadline:
        return
    result, t = _timed(lambda: call(n_pixels))
    converged = result.status == Status.CONVERGED
    record["fit_f32"].update(
        {
            "problems": refl.shape[0] * bands,
            "steady_s": t,
            "per_s": refl.shape[0] * bands / t,
            "converged_fraction": float(converged.mean()),
            "mean_iterations": float(result.iterations[converged].mean()),
        }
    )


def link_rows(record):
    """The host link alone: 256 MiB of float32 to the device and back."""
    import jax

    host = np.ones(1 << 26, np.float32)
    jax.block_until_ready(jax.device_put(host[:1024]))
    on_device, put = _timed(lambda: jax.block_until_ready(jax.device_put(host)))
    _, get = _timed(lambda: np.asarray(jax.device_get(on_device)))
    record["link_GB_per_s"] = {"put": host.nbytes / put / 1e9, "get": host.nbytes / get / 1e9}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--side", type=int, default=1024)
    parser.add_argument("--bands", type=int, default=64)
    parser.add_argument("--fit-pixels", type=int, default=65536)
    parser.add_argument("--budget-s", type=float, default=300.0)
    parser.add_argument("--skip", default="")
    args = parser.parse_args()
    deadline = time.time() + args.budget_s
    logging.basicConfig(filename=args.out / "compiles.log", level=logging.WARNING)
    import jax

    jax.config.update("jax_log_compiles", True)
    record = {"device": str(jax.devices()[0]), "jax": jax.__version__}
    out = args.out / "tpu_lm.json"
    try:
        if "invert" not in args.skip:
            invert_rows(args.side, args.bands, record)
            out.write_text(json.dumps(record, indent=1))
            print(json.dumps(record, indent=1), flush=True)
        if "link" not in args.skip:
            link_rows(record)
        if "fit" not in args.skip and time.time() < deadline:
            fit_rows(args.fit_pixels, record, deadline)
    finally:
        out.write_text(json.dumps(record, indent=1))
        print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
