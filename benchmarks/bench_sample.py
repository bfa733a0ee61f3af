"""`sample` benchmark: posterior sampling throughput of `lumaxlike.sample` (blackjax HMC,
every problem's chains in one batched JAX program).

The scene (the issue's): ``--pixels`` (default 512) pixels x 1 band x 16 observations,
float64, w, b, c and roughness (theta-bar) free. Geometry from
`lumaxlike.testing.multi_angle_geometry` (flat surface, incidence 0-60 deg, emission
0-65 deg at any azimuth, two observations near opposition), truth
``HapkeParams(b=0.25, c=0.5, roughness=20 deg, hs=0.06, bs0=0.9, hc=0.03, bc0=0.5)``
with w uniform in (0.2, 0.9), Gaussian noise ``--sigma`` (1e-3) [1/sr].

For each setting (the defaults: 4 chains x (300 warm-up + 1000) transitions of 8
leapfrog steps; and a shorter one: 4 x (200 + 400)) it reports, from the second call
in the process (the first compiles; its time is reported as "first call"):

- wall time, problems/s;
- per problem, the smallest bulk ESS over the four parameters: its median, and the
  fraction of problems with ESS >= 400 in every parameter;
- effective samples per second per problem: median min-ESS x problems / wall time;
- problems/s at ESS >= 400: problems/s x (fraction of problems with ESS >= 400 in every
  parameter) -- the problems that reached the issue's bar per second of sampling.

Timing on a shared machine is noisy: say which machine, and how loaded, with the
figures (the script prints ``os.getloadavg()`` before and after).

    python benchmarks/bench_sample.py [--pixels 512] [--sigma 1e-3]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import lumaxlike
from lumaxlike.testing import multi_angle_geometry, multi_angle_reflectance

FREE = ("w", "b", "c", "roughness")
TRUTH = lumaxlike.HapkeParams(
    b=0.25, c=0.5, roughness=math.radians(20.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5
)
SETTINGS = {
    "defaults": {},
    "short": {"num_warmup": 200, "num_samples": 400},
}


def scene(n_pixels, sigma, seed=0):
    rng = np.random.default_rng(seed)
    geometry = multi_angle_geometry(n_pixels, 16, rng)
    w = rng.uniform(0.2, 0.9, (n_pixels, 1))
    refl = multi_angle_reflectance(w, *geometry, TRUTH)
    return refl + sigma * rng.standard_normal(refl.shape), geometry


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pixels", type=int, default=512)
    parser.add_argument("--sigma", type=float, default=1e-3)
    args = parser.parse_args()
    refl, geometry = scene(args.pixels, args.sigma)
    print(f"device: {jax.devices()[0]}, cpus: {os.cpu_count()}, load before: {os.getloadavg()}")
    print(f"{args.pixels} problems, 16 observations, free {FREE}, sigma {args.sigma}")
    for name, options in SETTINGS.items():
        start = time.perf_counter()
        lumaxlike.sample(
            refl[:8],
            *(g[:8] for g in geometry),
            TRUTH,
            free=FREE,
            refl_sigma=args.sigma,
            **options,
        )
        first = time.perf_counter() - start  # compiles the 8-pixel chunk shape (and the fit)
        start = time.perf_counter()
        result = lumaxlike.sample(
            refl, *geometry, TRUTH, free=FREE, refl_sigma=args.sigma, seed=1, **options
        )
        wall = time.perf_counter() - start
        ess = np.min([result.ess[n][:, 0] for n in FREE], axis=0)
        sampled = np.isfinite(ess)
        rate = args.pixels / wall
        reached = np.mean(ess[sampled] >= 400)
        print(
            f"{name:9s} first call {first:6.1f} s (compile, 8 pixels) | {wall:6.1f} s for {args.pixels} problems: "
            f"{rate:7.1f} problems/s | min-ESS median {np.median(ess[sampled]):6.0f}, "
            f"ESS >= 400 in all four: {100 * reached:5.1f} % | "
            f"ESS/s per problem {np.median(ess[sampled]) * rate:8.0f} | "
            f"problems/s at ESS >= 400: {rate * reached:7.1f} | statuses {result.counts()}"
        )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
