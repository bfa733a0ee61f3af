"""``lumaxlike demo``: the package's main job end to end on an embedded scene.

Builds a scene from vendored USGS spectra, forward-models its reflectance cube, writes
it with its OBS geometry and DTM as rasters (and as netCDF files for the xarray front end),
inverts it with :func:`lumaxlike.invert_file` with each requested solver, printing the
Hapke parameters and the ``lumaxlike invert`` command that does the same, prints accuracy
and throughput, and saves a figure. The scene is an intimate mixture of the minerals with
known mass fractions per pixel: the demo also writes the minerals' laboratory spectra as
a library (``minerals.csv``) and recovers the mass-fraction maps with
:func:`lumaxlike.unmix_file` (two-step route; the equivalent ``lumaxlike unmix`` command is
printed), printing their error and drawing them (``abundances.png``). Needs no network and
no arguments. The command line is not imported: the demo is a user of the library.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .arguments import SOLVER_CHOICES, parse_args
from .arguments import parser as _parser  # noqa: F401 (tests read its help)
from .figure import RecoveredMaps, plot_abundance_figure, plot_demo_figure
from .forward import (
    command_line,
    demo_hapke_params,
    describe_hapke,
    hapke_cli_args,
    simulate_reflectance,
)
from .library import LIBRARY_GEOMETRY_DEG, library_record, write_mineral_library
from .netcdf import write_netcdf_inputs
from .rasters import read_raster, write_demo_inputs
from .scene import make_scene

__all__ = ["run_demo", "Accuracy", "accuracy", "command_line", "describe_hapke"]


@dataclass(frozen=True)
class Accuracy:
    """Agreement of recovered w with the truth over converged (pixel, band) elements.

    Attributes:
        max_error: largest |w_recovered - w_true| [-]; NaN when nothing converged.
        median_error: median |w_recovered - w_true| [-]; NaN when nothing converged.
        fraction_converged: converged elements / all elements, in [0, 1].
    """

    max_error: float
    median_error: float
    fraction_converged: float


def accuracy(w_true, w_recovered, converged) -> Accuracy:
    """Accuracy of recovered w.

    Args:
        w_true, w_recovered: single-scattering albedo, shape ``(rows, cols, bands)``.
        converged: boolean mask of converged elements, same shape.

    Returns:
        Accuracy.
    """
    error = np.abs(np.asarray(w_recovered) - np.asarray(w_true))[converged]
    if error.size == 0:
        return Accuracy(float("nan"), float("nan"), 0.0)
    return Accuracy(float(error.max()), float(np.median(error)), float(np.mean(converged)))


def run_demo(argv=None) -> int:
    """Run the demo; the entry point of ``lumaxlike demo``.

    Args:
        argv: command-line arguments after ``demo`` (see ``--help``); ``None`` or ``[]``
            runs with the defaults.

    Returns:
        0 on success (``--help`` included), 2 for bad arguments (after a message on
        stderr).

    Raises:
        whatever :func:`lumaxlike.invert_file` or :func:`lumaxlike.unmix_file` raise (the
        ``lumaxlike demo`` command reports it in one line, as ``invert`` would).
    """
    try:
        args = parse_args([] if argv is None else argv)
    except SystemExit as exit_request:  # argparse's way out of --help and usage errors
        return 0 if exit_request.code is None else int(exit_request.code)
    if args.multi_angle:
        from .multi_angle import run_multi_angle

        return run_multi_angle(args)
    return run_parsed(args)


def run_parsed(args) -> int:
    """The inversion demo for parsed arguments (`lumaxlike._demo.arguments.parse_args`);
    returns 0."""
    from .. import Status  # imported lazily: lumaxlike/__init__ may re-export run_demo

    start = time.perf_counter()
    workdir = args.workdir
    workdir.mkdir(parents=True, exist_ok=True)

    scene = make_scene(args.scene)
    reflectance = simulate_reflectance(scene, noise=args.noise)
    inputs = write_demo_inputs(workdir, scene, reflectance)
    netcdf = write_netcdf_inputs(workdir, scene, reflectance)
    rows, cols, bands = scene.w.shape
    print(
        f"lumaxlike demo: {rows} x {cols} pixels x {bands} bands "
        f"({scene.wavelength_nm[0]:.0f}-{scene.wavelength_nm[-1]:.0f} nm), w an intimate mixture of "
        f"{', '.join(scene.mineral_names)} (USGS splib07); seed {args.seed}, noise {args.noise:g}"
    )
    print(
        f"  inputs: {inputs.cube} (ENVI copy {inputs.cube_envi}), {inputs.obs}, {inputs.dtm}; "
        f"truth {inputs.w_true}"
    )
    print(f"  netCDF copies for xarray: {netcdf.cube}, {netcdf.obs}; truth {netcdf.w_true}")
    print(
        f"  Hapke parameters (every pixel and band): {describe_hapke()}; "
        "the cube holds r [1/sr] (--units r)"
    )

    cube = inputs.cube if args.input_format == "gtiff" else inputs.cube_envi
    recovered = [
        _invert_demo(solver, workdir, scene, inputs, cube) for solver in SOLVER_CHOICES[args.solver]
    ]

    unmixed = _unmix_demo(workdir, scene, inputs, cube, Status)

    if not args.no_figure:
        band = int(np.argmax(scene.w.reshape(-1, bands).std(axis=0)))
        first = recovered[0]
        error = np.where(first.status == Status.CONVERGED, np.abs(first.w - scene.w), -1.0)
        pixel = np.unravel_index(int(np.argmax(error.max(axis=-1))), (rows, cols))
        status_names = Status.legend()
        figure = plot_demo_figure(
            workdir / "demo.png",
            scene,
            recovered,
            status_names,
            band,
            (int(pixel[0]), int(pixel[1])),
        )
        print(f"  figure: {figure} (spectrum at the pixel of largest {first.solver} error)")
        figure = plot_abundance_figure(
            workdir / "abundances.png", scene, unmixed, "unmix two_step, numba"
        )
        print(f"  figure: {figure} (true vs recovered mass fractions)")
    print(f"  done in {time.perf_counter() - start:.1f} s")
    return 0


def _invert_demo(solver, workdir, scene, inputs, cube) -> RecoveredMaps:
    """Invert the demo cube with ``solver`` twice (what the printed ``lumaxlike invert``
    does; the first run compiles), print its accuracy and throughput; return its maps."""
    from .. import Status
    from .._files.invert import invert_file
    from .._io.write.writers import result_paths
    from .._options import RunOptions

    rows, cols, bands = scene.w.shape
    out = workdir / f"w_{solver}.tif"
    command = [
        "invert",
        str(cube),
        "--geometry",
        str(inputs.obs),
        "--dtm",
        str(inputs.dtm),
        "--solver",
        solver,
        "--out",
        str(out),
        "--units",
        "r",
        *hapke_cli_args(),
        "--overwrite",
        "--no-progress",
    ]
    print(f"  running: {command_line(command)}")
    seconds = []
    for _ in range(2):  # the first run compiles; the second shows the warm throughput
        tic = time.perf_counter()
        invert_file(
            cube,
            out,
            geometry=inputs.obs,
            dtm=inputs.dtm,
            params=demo_hapke_params(),
            solver=solver,
            units="r",
            run=RunOptions(overwrite=True, progress=False),
            command=command_line(command),
        )
        seconds.append(time.perf_counter() - tic)
    maps = RecoveredMaps(solver, read_raster(out), read_raster(result_paths(out)["status"]))
    score = accuracy(scene.w, maps.w, maps.status == Status.CONVERGED)
    cold, warm = seconds
    print(
        f"  {solver:>5}: converged {100 * score.fraction_converged:.2f} % of pixel-bands; "
        f"|w error| max {score.max_error:.2e}, median {score.median_error:.2e}; "
        f"first run {cold:.2f} s (with compilation), second {warm:.2f} s = "
        f"{rows * cols / warm:,.0f} pixels/s, {rows * cols * bands / warm / 1e6:.2f} M "
        f"w-inversions/s (file IO included) -> {out}"
    )
    return maps


def _unmix_demo(workdir, scene, inputs, cube, status_codes):
    """Write the mineral library, unmix the cube (what the printed ``lumaxlike unmix`` command
    does) and print the error of the recovered mass fractions; return them
    ``(rows, cols, minerals)``."""
    from .._files.unmix import unmix_file
    from .._files.wavelengths import cube_wavelengths_um
    from .._io.read.raster import CubeReader
    from .._io.read.spectral_library import read_spectral_library
    from .._io.write.writers import result_paths
    from .._options import RunOptions
    from .._unmix.endmembers import Endmembers

    library = write_mineral_library(workdir / "minerals.csv", scene)
    out = workdir / "abundances.tif"
    incidence, emission, _ = LIBRARY_GEOMETRY_DEG
    command = [
        "unmix",
        str(cube),
        "--geometry",
        str(inputs.obs),
        "--dtm",
        str(inputs.dtm),
        "--units",
        "r",
        "--endmembers",
        str(library),
        "--library-incidence",
        f"{incidence:g}",
        "--library-emission",
        f"{emission:g}",
        "--density",
        ",".join(f"{v:g}" for v in scene.density),
        "--grain-size",
        ",".join(f"{v:g}" for v in scene.grain_size_um),
        "--fwhm",
        "0.001",
        *hapke_cli_args(),
        "--route",
        "two_step",
        "--solver",
        "numba",
        "--out",
        str(out),
        "--overwrite",
        "--no-progress",
    ]
    print(
        f"  library: {library} (the minerals' reflectance factor at incidence {incidence:g} deg, "
        f"emission {emission:g} deg, on the cube's band centres: --fwhm 0.001 takes each sample as is)"
    )
    print(f"  running: {command_line(command)}")
    tic = time.perf_counter()
    with CubeReader(cube) as reader:
        wavelengths = cube_wavelengths_um(reader.info)
    params = demo_hapke_params()
    endmembers = Endmembers.from_library(  # the values as the printed command gives them
        read_spectral_library(
            [library],
            units="reff",
            incidence=np.radians(_as_printed(incidence)),  # the command's degrees, as it converts
            emission=np.radians(_as_printed(emission)),
            azimuth=0.0,
        ),
        params,
        density=[_as_printed(v) for v in scene.density],
        grain_size=[_as_printed(v) for v in scene.grain_size_um],
        wavelengths=wavelengths,
        fwhm=0.001,
        solver="numba",
    )
    unmix_file(
        cube,
        out,
        geometry=inputs.obs,
        dtm=inputs.dtm,
        endmembers=endmembers,
        params=params,
        solver="numba",
        units="r",
        route="two_step",
        run=RunOptions(overwrite=True, progress=False),
        command=command_line(command),
        library=library_record(library, wavelengths, fwhm_um=0.001),
    )
    seconds = time.perf_counter() - tic
    fractions = read_raster(out)
    status = read_raster(result_paths(out, ("status",), "fractions")["status"])[..., 0]
    solved = status == status_codes.CONVERGED
    error = np.abs(fractions - scene.abundance)[solved]
    worst = float(error.max()) if error.size else float("nan")
    median = float(np.median(error)) if error.size else float("nan")
    rows, cols = status.shape
    print(
        f"  unmix: converged {100 * solved.mean():.2f} % of pixels; |mass fraction error| max {worst:.2e}, "
        f"median {median:.2e}; {seconds:.2f} s (with compilation) = {rows * cols / seconds:,.0f} pixels/s "
        f"-> {out}"
    )
    return fractions


def _as_printed(value) -> float:
    """``value`` as the printed command gives it (``:g``, six significant digits)."""
    return float(f"{value:g}")
