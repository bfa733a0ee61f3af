"""The arguments of ``lumaxlike demo``: its parser, which imports nothing heavy, so that
``lumaxlike demo --help`` answers before JAX, numba, rasterio or matplotlib load."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from .defaults import DEFAULT_SEED

__all__ = ["DEFAULT_SEED", "SOLVER_CHOICES", "parse_args", "parser"]

SOLVER_CHOICES = {"both": ("jax", "numba"), "jax": ("jax",), "numba": ("numba",)}

DEMO_EPILOG = """\
example (a small scene, the numba solver only, files in ./lumaxlike-demo):
  lumaxlike demo --size 32 --solver numba
"""


def parser() -> argparse.ArgumentParser:
    """The argparse parser of ``lumaxlike demo``."""
    demo = argparse.ArgumentParser(
        prog="lumaxlike demo",
        description="Invert a synthetic hyperspectral scene built from USGS mineral spectra "
        "and compare the recovered single-scattering albedo with the truth. With "
        "--multi-angle: write a small stack of the scene seen from several geometries, "
        "for `lumaxlike fit` and `lumaxlike sample`, and print their commands.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=DEMO_EPILOG,
    )
    demo.add_argument(
        "--workdir",
        type=Path,
        default=Path("lumaxlike-demo"),
        help="directory for the rasters and the figure (default: ./lumaxlike-demo)",
    )
    demo.add_argument(
        "--size",
        type=int,
        default=None,
        help="pixels per side of the square scene [pixels] (default: 96; 8 with --multi-angle)",
    )
    demo.add_argument(
        "--solver",
        choices=tuple(SOLVER_CHOICES),
        default="both",
        help="solver(s) to run: numba (CPU), jax (CPU or GPU) or both (default: both)",
    )
    demo.add_argument(
        "--no-figure",
        action="store_true",
        help="do not draw the PNG figure (default: draw lumaxlike-demo/demo.png)",
    )
    demo.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"seed of the scene and the noise (default: {DEFAULT_SEED})",
    )
    demo.add_argument(
        "--noise",
        type=float,
        default=None,
        help="relative standard deviation of Gaussian noise on the reflectance "
        "[-, fraction of the value] (default: 0, exact data; 0.005 with --multi-angle)",
    )
    demo.add_argument(
        "--input-format",
        choices=("gtiff", "envi"),
        default="gtiff",
        help="which copy of the reflectance cube to invert (default: gtiff)",
    )
    demo.add_argument(
        "--multi-angle",
        action="store_true",
        help="write a small multi-angle stack (the scene under several geometries, known "
        "w, b and c) and print the `lumaxlike fit` and `lumaxlike sample` commands that "
        "recover them, instead of the inversion demo (default: the inversion demo)",
    )
    return demo


def parse_args(argv) -> argparse.Namespace:
    """``argv`` parsed, ``args.scene`` its `lumaxlike.demo.SceneConfig`.

    Raises:
        SystemExit: ``--help`` (code 0) or a bad argument (code 2, after a message).
    """
    demo = parser()
    args = demo.parse_args(argv)
    if args.size is None:
        args.size = 8 if args.multi_angle else 96
    if args.noise is None:
        args.noise = 0.005 if args.multi_angle else 0.0
    from .scene import SceneConfig  # numpy: once the arguments are parsed

    try:
        args.scene = SceneConfig(size=args.size, seed=args.seed)
    except ValueError as error:
        demo.error(f"--size/--seed: {error}")
    if not (math.isfinite(args.noise) and args.noise >= 0.0):
        demo.error("--noise must be a finite number >= 0")
    if args.multi_angle and args.noise == 0.0:
        demo.error("--noise must be > 0 with --multi-angle: `lumaxlike sample` needs its sigma")
    return args
