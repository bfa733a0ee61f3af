"""`import lumaxlike` is light: heavy dependencies load at first use, the public names and
the xarray accessor are all there whatever the import order. (Import time is measured in
benchmarks/bench_import.py, not asserted here.)"""

import subprocess
import sys
import textwrap

import pytest

import lumaxlike

HEAVY = ("jax", "numba", "rasterio", "xarray", "dask", "matplotlib")

PUBLIC = {
    "CubeInfo",
    "CubeReader",
    "ElementwiseLevenbergMarquardt",
    "FitResult",
    "GeometryReader",
    "HapkeParams",
    "InversionResult",
    "InversionSummary",
    "OBS_BAND_NAMES",
    "ResultWriter",
    "Status",
    "amsa",
    "default_bounds",
    "direction_from_zenith_azimuth",
    "fit",
    "geometry_from_angles",
    "h_function",
    "invert",
    "invert_dataarray",
    "invert_file",
    "iter_cube_blocks",
    "normals_from_dtm",
    "read_cube",
    "to_bidirectional_reflectance",
    "write_result",
    "Provenance",
    "read_provenance",
    "demo",
    "porosity_k_from_filling_factor",
    "angles_from_geometry",
    "normal_from_slope_aspect",
    "SpectralLibrary",
    "read_spectral_library",
    "PhotometricFunction",
    "reflectance",
    "Endmembers",
    "UnmixResult",
    "unmix",
    "normalize",
    "NormalizationResult",
    "normalize_dataarray",
    "normalize_file",
    "GoniometerTable",
    "read_goniometer_table",
    "unmix_dataarray",
    "unmix_file",
    "fit_dataarray",
    "fit_file",
    "testing",
    "open_product",
    "JointFitResult",
    "sample",
    "SampleResult",
    "sample_dataarray",
    "sample_file",
    "RunOptions",
    "ProductOptions",
    "SolverOptions",
    "remove_thermal_dataarray",
    "continuum_removed",
    "band_parameters",
    "BandParameters",
    "spectral_parameters",
    "SpectralParameters",
    "SPECTRAL_PRODUCTS",
    "SpectralProduct",
    "LuceyConstants",
    "available_spectral_products",
    "spectral_parameters_dataarray",
    "spectral_parameters_file",
    "OpticalConstants",
    "optical_constants",
    "optical_constants_names",
    "slab_albedo",
    "remove_thermal",
    "ThermalResult",
    "ThermalSettings",
    "InvertSettings",
    "FitSettings",
    "SampleSettings",
    "UnmixSettings",
    "NormalizeSettings",
    "SpectralSettings",
    "remove_thermal_file",
}


def run_python(code: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def test_import_leaves_heavy_dependencies_unloaded():
    loaded = run_python(
        f"""
        import sys
        import lumaxlike
        print(",".join(name for name in {HEAVY!r} if name in sys.modules))
        """
    )
    assert loaded.strip() == ""


@pytest.mark.parametrize(
    "imports",
    [
        "import lumaxlike; import xarray",
        "import xarray; import lumaxlike",
        "import lumaxlike._xarray.invert",
    ],
)
def test_accessor_registered_whatever_the_import_order(imports):
    out = run_python(
        f"""
        {imports}
        import xarray
        from lumaxlike._xarray_accessor import HapkeAccessor
        accessor = xarray.DataArray([0.1, 0.2], dims="band").hapke
        print(type(accessor) is HapkeAccessor, callable(accessor.invert))
        """
    )
    assert out.split() == ["True", "True"]


def test_public_names_resolve():
    assert set(lumaxlike.__all__) == PUBLIC
    assert PUBLIC <= set(dir(lumaxlike))
    for name in lumaxlike.__all__:
        value = getattr(lumaxlike, name)
        assert getattr(value, "__module__", "lumaxlike").startswith("lumaxlike"), name
    from lumaxlike import HapkeParams, invert  # noqa: F401
    from lumaxlike._inverse.albedo.invert import invert as invert_itself

    assert invert is invert_itself
    assert isinstance(lumaxlike.__version__, str)
    with pytest.raises(AttributeError, match="not_a_name"):
        lumaxlike.not_a_name  # noqa: B018


def test_command_line_help_and_version_leave_heavy_dependencies_unloaded():
    """`lumaxlike --help`, `--version` and each command's `--help` build the parsers only:
    JAX, numba and the rest load when a command runs (benchmarks/bench_cli_startup.py
    measures what that saves)."""
    out = run_python(
        f"""
        import contextlib, io, sys
        from lumaxlike._cli import main
        for argv in (["--help"], ["--version"], ["invert", "--help"], ["normalize", "--help"],
                     ["fit", "--help"], ["sample", "--help"], ["unmix", "--help"],
                     ["parameters", "--help"], ["thermal", "--help"], ["profile", "--help"],
                     ["demo", "--help"]):
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                code = main(argv)
            assert code == 0 and "usage" in printed.getvalue() or "lumaxlike " in printed.getvalue(), argv
        print(",".join(name for name in {HEAVY!r} + ("numpy",) if name in sys.modules))
        """
    )
    assert out.strip() == ""
