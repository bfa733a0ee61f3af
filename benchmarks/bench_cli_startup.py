"""Start-up time of the ``lumaxlike`` command: what every invocation pays before work.

Each repetition starts a new process and times it from outside (wall time of
``subprocess.run``, interpreter start-up included, as a user waits for it); the best of
``--repeat`` counts, as other load on the machine only ever adds time. Timed:

- ``python -c pass``: the interpreter alone, the floor;
- ``python -m lumaxlike --version``, ``--help``, ``invert --help``, ``demo --help``:
  parsing only (no JAX, numba or numpy: also recorded, from ``sys.modules``);
- ``import lumaxlike._files.invert`` (and ``.sample``): the fixed overhead of a command
  that runs: the modules its body imports before it reads a byte (JAX, numba, rasterio
  ...), i.e. the least any ``lumaxlike invert`` (``sample``) costs.

``--source LABEL=DIR`` (repeatable) times the package found in DIR (put first on
PYTHONPATH), e.g. ``--source before=/path/to/old/checkout --source after=.``, so that two
versions are compared in one run on the same machine. Prints a table; ``--json PATH``
also writes the figures (with the machine) to PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HEAVY = ("jax", "numba", "numpy", "rasterio", "xarray", "dask", "matplotlib")
LOADED = (
    "import runpy, sys, contextlib, io\n"
    "sys.argv = ['lumaxlike', *{argv!r}]\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n"
    "    try:\n"
    "        runpy.run_module('lumaxlike', run_name='__main__')\n"
    "    except SystemExit:\n"
    "        pass\n"
    f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
)
CASES = {
    "python -c pass": ["-c", "pass"],
    "lumaxlike --version": ["-m", "lumaxlike", "--version"],
    "lumaxlike --help": ["-m", "lumaxlike", "--help"],
    "lumaxlike invert --help": ["-m", "lumaxlike", "invert", "--help"],
    "lumaxlike demo --help": ["-m", "lumaxlike", "demo", "--help"],
    "invert's imports": ["-c", "import lumaxlike._files.invert"],
    "sample's imports": ["-c", "import lumaxlike._files.sample"],
}


def run_once(args: list[str], env: dict) -> float:
    """Wall time [s] of one fresh ``python ARGS`` process, run in the source folder (whose
    package ``-c`` and ``-m`` then find first, whatever PYTHONPATH or the working
    directory of this script)."""
    tic = time.perf_counter()
    subprocess.run(
        [sys.executable, *args], env=env, cwd=env["PYTHONPATH"], capture_output=True, check=True
    )
    return time.perf_counter() - tic


def heavy_loaded(argv: list[str], env: dict) -> list[str]:
    """The heavy modules loaded by ``lumaxlike ARGV`` (a --help or --version)."""
    code = LOADED.format(argv=argv)
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=env["PYTHONPATH"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [name for name in out.strip().split(",") if name]


def measure(source: Path, repeat: int) -> dict:
    """{case: {"best_s", "runs_s"[, "heavy_loaded"]}} for the package in ``source``."""
    env = dict(os.environ, PYTHONPATH=str(source.resolve()))
    results = {}
    for case, args in CASES.items():
        runs = [run_once(args, env) for _ in range(repeat)]
        results[case] = {"best_s": min(runs), "runs_s": runs}
        if args[:2] == ["-m", "lumaxlike"]:
            results[case]["heavy_loaded"] = heavy_loaded(args[2:], env)
    return results


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeat", type=int, default=5, help="fresh processes per case (default 5)"
    )
    parser.add_argument(
        "--source",
        action="append",
        metavar="LABEL=DIR",
        help="a source tree to time, labelled (repeatable; default: this checkout)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here (default: none)")
    args = parser.parse_args(argv)
    sources = dict(s.split("=", 1) for s in args.source or [f"this={Path(__file__).parents[1]}"])
    load = os.getloadavg()
    report = {
        "command": "python benchmarks/bench_cli_startup.py " + " ".join(argv or sys.argv[1:]),
        "repeat": args.repeat,
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "load_1min_at_start": load[0],
        },
        "sources": {},
    }
    for label, folder in sources.items():
        report["sources"][label] = measure(Path(folder), args.repeat)
    report["machine"]["load_1min_at_end"] = os.getloadavg()[0]
    labels = list(report["sources"])
    print(f"{'best of ' + str(args.repeat) + ' [s]':<28}" + "".join(f"{x:>12}" for x in labels))
    for case in CASES:
        row = "".join(f"{report['sources'][x][case]['best_s']:>12.3f}" for x in labels)
        heavy = [",".join(report["sources"][x][case].get("heavy_loaded", [])) for x in labels]
        print(f"{case:<28}{row}   " + " | ".join(h or "-" for h in heavy))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
