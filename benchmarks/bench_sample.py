"""`sample` benchmark: posterior sampling throughput of `lumaxlike.sample` (blackjax HMC,
every problem's chains in one batched JAX program).

The scene: ``--pixels`` (default 512) pixels x 1 band x 16 observations,
float64, w, b, c and roughness (theta-bar) free. Geometry from
`lumaxlike.testing.multi_angle_geometry` (flat surface, incidence 0-60 deg, emission
0-65 deg at any azimuth, two observations near opposition), truth
``HapkeParams(b=0.25, c=0.5, roughness=20 deg, hs=0.06, bs0=0.9, hc=0.03, bc0=0.5)``
with w uniform in (0.2, 0.9), Gaussian noise ``--refl-sigma`` (1e-3) [1/sr].

For each setting (the defaults: 4 chains x (300 warm-up + 1000) transitions of 12
leapfrog steps; the same in float32; and a shorter one: 4 x (200 + 400)) and each noise
level in ``--sigmas`` (1e-3: c and theta-bar wide, filling their bounds; 3e-4: near-
Gaussian posteriors) it reports, from the second call in the process on the same
scene (the first compiles the chunk's program; its time is reported as "first call"):

- wall time, problems/s;
- per problem, the smallest ESS over the four parameters, bulk and tail (Vehtari et al.
  2021: both should exceed 400): its median (and the bulk ESS's alone, which HMC's
  antithetic draws push above the number of draws), and the fraction of problems with
  ESS >= 400 in every parameter, and with R-hat <= 1.01;
- effective samples per second per problem: median min-ESS x problems / wall time;
- problems/s at ESS >= 400: problems/s x (fraction of problems with ESS >= 400 in every
  parameter) -- the problems that reached the ESS bar per second of sampling;
- where the time goes: gradient evaluations of the log density per second inside the
  sampler (chains x transitions x leapfrog steps x problems / wall time) against the
  same gradient alone in a fused `fori_loop` over the same problems (its ceiling: the
  forward model and its derivative columns); their ratio is the share of the run spent
  in the model's gradient.

Timing on a shared machine is noisy: say which machine, and how loaded, with the
figures (the script prints ``os.getloadavg()`` before and after), and compare ratios
measured in one run.

    python benchmarks/bench_sample.py [--pixels 512] [--sigmas 1e-3 3e-4] [--json FILE]
        [--chunk PIXELS] [--settings defaults defaults-f32 short] [--label TEXT]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import lumaxlike
from lumaxlike._sample.sample import DEFAULT_INTEGRATION_STEPS
from lumaxlike.testing import multi_angle_geometry, multi_angle_reflectance

FREE = ("w", "b", "c", "roughness")
TRUTH = lumaxlike.HapkeParams(
    b=0.25, c=0.5, roughness=math.radians(20.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5
)
SETTINGS = {
    "defaults": {},
    "defaults-f32": {"dtype": "float32"},
    "short": {"num_warmup": 200, "num_samples": 400},
}


def scene(n_pixels, sigma, seed=0):
    rng = np.random.default_rng(seed)
    geometry = multi_angle_geometry(n_pixels, 16, rng)
    w = rng.uniform(0.2, 0.9, (n_pixels, 1))
    refl = multi_angle_reflectance(w, *geometry, TRUTH)
    return refl + sigma * rng.standard_normal(refl.shape), geometry


def gradient_rate(refl, geometry, dtype, repeats=500):
    """Gradient evaluations of the log likelihood per second, alone: `repeats` of them
    for every problem in one fused `fori_loop` (the sampler's density code), the best
    of three timings."""
    from functools import partial

    import jax.numpy as jnp

    from lumaxlike._model.columns_program import split_columns
    from lumaxlike._params import PARAMETER_NAMES
    from lumaxlike._sample.density import log_likelihood_for, pixel_rows

    with jax.enable_x64(dtype == np.float64):
        free_index = tuple(PARAMETER_NAMES.index(k) for k in FREE)
        program = split_columns(FREE, TRUTH.model_key, dtype)
        fixed = jnp.asarray(np.array([0.5] + [float(v) for v in TRUTH.scalars()]), dtype)
        rows = jax.vmap(
            partial(pixel_rows, program, fixed=fixed, free_index=free_index, key=TRUTH.model_key)
        )(*[jnp.asarray(g, dtype) for g in geometry])
        observed = jnp.asarray(refl[:, 0], dtype)
        use = jnp.isfinite(observed)
        gradient = jax.vmap(
            jax.grad(log_likelihood_for(free_index, TRUTH.model_key)),
            in_axes=(0, 0, 0, 0, None),
        )
        x = jnp.tile(jnp.asarray([0.5, 0.25, 0.5, 0.35], dtype), (refl.shape[0], 1))

        @jax.jit
        def loop(x):
            def body(_, x):
                return x + 1e-12 * gradient(x, rows, observed, use, jnp.asarray(1e6, dtype))

            return jax.lax.fori_loop(0, repeats, body, x)

        jax.block_until_ready(loop(x))
        times = []
        for _ in range(3):  # best of 3: one timing varied 2x between rows of a run
            start = time.perf_counter()
            jax.block_until_ready(loop(x))
            times.append(time.perf_counter() - start)
        return repeats * refl.shape[0] / min(times)


def versions():
    import blackjax

    return {
        "lumaxlike": lumaxlike.__version__,
        "jax": jax.__version__,
        "blackjax": blackjax.__version__,
        "numpy": np.__version__,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pixels", type=int, default=512)
    parser.add_argument("--sigmas", type=float, nargs="+", default=[1e-3, 3e-4])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS))
    parser.add_argument("--json", help="write the rows to this file")
    parser.add_argument("--label", default="", help="a label stored with the rows")
    parser.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="pixels per chunk (the first call, which compiles, then samples one chunk)",
    )
    args = parser.parse_args()
    print(f"device: {jax.devices()[0]}, cpus: {os.cpu_count()}, load before: {os.getloadavg()}")
    print(f"{args.pixels} problems, 16 observations, free {FREE}")
    rows = []
    for sigma in args.sigmas:
        refl, geometry = scene(args.pixels, sigma)
        for name in args.settings:
            options = dict(SETTINGS[name])
            dtype = np.dtype(options.pop("dtype", "float64")).type
            data = [refl.astype(dtype)] + [g.astype(dtype) for g in geometry]
            if args.chunk:
                options["chunk_size"] = args.chunk
            start = time.perf_counter()
            warm = [a[: args.chunk] for a in data] if args.chunk else data
            lumaxlike.sample(*warm, TRUTH, free=FREE, refl_sigma=sigma, **options)
            first = time.perf_counter() - start  # compiles the chunk shape (and the fit)
            load_before = os.getloadavg()[0]
            start, cpu_start = time.perf_counter(), time.process_time()
            result = lumaxlike.sample(*data, TRUTH, free=FREE, refl_sigma=sigma, seed=1, **options)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
            bulk = np.min([result.ess[n][:, 0] for n in FREE], axis=0)
            ess = np.minimum(bulk, np.min([result.ess_tail[n][:, 0] for n in FREE], axis=0))
            rhat = np.max([result.rhat[n][:, 0] for n in FREE], axis=0)
            sampled = np.isfinite(ess)
            rate = args.pixels / wall
            reached = float(np.mean(ess[sampled] >= 400))
            steps = options.get("integration_steps", DEFAULT_INTEGRATION_STEPS)
            transitions = options.get("num_warmup", 300) + options.get("num_samples", 1000)
            in_sampler = options.get("num_chains", 4) * transitions * steps * rate
            alone = gradient_rate(data[0], data[1:], dtype)
            row = {
                "sigma": sigma,
                "setting": name,
                "dtype": np.dtype(dtype).name,
                "first_call_s": first,
                "wall_s": wall,
                "cpu_s": cpu,
                "load_1min": [load_before, os.getloadavg()[0]],
                "problems_per_s": rate,
                "min_ess_median": float(np.median(ess[sampled])),
                "min_bulk_ess_median": float(np.median(bulk[sampled])),
                "fraction_ess_400": reached,
                "fraction_rhat_101": float(np.mean(rhat[sampled] <= 1.01)),
                "ess_per_s_per_problem": float(np.median(ess[sampled]) * rate),
                "problems_per_s_at_ess_400": rate * reached,
                "gradients_per_s_in_sampler": in_sampler,
                "gradients_per_s_alone": alone,
                "divergences": int(result.divergences.sum()),
                "statuses": result.counts(),
            }
            rows.append(row)
            print(
                f"sigma {sigma:g} {name:12s} first call {first:6.1f} s | {wall:6.1f} s: "
                f"{rate:7.2f} problems/s | min-ESS median {row['min_ess_median']:6.0f}, "
                f"ESS >= 400 in all four {100 * reached:5.1f} %, R-hat <= 1.01 "
                f"{100 * row['fraction_rhat_101']:5.1f} % | ESS/s per problem "
                f"{row['ess_per_s_per_problem']:7.0f} | problems/s at ESS >= 400 "
                f"{rate * reached:6.2f} | gradients/s in sampler {in_sampler:.3g}, alone "
                f"{alone:.3g} ({100 * in_sampler / alone:3.0f} %)",
                flush=True,
            )
    print(f"load after: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(
                {
                    "label": args.label,
                    "chunk": args.chunk,
                    "machine": f"{os.cpu_count()} cpus, shared",
                    "versions": versions(),
                    "load": os.getloadavg(),
                    "pixels": args.pixels,
                    "integration_steps": DEFAULT_INTEGRATION_STEPS,
                    "rows": rows,
                },
                file,
                indent=1,
            )


if __name__ == "__main__":
    main()
