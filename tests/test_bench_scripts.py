"""The benchmark scripts leave the results stored in the repository alone unless asked.

The figures in benchmarks/results/ are the ones the docs quote; a run to try a change must
not replace them by accident. (What the benchmarks measure is not asserted anywhere.)
"""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_bench(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_import_writes_a_temporary_report_unless_saved(tmp_path, monkeypatch, capsys):
    bench = load_bench("bench_import")
    stored = bench.RESULTS / "import.json"
    before = stored.read_bytes()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    report = bench.main(["--repeat", "1"])
    assert report.parent == tmp_path / "tmp" and f"report: {report}" in capsys.readouterr().out
    assert json.loads(report.read_text())["runs_s"][0] > 0
    assert stored.read_bytes() == before  # the stored results are untouched

    assert bench.main(["--repeat", "1", "--out", str(tmp_path / "x.json")]) == tmp_path / "x.json"
    monkeypatch.setattr(bench, "RESULTS", tmp_path / "results")
    assert bench.main(["--repeat", "1", "--save"]) == tmp_path / "results" / "import.json"
    assert (tmp_path / "results" / "import.json").is_file()
    with pytest.raises(SystemExit):  # one destination at a time
        bench.main(["--save", "--out", str(tmp_path / "y.json")])
    assert stored.read_bytes() == before


def test_bench_spectral_runs_small_and_writes_where_told(tmp_path):
    bench = load_bench("bench_spectral")
    assert len(bench.M3_BANDS_NM) == 86  # M3's 85 global-mode bands and one at 420 nm
    report = bench.main(
        ["--side", "4", "--rows", "3", "--repeat", "1", "--out", str(tmp_path / "s.json")]
    )
    result = json.loads(report.read_text())
    assert result["shape"] == [4, 4, 86] and result["products_s"] > 0
    assert {"BDI1000", "BDI2000", "FeO", "TiO2", "OMAT", "BAR"} <= set(result["products"])


@pytest.mark.slow  # compiles the thermal fit's numba kernel
def test_bench_thermal_runs_small_and_writes_where_told(tmp_path):
    bench = load_bench("bench_thermal")
    assert len(bench.M3_BANDS_NM) == 85  # M3's global-mode bands
    out = tmp_path / "t.json"
    report = bench.main(["--side", "3", "--repeat", "1", "--solvers", "numba", "--out", str(out)])
    result = json.loads(report.read_text())
    assert report == out and result["shape"] == [3, 3, 85]
    assert set(result["solvers"]) == {"numba"} and result["solvers"]["numba"]["thermal_s"] > 0


@pytest.mark.slow  # compiles the optical unmix kernels (numba)
def test_bench_unmix_optical_runs_small_and_writes_where_told(tmp_path):
    bench = load_bench("bench_unmix_optical")
    out = tmp_path / "o.json"
    report = bench.main(
        [
            "--side",
            "2",
            "--repeat",
            "1",
            "--starts",
            "2",
            "--solvers",
            "numba",
            "--threads",
            "1",
            "--out",
            str(out),
        ]
    )
    result = json.loads(report.read_text())
    assert result["shape"] == [2, 2, 64] and len(result["endmembers"]) == 4
    run = result["runs"]["numba_1_threads"]  # numba's runs are named by their threads
    assert {"fixed", "free", "free_starts_2"} <= set(run) and run["ratio_free"] > 0


@pytest.mark.slow  # two JAX processes per row
def test_bench_accelerator_runs_quick_on_the_cpu_only_when_allowed(tmp_path):
    """The parent refuses a CPU without --allow-cpu (exit 2, nothing written); with it,
    a quick row runs in two processes (the second's compile from the persistent cache)
    and the report goes where told, with the row's rates, accuracy and both compiles."""
    import subprocess
    import sys

    import jax

    script = ROOT / "benchmarks" / "bench_accelerator.py"
    out = tmp_path / "a.json"
    refused = subprocess.run(
        [sys.executable, str(script), "--quick", "--rows", "forward", "--json", str(out)],
        capture_output=True,
        text=True,
    )
    if jax.default_backend() == "cpu":  # (on an accelerator the parent runs the rows)
        assert refused.returncode == 2 and "--allow-cpu" in refused.stderr
        assert not out.exists()
    options = ["--allow-cpu", "--quick", "--repeat", "1", "--rows", "forward,invert_f32"]
    done = subprocess.run(
        [sys.executable, str(script), *options, "--json", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["device"]["platform"] == "cpu" and set(report["rows"]) == {
        "forward",
        "invert_f32",
    }
    # the code that ran, named by its files (a copied tree's git HEAD can be stale)
    bench = load_bench("bench_accelerator")
    assert report["package_digest"] == bench.package_digest() is not None
    for row in report["rows"].values():
        assert row["problems_per_s"] > 0 and row["device_resident"]["problems_per_s"] > 0
        assert row["second_process"]["first_call_s"] > 0
    invert = report["rows"]["invert_f32"]
    assert invert["accuracy"]["within_1e-5_fraction"] > 0.9  # float32 against float64
    assert report["rows"]["forward"]["accuracy"]["max_relative_error"] < 1e-4  # float32


def test_bench_accelerator_merges_runs_of_one_device_only(tmp_path):
    """Rows measured in several runs (a device command has a time limit) join into one
    report; reports of different devices are refused."""
    bench = load_bench("bench_accelerator")
    paths = []
    for name, kind in (("forward", "TPU v5 lite"), ("fit", "TPU v5 lite"), ("x", "H100")):
        paths.append(tmp_path / f"{name}.json")
        report = {"device": {"device_kind": kind}, "rows": {name: {"problems_per_s": 1.0}}}
        paths[-1].write_text(json.dumps(report))
    out = tmp_path / "merged.json"
    assert bench.main(["--merge", *map(str, paths[:2]), "--json", str(out)]) == 0
    assert set(json.loads(out.read_text())["rows"]) == {"forward", "fit"}
    assert bench.main(["--merge", *map(str, paths), "--json", str(tmp_path / "no.json")]) == 2
    assert not (tmp_path / "no.json").exists()


def test_bench_accelerator_digest_names_files_and_contents():
    """`package_digest`'s hash changes with a file's contents or its name, not with the
    order the files are listed in."""
    bench = load_bench("bench_accelerator")
    files = {"a.py": b"x = 1\n", "b/c.py": b"y = 2\n"}
    assert bench._digest(files) == bench._digest(dict(reversed(files.items())))
    assert bench._digest(files) != bench._digest({**files, "a.py": b"x = 2\n"})
    assert bench._digest(files) != bench._digest({"a2.py": b"x = 1\n", "b/c.py": b"y = 2\n"})


def test_bench_accelerator_sizes_take_overrides_by_row():
    """``--size ROW=AxB`` replaces one row's size (a shorter run on a device whose time
    is scarce); an unknown row or an empty value is refused."""
    bench = load_bench("bench_accelerator")
    sizes = bench.row_sizes(False, ["sample=64x8", "unmix=256"])
    assert sizes["sample"] == (64, 8) and sizes["unmix"] == 256
    assert sizes["invert"] == bench.FULL["invert"]
    for bad in ("samples=64x8", "sample="):
        with pytest.raises(SystemExit, match="--size"):
            bench.row_sizes(False, [bad])
