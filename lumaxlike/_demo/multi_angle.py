"""``lumaxlike demo --multi-angle``: a small stack of the demo scene seen under several
observation geometries, with known w, b and c, for ``lumaxlike fit`` and ``lumaxlike sample``.

Writes one reflectance cube and one OBS raster per geometry (`MULTI_ANGLE_GEOMETRY_DEG`,
the same sun and sensor directions at every pixel, on the scene's hills: local incidence
and emission vary with the DTM), the DTM and the truth (w, and b, c as in the demo), adds
Gaussian noise of a known standard deviation, and prints the ``lumaxlike fit`` and
``lumaxlike sample`` commands that recover them. Runs nothing heavy itself: the
commands are the user's to run.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from .forward import DEMO_HAPKE, command_line, describe_hapke, simulate_reflectance
from .rasters import demo_transform, write_dtm, write_obs, write_spectral_cube
from .scene import Scene, make_scene

__all__ = [
    "MULTI_ANGLE_BANDS",
    "MULTI_ANGLE_GEOMETRY_DEG",
    "MultiAngleStack",
    "fit_command",
    "run_multi_angle",
    "sample_command",
    "write_multi_angle_stack",
]

#: (to-sun zenith, to-sun azimuth, to-sensor zenith, to-sensor azimuth) [deg] of each
#: observation, azimuths clockwise from north: phase angles from about 10 (near the
#: opposition surge) to about 85 deg (forward scattering), as a few passes of an orbiter
#: or a goniometer would give.
MULTI_ANGLE_GEOMETRY_DEG = (
    (30.0, 135.0, 0.0, 0.0),
    (30.0, 135.0, 40.0, 135.0),
    (30.0, 135.0, 50.0, 315.0),
    (55.0, 225.0, 20.0, 45.0),
    (55.0, 225.0, 45.0, 225.0),
    (45.0, 90.0, 30.0, 270.0),
    (20.0, 180.0, 55.0, 0.0),
)
#: the demo's bands the stack keeps (of 51, 450-2450 nm): fit and sample solve each
#: pixel-band apart, so a few show the job
MULTI_ANGLE_BANDS = (15, 40)


@dataclasses.dataclass(frozen=True)
class MultiAngleStack:
    """The files of a multi-angle stack and its truth.

    Attributes:
        cubes: one reflectance cube per observation, r [1/sr], GeoTIFF.
        obs: one OBS raster per observation (to-sun/to-sensor zenith and azimuth [deg]).
        dtm: heights [m], GeoTIFF (the same for every observation).
        w_true: the true single-scattering albedo, GeoTIFF, one band per kept band.
        w: the true w, shape ``(rows, cols, bands)``.
        sigma: standard deviation of the Gaussian noise added to every cube [1/sr]
            (0 for exact data).
    """

    cubes: tuple[Path, ...]
    obs: tuple[Path, ...]
    dtm: Path
    w_true: Path
    w: np.ndarray
    sigma: float


def observed_scene(scene: Scene, geometry_deg) -> Scene:
    """``scene`` under one observation geometry ``(sun zenith, sun azimuth, sensor zenith,
    sensor azimuth)`` [deg], the same at every pixel, with its `MULTI_ANGLE_BANDS` only."""
    keep = list(MULTI_ANGLE_BANDS)
    field = np.ones_like(scene.dtm, dtype=np.float64)
    sun_zenith, sun_azimuth, sensor_zenith, sensor_azimuth = geometry_deg
    return dataclasses.replace(
        scene,
        wavelength_nm=scene.wavelength_nm[keep],
        endmember_w=scene.endmember_w[:, keep],
        w=scene.w[..., keep],
        to_sun_zenith_deg=sun_zenith * field,
        to_sun_azimuth_deg=sun_azimuth * field,
        to_sensor_zenith_deg=sensor_zenith * field,
        to_sensor_azimuth_deg=sensor_azimuth * field,
    )


def write_multi_angle_stack(workdir, scene: Scene, noise: float) -> MultiAngleStack:
    """Write the stack of ``scene`` under every `MULTI_ANGLE_GEOMETRY_DEG`.

    Args:
        workdir: existing output directory.
        scene: the demo scene (its DTM, truth and seed).
        noise: the noise's standard deviation as a fraction of the stack's median r [-];
            the absolute value (rounded to 3 digits) is `MultiAngleStack.sigma`. Each
            cube draws its own noise, seeded by the scene's seed and its index.

    Returns:
        The paths written and the truth.
    """
    workdir = Path(workdir)
    transform = demo_transform(scene.config.pixel_size_m)
    views = [observed_scene(scene, geometry) for geometry in MULTI_ANGLE_GEOMETRY_DEG]
    exact = [simulate_reflectance(view, backend="numba") for view in views]
    sigma = float(f"{noise * float(np.median(exact)):.3g}")
    cubes, obs = [], []
    for index, (view, r) in enumerate(zip(views, exact), start=1):
        rng = np.random.default_rng([scene.config.seed, 2, index])
        noisy = r + sigma * rng.standard_normal(r.shape)
        cubes.append(
            write_spectral_cube(
                workdir / f"view{index}.tif",
                noisy,
                view.wavelength_nm,
                transform,
                quantity="bidirectional reflectance r",
                units="1/sr",
            )
        )
        obs.append(write_obs(workdir / f"view{index}_obs.tif", view, transform))
    w_true = write_spectral_cube(
        workdir / "w_true.tif",
        views[0].w,
        views[0].wavelength_nm,
        transform,
        quantity="single-scattering albedo w",
        units="1",
    )
    dtm = write_dtm(workdir / "dtm.tif", scene.dtm, transform)
    return MultiAngleStack(tuple(cubes), tuple(obs), dtm, w_true, views[0].w, sigma)


def _stack_args(stack: MultiAngleStack) -> list[str]:
    return [
        *map(str, stack.cubes),
        "--geometry",
        *map(str, stack.obs),
        "--dtm",
        str(stack.dtm),
        "--units",
        "r",
    ]


def fit_command(stack: MultiAngleStack, out) -> list[str]:
    """``lumaxlike fit`` (without the program name) fitting w, b and c per pixel and band,
    from a start away from the truth (b 0.3, c 0.6; the other parameters the demo's)."""
    fixed = [
        arg
        for name, value in DEMO_HAPKE.items()
        if name not in ("b", "c")
        for arg in (f"--{name.replace('_', '-')}", f"{value:g}")
    ]
    return [
        "fit",
        *_stack_args(stack),
        "--free",
        "w,b,c",
        "--b",
        "0.3",
        "--c",
        "0.6",
        *fixed,
        "--out",
        str(out),
        "--overwrite",
    ]


def sample_command(stack: MultiAngleStack, out) -> list[str]:
    """``lumaxlike sample`` (without the program name) sampling w per pixel and band
    (b, c and the rest at the demo's values) with the stack's noise, with fewer draws
    than the defaults (a quick look; raise them for a publication), two rows per block
    (the progress bar moves block by block)."""
    fixed = [
        arg
        for name, value in DEMO_HAPKE.items()
        for arg in (f"--{name.replace('_', '-')}", f"{value:g}")
    ]
    return [
        "sample",
        *_stack_args(stack),
        "--free",
        "w",
        *fixed,
        "--refl-sigma",
        f"{stack.sigma:g}",
        "--num-samples",
        "300",
        "--num-warmup",
        "200",
        "--chunk",
        "2",
        "--out",
        str(out),
        "--overwrite",
    ]


def run_multi_angle(args) -> int:
    """``lumaxlike demo --multi-angle`` for parsed arguments
    (`lumaxlike._demo.arguments.parse_args`): write the stack, print the commands;
    return 0."""
    workdir = args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    scene = make_scene(args.scene)
    stack = write_multi_angle_stack(workdir, scene, args.noise)
    rows, cols, bands = stack.w.shape
    print(
        f"lumaxlike demo --multi-angle: {rows} x {cols} pixels x {bands} bands "
        f"({', '.join(f'{v:.0f}' for v in scene.wavelength_nm[list(MULTI_ANGLE_BANDS)])} nm), "
        f"{len(stack.cubes)} observation geometries; seed {args.seed}"
    )
    print(f"  cubes: {', '.join(map(str, stack.cubes))}")
    print(f"  OBS rasters: {', '.join(map(str, stack.obs))}; DTM {stack.dtm}")
    print(
        f"  truth: w in {stack.w_true}; {describe_hapke()} (every pixel and band); "
        f"the cubes hold r [1/sr] with Gaussian noise of sigma {stack.sigma:g} 1/sr"
    )
    print("  fit w, b and c per pixel and band (seconds):")
    print(f"    {command_line(fit_command(stack, workdir / 'fit.tif'))}")
    print("  sample the posterior of w (minutes: most of it compiling the sampler):")
    print(f"    {command_line(sample_command(stack, workdir / 'posterior.tif'))}")
    return 0
