"""``lumaxlike unmix`` with endmembers from optical constants: its options
(`add_optical_options`) and the endmembers they make (`optical_endmembers`).

``--optical-constants NAME[:UM],...`` names each endmember's n, k: a set shipped with
lumaxlike (`lumaxlike.optical_constants_names`) or a CSV file (wavelength [um], n, k;
`OpticalConstants.from_csv`), optionally with its grain size [um] after a colon (else
``--grain-size``). ``--free grain_size,npfe`` fits each endmember's grain size and the
pixel's nanophase iron (`lumaxlike.unmix`'s ``free``), within ``--grain-size-bounds``
[um] and ``--npfe-bounds`` [wt %], from ``--npfe`` [wt %] and ``--starts`` starts.
"""

from __future__ import annotations

from pathlib import Path

from .options import number_list, positive_int

__all__ = ["add_optical_options", "optical_endmembers", "optical_library_record"]

PERCENT = 100.0  # wt % per mass fraction


def add_optical_options(parser) -> None:
    """Add the optical-constant options to the ``unmix`` parser."""
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
        "--free",
        metavar="NAME[,NAME]",
        help="parameters fitted per pixel besides the fractions: grain_size, npfe or both "
        "(with --optical-constants; default: none, the grain sizes and npFe0 as given)",
    )
    group.add_argument(
        "--grain-size-bounds",
        type=number_list,
        metavar="LO,HI",
        help="bounds of every free grain size [um] (default 1,1000)",
    )
    group.add_argument(
        "--npfe-bounds",
        type=number_list,
        metavar="LO,HI",
        help="bounds of the nanophase iron abundance [wt %%] (default 0,2)",
    )
    group.add_argument(
        "--npfe",
        type=float,
        metavar="WT_PERCENT",
        help="the nanophase iron abundance [wt %%]: fixed, or the start when free (default 0)",
    )
    group.add_argument(
        "--starts",
        type=positive_int,
        metavar="N",
        help="starts per pixel with --free, the lowest minimum kept (lumaxlike.unmix's "
        "starts; default 1)",
    )


def _pair(flag, values, scale=1.0):
    if values is None:
        return None
    if len(values) != 2:
        raise ValueError(f"{flag} takes two numbers LO,HI, got {values}")
    return (values[0] / scale, values[1] / scale)


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
    npfe = 0.0 if args.npfe is None else args.npfe / PERCENT
    npfe_bounds = _pair("--npfe-bounds", args.npfe_bounds, PERCENT)
    free = () if args.free is None else tuple(n.strip() for n in args.free.split(",") if n.strip())
    if free and npfe_bounds is None:
        npfe_bounds = (0.0, 0.02) if "npfe" in free or npfe > 0 else (0.0, 0.0)
    elif npfe_bounds is None:
        npfe_bounds = (npfe, npfe)
    endmembers = Endmembers.from_optical_constants(
        [constants for _, constants, _ in items],
        grain_size,
        wavelengths,
        names=[name for name, _, _ in items],
        density=scalar_or_list(per_endmember["--density"]),
        npfe_fraction=npfe,
        grain_size_bounds=_pair("--grain-size-bounds", args.grain_size_bounds),
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
