"""Where one host-to-host `invert(..., solver="jax")` call spends its time, stage by stage,
on JAX's default device (written for the TPU row of `bench_accelerator.py`, whose cube it
builds: `synthetic_cube`, float32).

Prints and writes (``--out``, JSON) the whole call's time, then each stage timed alone on
the same arrays: the inputs' transfer to the device, the solve with inputs resident, the
outputs' transfer back, and the host-side copies; then the call under cProfile (the 25
functions with the most time of their own).

Usage::

    python benchmarks/profile_invert_host.py --side 1024 --bands 64 --out /tmp/profile.json
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time
from pathlib import Path

import numpy as np


def timed(call, repeat=3):
    """Median seconds of `repeat` calls after one warm-up call."""
    call()
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def stages(inputs, params) -> dict:
    """Each stage of the call alone (seconds)."""
    import jax

    from lumaxlike._inverse.albedo.invert import albedo_bounds, default_tolerance
    from lumaxlike._inverse.albedo.jax_solver import solve_albedo_jax

    bounds, tol = albedo_bounds(np.float32), default_tolerance(np.float32)
    resident = [jax.device_put(a) for a in inputs]
    jax.block_until_ready(resident)

    def upload():
        jax.block_until_ready([jax.device_put(a) for a in inputs])

    def solve():
        return jax.block_until_ready(solve_albedo_jax(*resident, params, None, 100, tol, bounds))

    solved = solve()
    names = ("w", "status", "iterations", "residual")

    def download():
        return jax.device_get({name: solved[name] for name in names})

    fetched = download()
    targets = {name: np.empty_like(value) for name, value in fetched.items()}

    def copy():
        for name, value in fetched.items():
            targets[name][...] = value

    return {
        "upload_s": timed(upload),
        "solve_resident_s": timed(solve),
        "download_s": timed(download),
        "host_copy_s": timed(copy),
        "download_bytes": int(sum(v.nbytes for v in fetched.values())),
        "upload_bytes": int(sum(a.nbytes for a in inputs)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", type=int, default=1024)
    parser.add_argument("--bands", type=int, default=64)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import jax

    import lumaxlike
    from lumaxlike.testing import default_params, synthetic_cube

    cube = synthetic_cube(args.side, args.bands, np.float32, params=default_params(), seed=0)
    n = args.side * args.side
    inputs = [cube[k].reshape(n, -1) for k in ("refl", "to_sun", "to_sensor", "normal")]
    params = cube["params"]
    report: dict = {"device": str(jax.devices()[0]), "problems": int(inputs[0].size)}
    report["call_s"] = timed(lambda: lumaxlike.invert(*inputs, params, "jax"))
    print(json.dumps(report), flush=True)
    report["stages"] = stages(inputs, params)
    print(json.dumps(report["stages"]), flush=True)
    profile = cProfile.Profile()
    profile.runcall(lumaxlike.invert, *inputs, params, "jax")
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
    report["profile"] = text.getvalue()
    print(report["profile"])
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
