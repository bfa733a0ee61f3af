"""The ``lumaxlike demo`` command: the whole job on an embedded, synthetic scene.

Entry point: `run_demo`. The building blocks live in the submodules: the scene
(``scene``), its forward model and Hapke parameters (``forward``), the vendored spectra
(``spectra``), the input files (``rasters``), the figure (``figure``) and the run itself
(``run``). Their user-facing part is the public module `lumaxlike.demo`.

This package imports nothing heavy at import: rasterio, xarray and matplotlib are imported
by the submodules that need them, when the demo runs.
"""


def run_demo(argv=None) -> int:
    """Run ``lumaxlike demo``; see `lumaxlike._demo.run.run_demo`."""
    from .run import run_demo as _run_demo

    return _run_demo(argv)


__all__ = ["run_demo"]
