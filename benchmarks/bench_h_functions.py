"""Micro-benchmark of the three H-functions (`lumaxlike._model.h_functions`), numba.

What `invert` does per band and solver iteration, isolated: from one w and the per-angle
terms of a pixel (precomputed, as `invert` hoists them out of its band loop), H(mu0e),
H(mue) and both dH/dw, by each kind's ``<kind>_values`` in a numba ``prange`` loop over
``--pairs`` (w, terms) pairs (default 10 M: ``--bands`` consecutive pairs share a pixel's
terms, w uniform in [0, 1), mu0e and mue uniform in [0.05, 1]). Also measured:

- the per-pixel cost of the terms (``<kind>_terms`` at both angles), pixels/s;
- the whole 2002 model's per-band evaluation, ``equations.reflectance_and_slope`` (r and
  dr/dw, H included), evaluations/s; from it ``model_only_ratio_exact_over_hapke2002`` =
  (t_rs - t_2002 + t_exact)/t_rs, t in seconds per evaluation: the ratio for a loop that
  did nothing but evaluate the model (an upper bound for `invert`).
- ``estimated_invert_ratio_exact_over_hapke2002``: `invert`'s (numba) time per problem
  with the exact H over that with the 2002 H, from the measured `invert` rate in
  ``results/invert.json`` (t_problem = threads / problems_per_s) plus, per problem, the
  extra cost of (1 + mean iterations) evaluations of H, and per pixel, divided by its
  bands, that of the terms at both angles and of the solver's N_TABLE-point starting
  table (`_inverse/albedo/rules.py`'s `N_TABLE` evaluations).

Each timing is the best of ``--repeat`` runs after a compiling warm-up.

Usage::

    python benchmarks/bench_h_functions.py                 # ~1 min on 2 cores
    python benchmarks/bench_h_functions.py --pairs 100000  # smoke

Writes ``benchmarks/results/h_functions.json`` (``--json`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numba
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lumaxlike._inverse.albedo.rules import N_TABLE  # noqa: E402
from lumaxlike._model._backends import numba_equations, numba_h_functions  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("hapke2002", "hapke1981", "exact")
# numba types module-level dispatchers, not attributes of a namespace
hapke1981_values = numba_h_functions.hapke1981_values
hapke2002_values = numba_h_functions.hapke2002_values
exact_values = numba_h_functions.exact_values
hapke2002_terms = numba_h_functions.hapke2002_terms
exact_terms = numba_h_functions.exact_terms
PixelTerms = numba_equations.PixelTerms
reflectance_and_slope = numba_equations.reflectance_and_slope


# As in `invert`: parallel over pixels, the pixel's terms read once, then its bands.
@numba.njit(parallel=True, error_model="numpy")
def _values_hapke1981(w, x0, xe, bands, out):
    for p in numba.prange(x0.size):
        t0, te = x0[p], xe[p]
        for i in range(p * bands, min((p + 1) * bands, w.size)):
            h0, he, dh0, dhe = hapke1981_values(w[i], t0, te)
            out[i] = h0 + he + dh0 + dhe


@numba.njit(parallel=True, error_model="numpy")
def _values_hapke2002(w, a0, b0, ae, be, bands, out):
    for p in numba.prange(a0.size):
        t0, te = (a0[p], b0[p]), (ae[p], be[p])
        for i in range(p * bands, min((p + 1) * bands, w.size)):
            h0, he, dh0, dhe = hapke2002_values(w[i], t0, te)
            out[i] = h0 + he + dh0 + dhe


@numba.njit(parallel=True, error_model="numpy")
def _values_exact(w, terms0, termse, bands, out):
    for p in numba.prange(terms0.shape[0]):
        t0, te = (terms0[p, 0], terms0[p, 1]), (termse[p, 0], termse[p, 1])
        for i in range(p * bands, min((p + 1) * bands, w.size)):
            h0, he, dh0, dhe = exact_values(w[i], t0, te)
            out[i] = h0 + he + dh0 + dhe


@numba.njit(parallel=True, error_model="numpy")
def _terms_hapke2002(mu0, mu, a0, b0, ae, be):
    for p in numba.prange(mu0.size):
        a0[p], b0[p] = hapke2002_terms(mu0[p])
        ae[p], be[p] = hapke2002_terms(mu[p])


@numba.njit(parallel=True, error_model="numpy")
def _terms_exact(mu0, mu, terms0, termse):
    for p in numba.prange(mu0.size):
        for k, series in enumerate(exact_terms(mu0[p])):  # P's and dP/dx's coefficients
            terms0[p, k, :] = series
        for k, series in enumerate(exact_terms(mu[p])):
            termse[p, k, :] = series


@numba.njit(parallel=True, error_model="numpy")
def _reflectance_and_slope(w, scale, phase_sh, p0, pe, a0, b0, ae, be, bands, out):
    for p in numba.prange(a0.size):
        terms = PixelTerms(scale[p], phase_sh[p], p0[p], pe[p], 1.1, (a0[p], b0[p]), (ae[p], be[p]))
        for i in range(p * bands, min((p + 1) * bands, w.size)):
            r, slope = reflectance_and_slope(w[i], terms)
            out[i] = r + slope


def _best(function, args, repeat):
    function(*args)  # compile and warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def _invert_estimate(values_seconds, terms_seconds, pairs, pixels):
    """The exact/2002 cost ratio inside numba `invert`, from results/invert.json (if any)."""
    path = RESULTS / "invert.json"
    if not path.exists():
        return {"estimated_invert_ratio_exact_over_hapke2002": None}
    measured = json.loads(path.read_text())
    numba_run = measured["results"]["numba"]
    threads = numba.get_num_threads()
    bands = measured["settings"]["bands"]
    base = measured["machine"]["numba_threads"] / numba_run["problems_per_s"]  # s per problem
    extra_eval = (values_seconds["exact"] - values_seconds["hapke2002"]) * threads / pairs
    extra_terms = (terms_seconds["exact"] - terms_seconds["hapke2002"]) * threads / pixels
    evaluations = 1.0 + numba_run["mean_iterations"]
    extra = evaluations * extra_eval + (N_TABLE * extra_eval + extra_terms) / bands
    return {
        "invert_reference": {
            "problems_per_s": numba_run["problems_per_s"],
            "bands": bands,
            "mean_iterations": numba_run["mean_iterations"],
            "n_table": N_TABLE,
        },
        "estimated_invert_ratio_exact_over_hapke2002": (base + extra) / base,
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pairs", type=int, default=10_000_000, help="(w, terms) pairs (default 10 M)"
    )
    parser.add_argument(
        "--bands", type=int, default=100, help="pairs sharing one pixel's terms (default 100)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs, best kept (default 3)")
    parser.add_argument(
        "--json", type=Path, default=RESULTS / "h_functions.json", help="output file"
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    rng = np.random.default_rng(0)
    pixels = -(-args.pairs // args.bands)
    w = rng.uniform(0.0, 1.0, args.pairs)
    mu0, mu = rng.uniform(0.05, 1.0, pixels), rng.uniform(0.05, 1.0, pixels)
    out = np.empty(args.pairs)
    a0, b0, ae, be = (np.empty(pixels) for _ in range(4))
    n_terms = exact_terms(0.5)[0].size
    terms0, termse = np.empty((pixels, 2, n_terms)), np.empty((pixels, 2, n_terms))

    terms_seconds = {
        "hapke2002": _best(_terms_hapke2002, (mu0, mu, a0, b0, ae, be), args.repeat),
        "exact": _best(_terms_exact, (mu0, mu, terms0, termse), args.repeat),
    }
    values_seconds = {
        "hapke1981": _best(_values_hapke1981, (w, mu0, mu, args.bands, out), args.repeat),
        "hapke2002": _best(_values_hapke2002, (w, a0, b0, ae, be, args.bands, out), args.repeat),
        "exact": _best(_values_exact, (w, terms0, termse, args.bands, out), args.repeat),
    }
    model_args = (
        w,
        rng.uniform(0.01, 0.05, pixels),
        rng.uniform(0.5, 2.0, pixels),
        rng.uniform(0.8, 1.2, pixels),
        rng.uniform(0.8, 1.2, pixels),
        a0,
        b0,
        ae,
        be,
    )
    rs_seconds = _best(_reflectance_and_slope, (*model_args, args.bands, out), args.repeat)

    per_eval = {kind: s / args.pairs for kind, s in values_seconds.items()}
    rs_per_eval = rs_seconds / args.pairs
    result = {
        "benchmark": "h_functions",
        "pairs": args.pairs,
        "bands_per_pixel": args.bands,
        "pixels": pixels,
        "numba_threads": numba.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "numba": numba.__version__,
        "values_per_second": {kind: args.pairs / s for kind, s in values_seconds.items()},
        "values_seconds": values_seconds,
        "terms_pixels_per_second": {kind: pixels / s for kind, s in terms_seconds.items()},
        "ratio_exact_over_hapke2002": values_seconds["exact"] / values_seconds["hapke2002"],
        "ratio_hapke1981_over_hapke2002": values_seconds["hapke1981"] / values_seconds["hapke2002"],
        "reflectance_and_slope_2002_per_second": args.pairs / rs_seconds,
        "model_only_ratio_exact_over_hapke2002": (
            (rs_per_eval - per_eval["hapke2002"] + per_eval["exact"]) / rs_per_eval
        ),
    }
    result.update(_invert_estimate(values_seconds, terms_seconds, args.pairs, pixels))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
