"""``lumaxlike unmix`` with endmembers from optical constants: its options
(`add_optical_options`) and the endmembers they make (`optical_endmembers`).

``--optical-constants NAME[:UM],...`` names each endmember's n, k: a set shipped with
lumaxlike (`lumaxlike.optical_constants_names`) or a CSV file (wavelength [um], n, k;
`OpticalConstants.from_csv`), optionally with its grain size [um] after a colon (else
``--grain-size``). ``--free grain_size,npfe`` fits each endmember's grain size and the
pixel's nanophase iron (`lumaxlike.unmix`'s ``free``), within ``--grain-size-bounds``
[um] and ``--npfe-bounds`` [wt %], from ``--npfe`` [wt %] and ``--starts`` starts.
An option the run would ignore (these with ``--endmembers``, the library's with
``--optical-constants``, the bounds of a parameter that is not free) is refused
(`refuse_ignored_options`).
"""

from __future__ import annotations

import math
from pathlib import Path

from .options import dest, number_list

__all__ = [
    "add_optical_options",
    "optical_endmembers",
    "optical_library_record",
    "refuse_ignored_options",
]

PERCENT = 100.0  # wt % per mass fraction
#: options of endmembers from optical constants, refused with library spectra
OPTICAL_ONLY = ("--free", "--grain-size-bounds", "--npfe-bounds", "--npfe", "--starts")
#: options of the --endmembers library, refused with --optical-constants
LIBRARY_ONLY = (
    "--library-format",
    "--library-units",
    "--library-incidence",
    "--library-emission",
    "--library-azimuth",
    "--fwhm",
)


def add_optical_options(parser) -> None:
    """Add the optical-constant options to the ``unmix`` parser."""
    from .._unmix.options import UnmixSettings

    group = parser.add_argument_group(
        "endmembers from optical constants (free grain sizes and nanophase iron)"
    )
    group.add_argument(
        "--optical-constants",
        metavar="NAME[:UM],...",
        help="the endmembers' optical constants, in place of --endmembers: shipped sets ("
        "lumaxlike.optical_constants_names(): olivine, orthopyroxene, ...) or CSV files "
        "(wavelength [um], n, k; '# density:' comment), each with its grain size [um] after "
        "a colon (else --grain-size); --density defaults to the sets' own",
    )
    group.add_argument(
        "--grain-size-bounds",
        type=number_list,
        metavar="LO,HI",
        help="bounds of every free grain size [um], with --free grain_size (default 1,1000)",
    )
    group.add_argument(
        "--npfe-bounds",
        type=number_list,
        metavar="LO,HI",
        help="bounds of the nanophase iron abundance [wt %%], with --free npfe (default 0,2)",
    )
    group.add_argument(
        "--npfe",
        type=float,
        metavar="WT_PERCENT",
        help="the nanophase iron abundance [wt %%]: fixed, or the start when free (default 0)",
    )
    # the options of `UnmixSettings` these are for, as it declares them: --free, --starts
    UnmixSettings.add_arguments(group, names=("free", "starts"))


def _text(values) -> str:
    """Numbers as the user types them: ``"2,0"``."""
    return ",".join(f"{float(v):g}" for v in values)


def _given(args, flags) -> list[str]:
    return [flag for flag in flags if getattr(args, dest(flag), None) is not None]


def _free_names(args) -> tuple[str, ...]:
    return () if args.free is None else tuple(n.strip() for n in args.free.split(",") if n.strip())


def refuse_ignored_options(args) -> None:
    """Refuse (ValueError naming the options) a ``lumaxlike unmix`` command line with
    options its endmembers would ignore: --endmembers with --optical-constants, the
    optical-constant options (--free, the bounds, --npfe, --starts) with library spectra,
    the library's options with optical constants, and bounds or --starts of parameters
    that are not free."""
    if args.optical_constants is None:
        ignored = _given(args, OPTICAL_ONLY)
        if ignored:
            raise ValueError(
                f"{', '.join(ignored)}: for endmembers from --optical-constants only; the "
                "laboratory spectra of --endmembers have fixed grain sizes and no nanophase "
                "iron to fit"
            )
        return
    if args.endmembers is not None:
        raise ValueError("--endmembers and --optical-constants both give the endmembers: give one")
    ignored = _given(args, LIBRARY_ONLY)
    if ignored:
        raise ValueError(
            f"{', '.join(ignored)}: for the laboratory spectra of --endmembers only; "
            "--optical-constants' endmembers are computed at the band centres"
        )
    free = _free_names(args)
    for flag, name in (("--grain-size-bounds", "grain_size"), ("--npfe-bounds", "npfe")):
        if _given(args, [flag]) and name not in free:
            raise ValueError(f"{flag} bounds a free {name}: add --free {name}, or leave it out")
    if args.starts is not None and not free:
        raise ValueError("--starts: starts of the parameters --free fits; give --free too")


def _bounds(flag, values, high: float, unit: str, *, positive: bool = False):
    """``--*-bounds LO,HI`` checked: two numbers, 0 <= LO <= HI < high (0 < LO where
    ``positive``; ``unit`` in the message); None when not given."""
    if values is None:
        return None
    low_fine = len(values) == 2 and (values[0] > 0 if positive else values[0] >= 0)
    if not (low_fine and values[0] <= values[1] < high):
        relation = "0 <" if positive else "0 <="
        limit = "" if math.isinf(high) else f" < {high:g}"
        raise ValueError(
            f"argument {flag}: LO,HI [{unit}] with {relation} LO <= HI{limit} expected, "
            f"got {_text(values)}"
        )
    return (float(values[0]), float(values[1]))


def _npfe_fractions(args, free) -> tuple[float, tuple[float, float]]:
    """(npFe0, its bounds) as mass fractions from --npfe and --npfe-bounds [wt %]: the
    bounds the default 0,2 when npFe0 is free, else --npfe itself (fixed)."""
    npfe = 0.0 if args.npfe is None else args.npfe
    if not (math.isfinite(npfe) and 0.0 <= npfe < PERCENT):
        raise ValueError(f"argument --npfe: a wt % in [0, 100) expected, got {npfe:g}")
    if "npfe" not in free:
        return npfe / PERCENT, (npfe / PERCENT, npfe / PERCENT)
    from .._unmix.optical_endmembers import DEFAULT_NPFE_BOUNDS  # mass fractions

    given = _bounds("--npfe-bounds", args.npfe_bounds, PERCENT, "wt %")
    bounds = tuple(PERCENT * v for v in DEFAULT_NPFE_BOUNDS) if given is None else given
    if not bounds[0] <= npfe <= bounds[1]:
        raise ValueError(
            f"--npfe {npfe:g} lies outside --npfe-bounds {_text(bounds)} [wt %]"
            + (" (the default)" if given is None else "")
        )
    return npfe / PERCENT, (bounds[0] / PERCENT, bounds[1] / PERCENT)


def _grain_size_bounds(args, free, names, grain_size):
    """The grain sizes' bounds [um], (p, 2): --grain-size-bounds (or the default) for
    free grain sizes, each checked to hold its start; each grain size itself when fixed."""
    import numpy as np

    from .._unmix.optical_endmembers import DEFAULT_GRAIN_SIZE_BOUNDS  # [um]

    sizes = np.atleast_1d(np.asarray(grain_size, np.float64))
    if sizes.ndim != 1 or sizes.size not in (1, len(names)):
        return None  # `Endmembers.from_optical_constants` refuses grain_size by name
    sizes = np.broadcast_to(sizes, (len(names),))
    if "grain_size" not in free:
        return np.stack([sizes, sizes], axis=-1)
    given = _bounds("--grain-size-bounds", args.grain_size_bounds, math.inf, "um", positive=True)
    bounds = DEFAULT_GRAIN_SIZE_BOUNDS if given is None else given
    for name, size in zip(names, sizes):
        if not bounds[0] <= size <= bounds[1]:
            raise ValueError(
                f"the grain size {size:g} um of {name} lies outside --grain-size-bounds "
                f"{_text(bounds)} [um]" + (" (the default)" if given is None else "")
            )
    return bounds


def _constants(spec: str):
    """(name, OpticalConstants, grain size or None) of one ``NAME[:UM]`` item."""
    from .._optical.constants import OpticalConstants
    from .._optical.shipped import optical_constants, optical_constants_names

    name, _, grain = spec.rpartition(":") if ":" in spec else (spec, "", "")
    name = name.strip()
    try:
        size = float(grain) if grain else None
    except ValueError:
        raise ValueError(
            f"--optical-constants: {spec!r}: the grain size must be a number"
        ) from None
    if name in optical_constants_names():
        return name, optical_constants(name), size
    path = Path(name)
    if path.is_file():
        return path.stem, OpticalConstants.from_csv(path), size
    raise ValueError(
        f"--optical-constants: {name!r} is neither a shipped set "
        f"({', '.join(optical_constants_names())}) nor a CSV file"
    )


def optical_endmembers(args, per_endmember: dict, wavelengths):
    """(`Endmembers`, free, starts) from the options; ``per_endmember`` holds the
    ``--density``, ``--grain-size`` and ``--extinction-efficiency`` values (or None)."""
    from .._unmix.endmembers import Endmembers
    from .options import scalar_or_list

    items = [_constants(spec) for spec in args.optical_constants.split(",") if spec.strip()]
    if not items:
        raise ValueError("--optical-constants names no endmember")
    sizes = [size for _, _, size in items]
    given = per_endmember["--grain-size"]
    if any(size is None for size in sizes):
        if given is None:
            raise ValueError(
                "the grain sizes: give each as NAME:UM in --optical-constants, or --grain-size"
            )
        grain_size = scalar_or_list(given)
    else:
        grain_size = sizes
    free = _free_names(args)
    names = [name for name, _, _ in items]
    npfe, npfe_bounds = _npfe_fractions(args, free)
    endmembers = Endmembers.from_optical_constants(
        [constants for _, constants, _ in items],
        grain_size,
        wavelengths,
        names=names,
        density=scalar_or_list(per_endmember["--density"]),
        npfe_fraction=npfe,
        grain_size_bounds=_grain_size_bounds(args, free, names, grain_size),
        npfe_bounds=npfe_bounds,
        extinction_efficiency=scalar_or_list(per_endmember["--extinction-efficiency"]),
    )
    return endmembers, free, args.starts


def optical_library_record(args, wavelengths) -> dict:
    """The ``library`` recorded for endmembers from optical constants: the options as
    given (CSV files absolute) and the band centres [um]."""
    specs = []
    for spec in args.optical_constants.split(","):
        name, colon, grain = spec.rpartition(":") if ":" in spec else (spec, "", "")
        if Path(name).is_file():
            name = str(Path(name).absolute())
        specs.append(name + colon + grain)
    return {
        "optical_constants": specs,
        "free": args.free,
        "grain_size_bounds_um": args.grain_size_bounds,
        "npfe_bounds_wt_percent": args.npfe_bounds,
        "npfe_wt_percent": args.npfe,
        "starts": args.starts,
        "wavelengths_um": [float(v) for v in wavelengths],
    }
