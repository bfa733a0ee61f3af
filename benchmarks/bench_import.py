"""Time of `import lumaxlike` in a fresh interpreter (target: <= 0.5 s).

Each repetition starts a new Python process and times the import statement alone
(`time.perf_counter` around `import lumaxlike`, so interpreter start-up is excluded);
the best of ``--repeat`` counts, as other load on the machine only ever adds time. Also
records which heavy dependencies the import loaded (none, by design).

Writes its JSON report to a temporary file (its path is printed), so a run never
overwrites the results stored in the repository: ``--save`` writes
``benchmarks/results/import.json``, ``--out PATH`` any other file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
TARGET_S = 0.5
HEAVY = ("jax", "numba", "rasterio", "xarray", "dask", "matplotlib")
TIMED = (
    "import sys, time; t = time.perf_counter(); import lumaxlike; t = time.perf_counter() - t;"
    f"print(t, ','.join(m for m in {HEAVY!r} if m in sys.modules))"
)


def import_once() -> tuple[float, list[str]]:
    """(seconds to import lumaxlike, heavy modules loaded) in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", TIMED], capture_output=True, text=True, check=True
    ).stdout
    seconds, loaded = out.split(" ")
    return float(seconds), [name for name in loaded.strip().split(",") if name]


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeat", type=int, default=5, help="fresh processes timed; the best counts (default 5)"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--save",
        action="store_const",
        const=RESULTS / "import.json",
        dest="out",
        help="write the stored results, benchmarks/results/import.json",
    )
    where.add_argument(
        "--out", type=Path, help="write the JSON report here (default: a temporary file)"
    )
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = Path(tempfile.gettempdir()) / "lumaxlike-bench-import.json"

    runs = [import_once() for _ in range(args.repeat)]
    seconds = [s for s, _ in runs]
    best = min(seconds)
    verdict = "met" if best <= TARGET_S else "NOT met"
    print(
        f"import lumaxlike: best {best:.3f} s of {args.repeat} (target <= {TARGET_S} s: {verdict}); "
        f"heavy modules loaded: {runs[0][1] or 'none'}"
    )
    report = {
        "best_s": best,
        "runs_s": seconds,
        "target_s": TARGET_S,
        "heavy_modules_loaded": runs[0][1],
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"report: {args.out}")
    return args.out


if __name__ == "__main__":
    main()
