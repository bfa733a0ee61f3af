"""The ``lumaxlike`` command line: ``invert`` end to end, exit codes and messages."""

import subprocess
import sys

import numpy as np
import pytest
from affine import Affine

import lumaxlike
from lumaxlike import Status
from lumaxlike._cli import main
from lumaxlike._io import read_cube

from .helpers import count_raster_opens
from .test_io import OBS_DESCRIPTIONS, digest, make_scene, write_raster, write_scene

PARAM_FLAGS = ["--b", "0.2", "--c", "0.4", "--roughness-deg", "15"]  # = PARAMS


@pytest.fixture
def scene_files(tmp_path):
    scene = make_scene()
    cube, obs, dtm = write_scene(tmp_path, scene)
    return scene, cube, obs, dtm


def run(capsys, *args):
    """Run the CLI in-process; return (exit code, stderr)."""
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def invert_args(cube, obs, out, *extra, solver="numba", units="r"):
    return [
        "invert",
        cube,
        "--geometry",
        obs,
        "--solver",
        solver,
        "--out",
        out,
        "--units",
        units,
        *PARAM_FLAGS,
        *extra,
    ]


@pytest.mark.parametrize("solver", ["numba", "jax"])
def test_invert_writes_maps_and_reports_throughput_and_status_counts(
    tmp_path, capsys, scene_files, solver
):
    scene, cube, obs, dtm = scene_files
    hashes = {p: digest(p) for p in (cube, obs, dtm)}
    out = tmp_path / "w.tif"
    code, err = run(
        capsys, *invert_args(cube, obs, out, "--dtm", dtm, "--chunk", "3", solver=solver)
    )
    assert code == 0, err
    w, _ = read_cube(out)
    np.testing.assert_allclose(w, scene["w"], atol=1e-9)
    assert np.all(read_cube(tmp_path / "w_status.tif")[0] == Status.CONVERGED)
    assert (tmp_path / "w_iterations.tif").exists() and (tmp_path / "w_residual.tif").exists()
    assert not (tmp_path / "w_sigma.tif").exists()
    last = err.strip().splitlines()[-1]
    assert "pixels/s" in last and last.endswith(f"status of pixel-bands: CONVERGED {w.size}")
    assert "UNREACHABLE" not in last  # only the statuses that occurred
    assert "%|" not in err  # no progress bar: stderr is not a terminal
    assert {p: digest(p) for p in hashes} == hashes


def test_sigma_progress_and_per_band_parameters(tmp_path, capsys, scene_files):
    scene, cube, obs, dtm = scene_files
    out = tmp_path / "w.nc"
    code, err = run(
        capsys,
        *invert_args(
            cube,
            obs,
            out,
            "--dtm",
            dtm,
            "--refl-sigma",
            "0.001",
            "--progress",
            "--c",
            "0.4,0.4,0.4,0.4,0.4",
        ),
    )
    assert code == 0, err
    assert "100%" in err
    import xarray as xr

    with xr.open_dataset(out) as ds:
        assert np.isfinite(ds.sigma.values).all() and (ds.sigma.values > 0).all()
        np.testing.assert_allclose(np.moveaxis(ds.w.values, 0, -1), scene["w"], atol=1e-9)


def test_all_nan_cube_writes_nonfinite_status_and_exits_1_saying_why(tmp_path, capsys):
    scene = make_scene()
    cube, obs, _ = write_scene(tmp_path, scene, cube_values=np.full(scene["r"].shape, np.nan))
    code, err = run(capsys, *invert_args(cube, obs, tmp_path / "w.tif"))
    assert code == 1, err  # nothing was solved: never exit 0 (issue 23)
    assert np.all(read_cube(tmp_path / "w_status.tif")[0] == Status.NONFINITE_INPUT)
    assert f"NONFINITE_INPUT {scene['r'].size}" in err
    assert err.strip().splitlines()[-1] == (
        f"lumaxlike invert: error: no problem converged (NONFINITE_INPUT {scene['r'].size}): "
        "every pixel is nodata or NaN (in the cube or the geometry)"
    )


def assert_bad_input(code, err, *names):
    assert code == 2
    lines = err.strip().splitlines()
    assert "Traceback" not in err and lines
    for name in names:
        assert str(name) in lines[-1], (name, lines[-1])


@pytest.mark.parametrize("tag, units", [("1/sr", "radf"), ("sr-1", "reff")])
def test_units_contradicting_the_cube_tag_exit_2_naming_both(
    tmp_path, capsys, scene_files, tag, units
):
    """A cube that tags its values as r (1/sr) given as I/F (a factor pi off) or REFF."""
    import rasterio

    _, cube, obs, _ = scene_files
    with rasterio.open(cube, "r+") as dataset:
        dataset.update_tags(units=tag)
    out = tmp_path / "w.tif"
    code, err = run(capsys, *invert_args(cube, obs, out, units=units))
    assert_bad_input(code, err, f"units = {tag!r}", f"contradicts --units {units}", cube.name)
    assert not out.exists()
    assert run(capsys, *invert_args(cube, obs, out))[0] == 0  # --units r agrees


def test_missing_and_unreadable_files_exit_2_naming_the_file(tmp_path, capsys, scene_files):
    _, cube, obs, _ = scene_files
    missing = tmp_path / "missing.tif"
    assert_bad_input(*run(capsys, *invert_args(missing, obs, tmp_path / "w.tif")), missing)
    assert_bad_input(*run(capsys, *invert_args(cube, missing, tmp_path / "w.tif")), missing)
    assert_bad_input(
        *run(capsys, *invert_args(cube, obs, tmp_path / "w.tif", "--dtm", missing)), missing
    )
    garbage = tmp_path / "garbage.img"
    garbage.write_bytes(b"\x00\x01 not a raster at all")
    assert_bad_input(*run(capsys, *invert_args(garbage, obs, tmp_path / "w.tif")), garbage)
    assert not (tmp_path / "w.tif").exists()


@pytest.mark.parametrize(
    "what, kwargs",
    [
        ("shape", {"bands": np.zeros((4, 7, 6))}),
        ("transform", {"transform": Affine(30.0, 0.0, 499000.0, 0.0, -30.0, 4100000.0)}),
        ("CRS", {"crs": "EPSG:32633"}),
    ],
)
def test_misaligned_geometry_or_dtm_exits_2_naming_both_files(
    tmp_path, capsys, scene_files, what, kwargs
):
    scene, cube, obs, _ = scene_files
    kwargs = dict(kwargs)
    bands = kwargs.pop("bands", scene["angles"])
    bad_obs = write_raster(tmp_path / "bad_obs.tif", bands, descriptions=OBS_DESCRIPTIONS, **kwargs)
    bad_dtm = write_raster(tmp_path / "bad_dtm.tif", bands[:1], **kwargs)
    out = tmp_path / "w.tif"
    assert_bad_input(*run(capsys, *invert_args(cube, bad_obs, out)), bad_obs, cube, what)
    assert_bad_input(
        *run(capsys, *invert_args(cube, obs, out, "--dtm", bad_dtm)), bad_dtm, cube, what
    )
    assert not out.exists()


def test_band_count_not_matching_per_band_parameters_exits_2(tmp_path, capsys, scene_files):
    _, cube, obs, _ = scene_files
    code, err = run(capsys, *invert_args(cube, obs, tmp_path / "w.tif", "--b", "0.1,0.2,0.3"))
    assert_bad_input(code, err, "--b", "3 values", "5 bands", cube)


@pytest.mark.parametrize("command", ["invert", "normalize"])
def test_a_run_opens_its_cube_once(tmp_path, capsys, scene_files, monkeypatch, command):
    # the per-band models are made from the bands of the cube the run opened
    # (`FromBands`), not from an opening of their own
    _, cube, obs, _ = scene_files
    out = tmp_path / "w.tif"
    args = invert_args(cube, obs, out, "--b", "0.2,0.2,0.2,0.2,0.2")
    opened = count_raster_opens(monkeypatch)
    code, err = run(capsys, command, *args[1:])
    assert code == 0, err
    assert opened.count(str(cube)) == 1, opened
    assert opened.count(str(obs)) == 1, opened  # (the spy sees the opens: the geometry's)
    assert [p.b for p in lumaxlike.read_provenance(out).params] == [0.2] * 5


def test_existing_output_without_overwrite_exits_2_and_keeps_it(tmp_path, capsys, scene_files):
    _, cube, obs, _ = scene_files
    out = tmp_path / "w.img"
    assert run(capsys, *invert_args(cube, obs, out))[0] == 0
    before = {p.name: digest(p) for p in tmp_path.iterdir() if p.is_file()}
    assert_bad_input(
        *run(capsys, *invert_args(cube, obs, out, "--b", "0.3")), out.name, "--overwrite"
    )
    assert {p.name: digest(p) for p in tmp_path.iterdir() if p.is_file()} == before
    code, err = run(capsys, *invert_args(cube, obs, out, "--b", "0.3", "--overwrite"))
    assert code == 0, err
    assert digest(out) != before["w.img"]


def test_unwritable_output_location_exits_2_naming_it(tmp_path, capsys, scene_files):
    _, cube, obs, _ = scene_files
    not_a_folder = tmp_path / "file.txt"
    not_a_folder.write_text("a regular file")
    assert_bad_input(*run(capsys, *invert_args(cube, obs, not_a_folder / "w.tif")), not_a_folder)
    assert_bad_input(
        *run(capsys, *invert_args(cube, obs, tmp_path / "no" / "w.tif")), tmp_path / "no"
    )
    assert_bad_input(*run(capsys, *invert_args(cube, obs, tmp_path / "w.jpg")), "w.jpg")


@pytest.mark.parametrize(
    "args, name",
    [
        (["--units", "percent"], "--units"),
        (["--chunk", "0"], "--chunk"),
        (["--b", "1.5"], "--b"),
        (["--roughness-deg", "95"], "--roughness-deg"),
        (["--refl-sigma", "-1"], "--refl-sigma"),
        (["--workers", "two"], "--workers"),
    ],
)
def test_bad_option_values_exit_2_naming_the_option(tmp_path, capsys, scene_files, args, name):
    _, cube, obs, _ = scene_files
    assert_bad_input(*run(capsys, *invert_args(cube, obs, tmp_path / "w.tif", *args)), name)


def test_missing_required_options_exit_2(tmp_path, capsys, scene_files):
    _, cube, obs, _ = scene_files
    code, err = run(
        capsys, "invert", cube, "--geometry", obs, "--solver", "numba", "--out", tmp_path / "w.tif"
    )
    assert_bad_input(code, err, "--units")
    assert_bad_input(*run(capsys, "frobnicate"), "frobnicate")


def test_unexpected_failure_exits_1_with_traceback(tmp_path, capsys, scene_files, monkeypatch):
    _, cube, obs, _ = scene_files

    def broken(*args, **kwargs):
        raise RuntimeError("solver exploded")

    # the command calls the front end it imports by name from lumaxlike._files
    monkeypatch.setattr("lumaxlike._files.invert_file", broken)
    code, err = run(capsys, *invert_args(cube, obs, tmp_path / "w.tif"))
    assert code == 1 and "solver exploded" in err and "Traceback" in err


def test_demo_and_profile_subcommands_dispatch_lazily(monkeypatch):
    calls = []
    monkeypatch.setattr("lumaxlike._demo.run_demo", lambda argv: calls.append(("demo", argv)) or 0)
    # profile is parsed like the file commands (its body in lumaxlike._cli.profile)
    monkeypatch.setattr(
        "lumaxlike._cli.profile.run", lambda args: calls.append(("profile", args.pixels)) or 3
    )
    assert main(["demo", "--size", "8", "--help"]) == 0
    assert main(["profile", "--pixels", "8"]) == 3
    assert main(["profile", "--x"]) == 2  # an unknown option: a usage error, as for any command
    assert calls == [("demo", ["--size", "8", "--help"]), ("profile", 8)]


def test_python_dash_m_entry_point(tmp_path, scene_files):
    _, cube, obs, _ = scene_files
    missing = tmp_path / "absent.tif"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lumaxlike",
            *map(str, invert_args(missing, obs, tmp_path / "w.tif")),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "absent.tif" in done.stderr and "Traceback" not in done.stderr


def test_worker_processes_give_the_same_maps(tmp_path, capsys, scene_files):
    _, cube, obs, dtm = scene_files
    assert (
        run(capsys, *invert_args(cube, obs, tmp_path / "one.tif", "--dtm", dtm, "--chunk", "2"))[0]
        == 0
    )
    code, err = run(
        capsys,
        *invert_args(
            cube, obs, tmp_path / "two.tif", "--dtm", dtm, "--chunk", "2", "--workers", "2"
        ),
    )
    assert code == 0, err
    for suffix in ("", "_status", "_iterations"):
        np.testing.assert_array_equal(
            read_cube(tmp_path / f"two{suffix}.tif")[0], read_cube(tmp_path / f"one{suffix}.tif")[0]
        )


def _run_command_call(module):
    """(file function imported in ``module.run``, the declaration it imports, and the
    first two arguments of its `run_command` call), read from the module's source."""
    import ast
    import inspect

    run_function = next(
        node
        for node in ast.parse(inspect.getsource(module)).body
        if isinstance(node, ast.FunctionDef) and node.name == "run"
    )
    imported = {}
    for node in ast.walk(run_function):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imported[alias.asname or alias.name] = (node.module, alias.name)
    call = next(
        node
        for node in ast.walk(run_function)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "run_command"
    )
    return imported, [argument.id for argument in call.args[:2]]


@pytest.mark.parametrize(
    "command", ["invert", "normalize", "thermal", "unmix", "fit", "sample", "parameters"]
)
def test_each_command_runs_its_declarations_front_end(command):
    """Every command hands `run_command` its operation's declaration and that
    declaration's file front end (`Operation.file_function`), imported by reference."""
    import importlib

    module = importlib.import_module(f"lumaxlike._cli.{command}")
    imported, (declaration_name, front_end_name) = _run_command_call(module)
    declaration_module, name = imported[declaration_name]
    declaration = getattr(importlib.import_module(f"lumaxlike.{declaration_module}"), name)
    assert declaration.command_name == command
    assert imported[front_end_name] == ("_files", declaration.file_function)
