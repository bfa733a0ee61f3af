"""The ``lumaxlike demo`` command: the whole job on an embedded, synthetic scene.

Entry point: `run_demo`. The building blocks live in the submodules: the arguments
(``arguments``, with ``defaults``), the scene (``scene``), its forward model and Hapke
parameters (``forward``), the vendored spectra (``spectra``), the input files
(``rasters``, ``netcdf``, the endmember library ``library``), the figure (``figure``),
the run itself (``run``) and the multi-angle stack of ``--multi-angle``
(``multi_angle``). Their user-facing part is the public module `lumaxlike.demo`.

This package imports nothing heavy at import: rasterio, xarray and matplotlib are imported
by the submodules that need them, when the demo runs.
"""


def run_demo(argv=None) -> int:
    """Run ``lumaxlike demo``; see `lumaxlike._demo.run.run_demo`. The arguments are
    parsed first: ``--help`` and a bad argument import nothing heavy."""
    from .arguments import parse_args

    try:
        args = parse_args([] if argv is None else argv)
    except SystemExit as exit_request:  # argparse's way out of --help and usage errors
        return 0 if exit_request.code is None else int(exit_request.code)
    if args.multi_angle:
        from .multi_angle import run_multi_angle

        return run_multi_angle(args)
    from .run import run_parsed

    return run_parsed(args)


__all__ = ["run_demo"]
