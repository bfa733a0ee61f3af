"""Every input file a resumable run reads is in its journal's fingerprint: a resume after
one of them changed is refused, naming the file. On a mission product: the solar
spectrum, and the files a product path stands for (its ENVI header in any case, its PDS3
label)."""

import os

import pytest

import lumaxlike
from lumaxlike._run import journal as journal_module
from lumaxlike._run.journal import ResumeRefusedError

from .mission_products import M3_WAVELENGTHS, write_m3_solar_table
from .test_mission_products import M3_TABLE_IRRADIANCE, PARAMS, solar_csv
from .test_product_front_ends import _l1b, _mixture

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
# unmix lists its inputs as invert does (and compiles its own solver: slow to add here)
COMMANDS = ("invert", "normalize", "fit")


class Killed(Exception):
    """Stands for SIGKILL: raised once the journal holds a block, its clean-up skipped."""


def interrupt(monkeypatch, run):
    """Run ``run()`` until its journal holds one block, then stop it as a killed process
    would stop: the journal is left behind."""
    record = journal_module.Journal.record

    def record_then_die(self, rows, block):
        record(self, rows, block)
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(journal_module.Journal, "record", record_then_die)
        patch.setattr(journal_module.Journal, "remove", lambda self: None)
        with pytest.raises(Killed):
            run()


def command_run(command, folder, out, spectrum):
    """``run(**overrides)``: ``command``'s file function on M3 L1B radiance converted with
    ``spectrum``, one row per block; and the product's files (two products for fit)."""
    _, w = _mixture()
    paths = _l1b(folder / "a", w, 5)
    kwargs = {"units": "radiance", "params": PARAMS, "solver": "numba"}
    if command == "fit":
        other = _l1b(folder / "b", w, 6)
        cubes, geometry = [paths["rdn"], other["rdn"]], [paths["obs"], other["obs"]]
        kwargs["free"] = ("w",)
        function = lambda **more: lumaxlike.fit_file(cubes, out, geometry=geometry, **more)  # noqa: E731
    else:
        file_function = {"invert": lumaxlike.invert_file, "normalize": lumaxlike.normalize_file}[
            command
        ]
        function = lambda **more: file_function(  # noqa: E731
            paths["rdn"], out, geometry=paths["obs"], **more
        )

    def call(resume=False, solar_spectrum=spectrum):
        run = lumaxlike.RunOptions(chunk_rows=1, resume=resume)
        product = lumaxlike.ProductOptions(solar_spectrum=solar_spectrum)
        return function(**kwargs, run=run, product=product)

    return call, paths


def touch(path):
    """A later modification time, the content unchanged."""
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


@pytest.mark.parametrize("command", COMMANDS)
def test_a_changed_solar_spectrum_refuses_the_resume(tmp_path, monkeypatch, command):
    # a csv spectrum, and an edit that keeps its values: only the file's record says so
    spectrum = solar_csv(tmp_path / "solar.csv")
    out = tmp_path / "out.tif"
    run, _ = command_run(command, tmp_path, out, spectrum)
    interrupt(monkeypatch, run)
    touch(spectrum)
    with pytest.raises(ResumeRefusedError) as refused:
        run(resume=True)
    message = str(refused.value)
    assert message.startswith("cannot resume out.tif: ")
    assert f"the input {spectrum.resolve()} changed (modification time)" in message
    assert "the settings changed" not in message  # the spectrum's values are the same
    assert not out.exists()

    # another spectrum file: the old one gone, the new one new, and the option changed
    other = solar_csv(tmp_path / "other.csv")
    with pytest.raises(ResumeRefusedError) as refused:
        run(resume=True, solar_spectrum=other)
    message = str(refused.value)
    assert f"the input {spectrum.resolve()} is gone" in message
    assert f"the input {other.resolve()} is new" in message
    assert "the settings changed: product" in message


@pytest.mark.parametrize("command", ["invert", "fit"])  # one cube; a stack
def test_the_files_a_product_path_stands_for_are_fingerprinted(tmp_path, monkeypatch, command):
    # the cube is given as its *_RDN.IMG: its *_RDN.HDR (upper case) and the *_L1B.LBL
    # beside it (the label's SOLAR_DISTANCE converts the radiance) are read too, as is the
    # OBS raster's *_OBS.HDR
    table = write_m3_solar_table(tmp_path, M3_WAVELENGTHS, M3_TABLE_IRRADIANCE)
    out = tmp_path / "out.tif"
    run, paths = command_run(command, tmp_path, out, table)
    interrupt(monkeypatch, run)
    for name in ("rdn_hdr", "obs_hdr", "lbl"):
        stat = os.stat(paths[name])
        touch(paths[name])
        with pytest.raises(ResumeRefusedError) as refused:
            run(resume=True)
        assert f"the input {paths[name].resolve()} changed (modification time)" in str(
            refused.value
        ), name
        os.utime(paths[name], ns=(stat.st_atime_ns, stat.st_mtime_ns))
    summary = run(resume=True)  # all as it was: resumed
    assert summary.resumed == "1 of 3 blocks from an interrupted run"


def test_a_gdal_sidecar_is_fingerprinted(tmp_path, monkeypatch):
    # GDAL reads NAME.aux.xml beside a raster (nodata, scale, offset): a resume after it
    # changed is refused, naming it
    table = write_m3_solar_table(tmp_path, M3_WAVELENGTHS, M3_TABLE_IRRADIANCE)
    out = tmp_path / "out.tif"
    run, paths = command_run("invert", tmp_path, out, table)
    sidecar = paths["rdn"].with_name(paths["rdn"].name + ".aux.xml")
    sidecar.write_text("<PAMDataset>\n</PAMDataset>\n")
    interrupt(monkeypatch, run)
    touch(sidecar)
    with pytest.raises(ResumeRefusedError) as refused:
        run(resume=True)
    assert f"the input {sidecar.resolve()} changed (modification time)" in str(refused.value)
    assert not out.exists()
