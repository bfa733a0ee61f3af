"""``lumaxlike profile``: time and peak memory of an inversion of a synthetic cube, each
solver in a child process (the measuring is :mod:`lumaxlike._profile`'s)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .options import EXIT_OK, DeprecatedAlias, positive_int

__all__ = ["add_parser", "run"]

TABLE_NOTES = """\
base: RSS after importing lumaxlike (interpreter, NumPy, JAX, numba). excess: peak -
base - inputs - outputs (memory mode; the bound is excess <= 500 MB). bound: memory mode
excess <= 500 MB; file mode peak RSS < 1.5 GB. Time includes compilation unless --warmup."""
"""What the columns of the table mean (printed after it, and in ``--help``)."""

EXAMPLE = """
example (a 256 x 256 x 16 float32 cube, numba only, compilation timed apart):
  lumaxlike profile --pixels 256 --bands 16 --dtype float32 --solver numba --warmup
"""


def add_parser(commands) -> argparse.ArgumentParser:
    """Add the ``profile`` subcommand to ``commands``; return its parser."""
    parser = commands.add_parser(
        "profile",
        help="profile the solvers (see `lumaxlike profile --help`)",
        allow_abbrev=False,
        description="Time and peak memory of an inversion of a synthetic cube, in a child process.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=TABLE_NOTES + "\n" + EXAMPLE,
    )
    parser.add_argument(
        "--pixels",
        type=positive_int,
        default=512,
        help="pixels per side of the square image [pixels] (default 512)",
    )
    parser.add_argument(
        "--bands", type=positive_int, default=32, help="spectral bands (default 32)"
    )
    parser.add_argument(
        "--solver",
        choices=("jax", "numba", "both"),
        default="both",
        help="solver(s) to profile: numba (CPU), jax (CPU or GPU) or both (default both)",
    )
    parser.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        default="float64",
        help="floating type of the cube (default float64)",
    )
    parser.add_argument(
        "--chunk-pixels",
        dest="chunk_size",
        type=positive_int,
        default=None,
        metavar="PIXELS",
        help="pixels per chunk of invert, unlike the file commands' --chunk (rows): file "
        "mode writes blocks of PIXELS // --pixels rows (default: invert's, about 262 k "
        "pixel-bands per chunk for JAX, 4.2 M for numba)",
    )
    parser.add_argument(
        "--chunk-size",
        dest="chunk_size",
        type=positive_int,
        action=DeprecatedAlias,
        new="--chunk-pixels",
        help=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--mode",
        choices=("memory", "file"),
        default="memory",
        help="memory: invert() on arrays; file: GeoTIFF to GeoTIFF via "
        "lumaxlike.invert_file() (default memory)",
    )
    parser.add_argument(
        "--memray", action="store_true", help="also report memray's heap peak (default: off)"
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="numba threads and CPU cores of the child (default: all cores)",
    )
    parser.add_argument(
        "--warmup",
        action="store_true",
        help="run once on one chunk first (compile), report it separately "
        "(default: off, the time includes compilation)",
    )
    parser.add_argument(
        "--max-iter",
        type=positive_int,
        default=None,
        help="solver iterations per pixel-band at most (default: invert's, 50)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the synthetic cube (default 0)"
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="write the records as JSON to this file (default: none)",
    )
    parser.set_defaults(handler=run, stop_on_signals=False)  # Ctrl-C: KeyboardInterrupt
    return parser


def run(args) -> int:
    """Run ``lumaxlike profile`` on parsed ``args``; print the table; return 0."""
    from .._profile import ProfileConfig, format_table, run_profile

    solvers = ("jax", "numba") if args.solver == "both" else (args.solver,)
    records = []
    for solver in solvers:
        config = ProfileConfig(
            side=args.pixels,
            bands=args.bands,
            solver=solver,
            dtype=args.dtype,
            chunk_size=args.chunk_size,
            mode=args.mode,
            memray=args.memray,
            threads=args.threads,
            warmup=args.warmup,
            max_iter=args.max_iter,
            seed=args.seed,
        )
        records.append(run_profile(config))
        peak = records[-1]["peak_rss"]
        peak_mb = "-" if peak is None else f"{peak / 1e6:,.0f}"
        print(f"{solver}: {records[-1]['seconds']:.2f} s, peak RSS {peak_mb} MB", file=sys.stderr)
    print(format_table(records))
    print(TABLE_NOTES)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(records, indent=2, default=str) + "\n")
    return EXIT_OK
