"""An operation's options declared once (`lumaxlike._declared_options`: `ThermalSettings`,
`InvertSettings`, `NormalizeSettings`, `FitSettings`, `SampleSettings`, `UnmixSettings`,
`SpectralSettings`): every front end takes the same names, defaults and checks, the command
line its flags (old spellings hidden), and nothing else; nothing here compiles or solves."""

import inspect
import math
from pathlib import Path

import pytest

import lumaxlike
from lumaxlike._cli import build_parser
from lumaxlike._declared_options import help_texts
from lumaxlike._inverse.options import InvertSettings
from lumaxlike._normalize.options import NormalizeSettings
from lumaxlike._thermal.options import ThermalSettings

FRONT_ENDS = ("remove_thermal", "remove_thermal_file", "remove_thermal_dataarray")


def parsed(*flags):
    args = build_parser().parse_args(["thermal", "cube.tif", "--out", "o.tif", *flags])
    return ThermalSettings.from_arguments(args)


@pytest.mark.parametrize("name", FRONT_ENDS)
def test_every_front_end_shows_every_option_at_its_declared_default(name):
    parameters = inspect.signature(getattr(lumaxlike, name)).parameters
    for option, default in ThermalSettings.defaults().items():
        assert parameters[option].kind is inspect.Parameter.KEYWORD_ONLY, (name, option)
        assert parameters[option].default == default, (name, option)
    assert "settings" in parameters


def test_keywords_and_settings_merge_and_refuse_a_conflict():
    base = ThermalSettings(method="prior", prior_sigma=0.03)
    keywords = {"window": [2.3, 2.7], "prior_reference": None, "solver": "numba"}
    merged = ThermalSettings.merged(base, keywords)
    # taken out of the keywords (the rest is the caller's), lists made tuples of floats,
    # None the default
    assert keywords == {"solver": "numba"}
    assert merged == ThermalSettings(method="prior", prior_sigma=0.03, window=(2.3, 2.7))
    with pytest.raises(ValueError, match=r"prior_sigma is given as a keyword \(0.05\)"):
        ThermalSettings.merged(base, {"prior_sigma": 0.05})
    with pytest.raises(ValueError, match="settings must be a lumaxlike.ThermalSettings"):
        ThermalSettings.merged({"method": "prior"}, {})


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(method="fit"), "method='fit' is not one of"),
        (dict(window=(2.6, 2.3)), "window must be"),
        (dict(temperature_bounds=(0.0, 500.0)), "temperature_bounds must be"),
        (dict(max_temperature_sigma=float("nan")), "max_temperature_sigma must be positive"),
        (dict(prior_sigma=float("inf")), "prior_sigma must be positive and finite"),
        (dict(min_window_bands=3), "min_window_bands must be an integer of 4 or more"),
        (dict(temperature=300.0), 'temperature is for method="given" only'),
        (dict(method="given"), 'method="given" needs temperature'),
    ],
)
def test_each_check_names_its_option(options, message):
    with pytest.raises(ValueError, match=message):
        ThermalSettings(**options)


def test_unknown_keyword_is_a_type_error_as_python_raises_it():
    with pytest.raises(TypeError, match="unexpected keyword argument 'windows'"):
        lumaxlike.remove_thermal(None, None, None, None, None, None, solar_spectrum=None, windows=1)


def test_command_line_flags_old_spellings_and_names_in_errors():
    assert parsed() == ThermalSettings()
    # the command line says "uncertainty" (only --refl-sigma says sigma); the Python
    # name's spelling is taken too, hidden
    for flags in (
        ["--max-temperature-uncertainty", "7", "--prior-uncertainty", "0.03"],
        ["--max-temperature-sigma", "7", "--prior-sigma", "0.03"],
    ):
        assert parsed(*flags) == ThermalSettings(max_temperature_sigma=7.0, prior_sigma=0.03)
    assert parsed("--temperature-bounds", "150,900").temperature_bounds == (150.0, 900.0)
    with pytest.raises(ValueError, match=r"^--temperature is for --method="):
        parsed("--temperature", "300")
    with pytest.raises(ValueError, match=r"^--max-temperature-uncertainty must be positive"):
        parsed("--max-temperature-uncertainty", "-1")


def test_help_is_the_docstring_and_an_undescribed_option_is_refused():
    texts = help_texts(ThermalSettings)
    assert set(texts) == set(ThermalSettings.declared())
    assert (
        texts["max_temperature_sigma"] == "T's 1-sigma [K] above which a pixel is NOT_CONSTRAINED"
    )

    class Undescribed(ThermalSettings):
        """No Attributes section."""

    with pytest.raises(ValueError, match="describes no option 'method'"):
        help_texts(Undescribed)


def test_record_keeps_every_option_in_its_order_as_json():
    record = ThermalSettings(window=[2.3, 2.7]).record()
    assert list(record) == list(ThermalSettings.declared())
    assert record["window"] == [2.3, 2.7] and record["temperature_bounds"] == [100.0, 1000.0]


# invert and normalize: InvertSettings, and NormalizeSettings composing it

INVERSION_FRONT_ENDS = {
    InvertSettings: ("invert", "invert_file", "invert_dataarray"),
    NormalizeSettings: ("normalize", "normalize_file", "normalize_dataarray"),
}


def command(name, *flags):
    args = build_parser().parse_args([name, "cube.tif", "--out", "o.tif", *flags])
    return args


@pytest.mark.parametrize(
    "kind, name", [(kind, name) for kind, names in INVERSION_FRONT_ENDS.items() for name in names]
)
def test_invert_and_normalize_front_ends_show_their_options_once(kind, name):
    parameters = inspect.signature(getattr(lumaxlike, name)).parameters
    for option, default in kind.defaults().items():
        assert parameters[option].kind is inspect.Parameter.KEYWORD_ONLY, (name, option)
        assert parameters[option].default == default, (name, option)
    # one name per option: the old "sigma" is no parameter of any of them
    assert "settings" in parameters and "sigma" not in parameters


def test_normalize_composes_invert_and_describes_only_its_own():
    assert list(NormalizeSettings.declared()) == [*InvertSettings.declared(), "standard"]
    texts, base = help_texts(NormalizeSettings), help_texts(InvertSettings)
    assert texts["max_iter"] == base["max_iter"] and texts["tol"] == base["tol"]
    assert "normalised reflectance" in texts["refl_sigma"]  # its own text
    assert NormalizeSettings(standard=[0.5, 0, 0.5]).standard == (0.5, 0.0, 0.5)
    assert NormalizeSettings().record()["standard"] == pytest.approx(
        [math.radians(30), 0, math.radians(30)]
    )


def test_refl_sigma_old_name_warns_and_a_conflict_is_refused():
    keywords = {"sigma": 0.01, "chunk_rows": 5}
    with pytest.warns(DeprecationWarning, match="sigma= is deprecated; use refl_sigma="):
        settings = InvertSettings.merged(None, keywords)
    assert settings.refl_sigma == 0.01 and keywords == {"chunk_rows": 5}
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(TypeError, match="got refl_sigma twice, as refl_sigma= and as sigma="),
    ):
        InvertSettings.merged(None, {"sigma": 0.01, "refl_sigma": 0.02})
    with pytest.raises(ValueError, match=r"max_iter is given as a keyword \(7\)"):
        lumaxlike.invert(
            None, None, None, None, None, settings=InvertSettings(max_iter=5), max_iter=7
        )
    with pytest.raises(ValueError, match="tol must be positive"):
        InvertSettings(tol=0.0)
    with pytest.raises(ValueError, match="max_iter must be a positive integer"):
        NormalizeSettings(max_iter=True)


def test_solver_keywords_leave_a_solver_options_max_iter_alone():
    assert InvertSettings().solver_keywords() == {"max_iter": None, "tol": None}
    assert InvertSettings(max_iter=7, tol=1e-8).solver_keywords() == {"max_iter": 7, "tol": 1e-8}


def test_invert_and_normalize_flags_from_the_declaration_and_the_record():
    args = command("invert", "--max-iter", "7", "--tol", "1e-9", "--refl-sigma", "0.01")
    assert InvertSettings.from_arguments(args) == InvertSettings(
        max_iter=7, tol=1e-9, refl_sigma=0.01
    )
    # a flag given wins over --params-from's record, which fills the others
    recorded = {"max_iter": 20, "tol": 1e-10, "refl_sigma": None}
    assert InvertSettings.from_arguments(command("invert", "--tol", "1e-8"), recorded) == (
        InvertSettings(max_iter=20, tol=1e-8)
    )
    args = command("normalize", "--standard", "30,0,30", "--refl-sigma", "0.01")
    settings = NormalizeSettings.from_arguments(args)
    assert settings.standard == pytest.approx((math.radians(30), 0.0, math.radians(30)))
    assert settings.refl_sigma == 0.01
    with pytest.raises(ValueError, match=r"^--standard phase .* is impossible"):
        NormalizeSettings.from_arguments(command("normalize", "--standard", "30,0,90"))
    normalize = build_parser()._subparsers._group_actions[0].choices["normalize"]
    flags = [a.option_strings for a in normalize._actions if "--standard" in a.option_strings]
    assert flags == [["--standard"]]  # added once, beside invert's copied flags


FILE_FUNCTIONS = ("invert_file", "normalize_file", "fit_file", "unmix_file", "sample_file")


@pytest.mark.parametrize("name", FILE_FUNCTIONS + ("remove_thermal_file",))
def test_every_file_function_names_the_noise_refl_sigma(name):
    """One name for the cubes' noise in every front end: ``refl_sigma``, as the array and
    xarray functions and ``--refl-sigma`` have it."""
    assert "refl_sigma" in inspect.signature(getattr(lumaxlike, name)).parameters


REQUIRED = {
    "fit_file": dict(geometry=[], params=None, free=("w",), units="r"),
    "unmix_file": dict(endmembers=None, params=None, solver="numba", units="r"),
    "remove_thermal_file": dict(params=None, units="r", solver="numba"),
}


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_file_functions_take_sigma_with_a_warning_and_refuse_both(name, tmp_path):
    """The old ``sigma=`` is still taken, with a DeprecationWarning; given beside
    ``refl_sigma=`` it is refused before anything else is looked at."""
    function = getattr(lumaxlike, name)
    with pytest.warns(DeprecationWarning, match="sigma= is deprecated; use refl_sigma="):
        with pytest.raises(TypeError, match="refl_sigma twice"):
            function("in.tif", tmp_path / "out.tif", sigma=0.01, refl_sigma=0.02, **REQUIRED[name])


# fit: FitSettings

FIT_FRONT_ENDS = ("fit", "fit_file", "fit_dataarray")


@pytest.mark.parametrize("name", FIT_FRONT_ENDS)
def test_fit_front_ends_show_every_option_once_at_its_default(name):
    from lumaxlike._inverse.fit.options import FitSettings

    parameters = inspect.signature(getattr(lumaxlike, name)).parameters
    for option, default in FitSettings.defaults().items():
        assert parameters[option].kind is inspect.Parameter.KEYWORD_ONLY, (name, option)
        assert parameters[option].default == default, (name, option)
    assert "settings" in parameters and "sigma" not in parameters
    code = getattr(lumaxlike, name).__code__  # the parameters written: the options carry the rest
    assert code.co_argcount + code.co_kwonlyargcount + 1 <= 16, name


def test_fit_options_merge_refuse_and_parse_their_flags():
    from lumaxlike._inverse.fit.options import FitSettings

    with pytest.raises(ValueError, match=r"max_iter is given as a keyword \(7\)"):
        lumaxlike.fit(None, None, None, None, None, settings=FitSettings(max_iter=5), max_iter=7)
    with pytest.raises(TypeError, match="unexpected keyword argument 'maxiter'"):
        lumaxlike.fit(None, None, None, None, None, maxiter=7)
    with pytest.raises(ValueError, match="tol must be positive"):
        FitSettings(tol=-1.0)
    assert FitSettings(max_iter=7).solver_keywords() == {"max_iter": 7, "tol": None}
    assert FitSettings().solver_keywords() == {"max_iter": None, "tol": None}
    argv = ["fit", "a.tif", "b.tif", "--geometry", "g.tif", "h.tif", "--units", "r"]
    argv += ["--free", "w,b,c", "--out", "o.tif", "--shared", "c", "--starts", "3"]
    args = build_parser().parse_args([*argv, "--max-iter", "9", "--sigma", "0.01"])
    assert FitSettings.from_arguments(args) == FitSettings(
        max_iter=9, refl_sigma=0.01, shared=("c",), starts=3
    )


def test_fit_file_and_dataarray_refuse_profile_which_has_no_map(tmp_path):
    import numpy as np
    import xarray as xr

    params = lumaxlike.HapkeParams(b=0.2, c=0.5)
    call = dict(geometry=["g.tif"], params=params, free=("w", "hs"), units="r")
    with pytest.raises(ValueError, match="profile is lumaxlike.fit's only"):
        lumaxlike.fit_file(["c.tif"], tmp_path / "o.tif", shared=("hs",), profile=("hs",), **call)
    refl = xr.DataArray(np.zeros((1, 2, 3)), dims=("y", "band", "observation"))
    with pytest.raises(ValueError, match="profile is lumaxlike.fit's only"):
        lumaxlike.fit_dataarray(refl, {}, params, units="r", profile=("hs",))


# sample: SampleSettings, the problems' options FitSettings' declarations

SAMPLE_FRONT_ENDS = ("sample", "sample_file", "sample_dataarray")
SAMPLE_ARGV = ["sample", "c.tif", "d.tif", "--geometry", "g.tif", "h.tif", "--units", "r"]
SAMPLE_ARGV += ["--free", "w,b", "--refl-sigma", "0.01", "--out"]


@pytest.mark.parametrize("name", SAMPLE_FRONT_ENDS)
def test_sample_front_ends_show_every_option_once_at_its_default(name):
    from lumaxlike._sample.options import SampleSettings

    parameters = inspect.signature(getattr(lumaxlike, name)).parameters
    for option, default in SampleSettings.defaults().items():
        assert parameters[option].kind is inspect.Parameter.KEYWORD_ONLY, (name, option)
        assert parameters[option].default == default, (name, option)
    assert "settings" in parameters and "sigma" not in parameters
    code = getattr(lumaxlike, name).__code__  # the parameters written: the options carry the rest
    assert code.co_argcount + code.co_kwonlyargcount + 1 <= 13, name


def test_sample_shares_fits_declarations_of_the_problems_options():
    """One declaration of each option fit and sample share: its default, check and flag
    are FitSettings'; sample's command line takes one noise per band, and requires it."""
    from lumaxlike._inverse.fit.options import FitSettings
    from lumaxlike._sample.options import SampleSettings

    fit, sample = FitSettings.declared(), SampleSettings.declared()
    for name in ("observation_limits", "min_observations", "shared", "prior"):
        assert sample[name] is fit[name], name
        assert SampleSettings.defaults()[name] == FitSettings.defaults()[name], name
    assert sample["refl_sigma"].check is fit["refl_sigma"].check
    assert sample["refl_sigma"].required and not fit["refl_sigma"].required
    assert set(help_texts(SampleSettings)) == set(sample)


def test_sample_file_takes_no_product_options():
    parameters = inspect.signature(lumaxlike.sample_file).parameters
    assert not {"product", "solar_distance", "correction_undone", "solver"} & set(parameters)
    with pytest.raises(TypeError, match="unexpected keyword argument 'solar_distance'"):
        lumaxlike.sample_file(
            ["c.tif"],
            "o.tif",
            geometry=["g.tif"],
            params=None,
            free=("w",),
            units="r",
            solar_distance=1.0,
        )


def _stopped(monkeypatch, module, name):
    """Replace ``module.name`` by a function that records its arguments and stops the call."""
    import importlib

    calls = []

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        calls.append((args, kwargs))
        raise Stop

    monkeypatch.setattr(importlib.import_module(module), name, stop)
    return calls, Stop


def test_sample_keywords_and_settings_give_the_same_options(monkeypatch, tmp_path):
    """Each front end hands `sample` the same options, and records the same, whether they
    come by name or as ``settings=``; nothing is sampled."""
    import numpy as np
    import xarray as xr

    from lumaxlike._sample.options import SampleSettings

    options = dict(refl_sigma=0.01, num_samples=200, min_ess=50, seed=3, shared=("b",))
    settings = SampleSettings(**options)
    params = lumaxlike.HapkeParams(b=0.2, c=0.5)
    routes = ({"settings": settings}, options)
    # the array function: the checked model and its run (seed, chunk_size, return_samples)
    calls, stop = _stopped(monkeypatch, "lumaxlike._sample.sample", "_sample_model")
    refl, up = np.full((1, 2, 4), 0.05), np.tile([0.0, 0.0, 1.0], (4, 1))
    for route in routes:
        with pytest.raises(stop):
            lumaxlike.sample(refl, up, up, up, params, free=("w", "b"), **route)
    (model, *_, run), (other, *_, other_run) = (args for args, _ in calls)
    assert model.shared == other.shared == ("b",) and model.chains == other.chains
    assert model.chains.num_samples == 200 and run == other_run == (3, None, False)
    # the file function: the request, and the sampling's record (lumaxlike_sample_*)
    from lumaxlike._files.sample import _sample_settings

    calls, stop = _stopped(monkeypatch, "lumaxlike._files.sample", "_run_sample")
    call = dict(geometry=["g.tif"], params=params, free=("w", "b"), units="r")
    for route in routes:
        with pytest.raises(stop):
            lumaxlike.sample_file(["c.tif"], tmp_path / "o.tif", **call, **route)
    (request, *_), (other, *_) = (args for args, _ in calls)
    assert request == other and request.options(0.01) == other.options(0.01)
    record = _sample_settings(request, 0.01, tmp_path / "o.tif")
    assert record == _sample_settings(other, 0.01, tmp_path / "o.tif")
    assert record["num_samples"] == 200 and record["seed"] == 3 and record["shared"] == ["b"]
    # the xarray function: the options each chunk's `sample` takes
    calls, stop = _stopped(monkeypatch, "lumaxlike._xarray.sample", "check_sample_options")
    data = xr.DataArray(np.full((1, 2, 3), 0.05), dims=("x", "band", "observation"))
    vectors = {
        role: xr.DataArray(np.full((1, 3), angle), dims=("x", "observation"))
        for role, angle in (("incidence", 30.0), ("emission", 0.0), ("phase", 30.0))
    }
    for route in routes:
        with pytest.raises(stop):
            lumaxlike.sample_dataarray(data, vectors, params, ("w", "b"), units="r", **route)
    (first, _), (second, _) = calls
    assert first[1] == second[1] and first[1]["num_samples"] == 200


def test_sample_record_of_a_default_call_is_the_previous_one(monkeypatch, tmp_path):
    """The sampling's record of a call at the defaults, key for key as before the options
    were declared (``lumaxlike_sample_*`` of the file outputs, ``lumaxlike_sample_options``
    of the xarray ones)."""
    import json

    import numpy as np

    from lumaxlike._files.sample import _sample_settings
    from lumaxlike._sample.options import SampleSettings
    from lumaxlike._xarray.sample import _options_record

    calls, stop = _stopped(monkeypatch, "lumaxlike._files.sample", "_run_sample")
    out = tmp_path / "o.tif"
    with pytest.raises(stop):
        lumaxlike.sample_file(
            ["c.tif"],
            out,
            geometry=["g.tif"],
            free=("w",),
            units="r",
            params=lumaxlike.HapkeParams(b=0.2, c=0.5),
            refl_sigma=0.01,
        )
    record = _sample_settings(calls[0][0][0], 0.01, out)
    previous = {
        "cubes": [str(Path("c.tif").absolute())],
        "geometries": [str(Path("g.tif").absolute())],
        "free": ["w"],
        "shared": [],
        "prior": {},
        "refl_sigma": 0.01,
        "num_samples": 1000,
        "num_chains": 4,
        "num_warmup": 300,
        "integration_steps": 12,
        "seed": 0,
        "min_ess": 400.0,
        "max_rhat": 1.01,
        "observation_limits_deg": {},
        "min_observations": None,
        "median_maps": {"w": str(out.absolute())},
    }
    assert list(record) == list(previous)
    for name, value in previous.items():
        assert record[name] == value and type(record[name]) is type(value), name
    assert json.loads(_options_record({}, SampleSettings(refl_sigma=0.01), np.asarray(0.01))) == {
        "seed": 0
    }
    # the keywords as the call gave them, in its order (as before); settings= alike
    given = {"min_ess": 50, "num_samples": 200, "chunk_size": 4}
    settings = SampleSettings(min_ess=50, num_samples=200, seed=4)
    text = '{"refl_sigma": 0.5, "min_ess": 50, "num_samples": 200, "chunk_size": 4, "seed": 4}'
    assert _options_record(given, settings, 0.5) == text
    assert json.loads(_options_record({"chunk_size": 4}, settings, 0.5)) == json.loads(text)


def test_sample_refuses_a_bad_option_naming_it_and_the_command_line_its_flag(tmp_path, capsys):
    from lumaxlike._cli import main
    from lumaxlike._sample.options import SampleSettings

    with pytest.raises(ValueError, match="max_rhat must exceed 1, got 1.0"):
        lumaxlike.sample(None, None, None, None, None, max_rhat=1.0)
    with pytest.raises(ValueError, match="num_samples must be a positive integer, got 0"):
        lumaxlike.sample_file(
            ["c.tif"],
            "o.tif",
            geometry=["g.tif"],
            params=None,
            free=("w",),
            units="r",
            num_samples=0,
        )
    with pytest.raises(ValueError, match="min_ess must be positive, got 0"):
        lumaxlike.sample_dataarray(None, None, None, units="r", min_ess=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_sample'"):
        lumaxlike.sample(None, None, None, None, None, num_sample=10)
    with pytest.raises(ValueError, match=r"num_chains is given as a keyword \(3\)"):
        lumaxlike.sample(
            None, None, None, None, None, settings=SampleSettings(num_chains=5), num_chains=3
        )
    out = tmp_path / "o.tif"  # refused before any file is read: none exists
    assert main([*SAMPLE_ARGV, out, "--max-rhat", "1"]) == 2
    assert "lumaxlike sample: error: --max-rhat must exceed 1, got 1.0" in capsys.readouterr().err
    assert main([*SAMPLE_ARGV, out, "--integration-steps", "0"]) == 2
    assert "argument --integration-steps: expected a positive integer" in capsys.readouterr().err
    assert main([a for a in SAMPLE_ARGV if a not in ("--refl-sigma", "0.01")] + [out]) == 2
    assert "required: --refl-sigma" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_sample_flags_from_the_declaration():
    from lumaxlike._sample.options import SampleSettings

    flags = ["--num-samples", "200", "--num-chains", "3", "--seed", "5", "--min-ess", "50"]
    flags += ["--max-rhat", "1.05", "--integration-steps", "8", "--shared", "b"]
    args = build_parser().parse_args([*SAMPLE_ARGV, "o.tif", *flags])
    assert SampleSettings.from_arguments(args) == SampleSettings(
        refl_sigma=0.01,
        num_samples=200,
        num_chains=3,
        seed=5,
        min_ess=50.0,
        max_rhat=1.05,
        integration_steps=8,
        shared=("b",),
    )
    args = build_parser().parse_args([*SAMPLE_ARGV, "o.tif", "--refl-sigma", "0.01,0.02"])
    assert SampleSettings.from_arguments(args) == SampleSettings(refl_sigma=[0.01, 0.02])
    assert SampleSettings.from_arguments(build_parser().parse_args([*SAMPLE_ARGV, "o.tif"])) == (
        SampleSettings(refl_sigma=0.01)
    )


# unmix: UnmixSettings

UNMIX_FRONT_ENDS = ("unmix", "unmix_file", "unmix_dataarray")
PARAMS = lumaxlike.HapkeParams(b=0.2, c=0.4)


def unmix_endmembers():
    """Three endmembers on two bands (made, never solved)."""
    return lumaxlike.Endmembers(
        names=("a", "b", "c"),
        albedo=[[0.2, 0.3], [0.5, 0.6], [0.8, 0.7]],
        density=(3.3, 3.0, 2.7),
        grain_size=(50.0, 70.0, 30.0),
    )


@pytest.mark.parametrize("name", UNMIX_FRONT_ENDS)
def test_unmix_front_ends_show_every_option_once_at_its_default(name):
    from lumaxlike import UnmixSettings

    parameters = inspect.signature(getattr(lumaxlike, name)).parameters
    for option, default in UnmixSettings.defaults().items():
        assert parameters[option].kind is inspect.Parameter.KEYWORD_ONLY, (name, option)
        assert parameters[option].default == default, (name, option)
    assert "settings" in parameters and "sigma" not in parameters
    code = getattr(lumaxlike, name).__code__  # the parameters written: the options carry the rest
    assert code.co_argcount + code.co_kwonlyargcount + 1 <= 15, name


NOT_DEFAULT = dict(route="two_step", sum_to_one=False, max_iter=7, tol=1e-9, refl_sigma=0.01)


class Reached(Exception):
    """Raised by a stand-in once a front end has handed its options on."""


def handed_on(monkeypatch, name, **options):
    """What front end ``name`` hands on for ``options`` (keywords and ``settings=``): the
    array function's checked problem and route, the file function's recorded call, solver
    options and maps, the xarray function's checked call."""
    import importlib

    seen = {}
    if name == "unmix":
        module = importlib.import_module("lumaxlike._unmix.unmix")

        def problem(refl, geometry, endmembers, solver, settings, wavelengths):
            seen["settings"] = settings

        def chunks(problem, endmembers, params, solver, route, sum_to_one):
            seen.update(route=route, sum_to_one=sum_to_one)
            raise Reached

        monkeypatch.setattr(module, "_check_problem", problem)
        monkeypatch.setattr(module, "_unmix_chunks", chunks)
        params = PARAMS
        call = ([[0.1, 0.1]], [0, 0, 1], [0, 0, 1], [0, 0, 1], unmix_endmembers(), params)
        call += ("numba",)
    elif name == "unmix_file":
        module = importlib.import_module("lumaxlike._files.unmix")

        def run_on_cube(operation, inputs, **kwargs):
            seen.update(sigma=inputs.sigma, call=kwargs["call"], solver=kwargs["solver"])
            seen.update(fields=kwargs["fields"])
            raise Reached

        monkeypatch.setattr(module, "run_on_cube", run_on_cube)
        call = ("in.tif", "out.tif")
        options = dict(endmembers=unmix_endmembers(), params=PARAMS, **options)
        options.update(solver="numba", units="r")
    else:
        module = importlib.import_module("lumaxlike._xarray.unmix")

        def setup(call):
            seen.update((key, call[key]) for key in (*NOT_DEFAULT, "free", "starts"))
            seen["solver"] = call["settings"].solver_keywords()
            raise Reached

        monkeypatch.setattr(module, "_setup", setup)
        call = (None, None, unmix_endmembers(), PARAMS, "numba")
        options = dict(units="r", **options)
    with pytest.raises(Reached):
        getattr(lumaxlike, name)(*call, **options)
    return seen


@pytest.mark.parametrize("name", UNMIX_FRONT_ENDS)
def test_unmix_keywords_and_settings_hand_on_the_same_options(name, monkeypatch):
    """By keyword, as one ``settings=``, or split between the two: the same options reach
    the unmixing (and the file function's record), and they are not the defaults'."""
    from lumaxlike import UnmixSettings

    by_keyword = handed_on(monkeypatch, name, **NOT_DEFAULT)
    assert by_keyword == handed_on(monkeypatch, name, settings=UnmixSettings(**NOT_DEFAULT))
    split = UnmixSettings(route="two_step", sum_to_one=False)
    assert by_keyword == handed_on(monkeypatch, name, settings=split, max_iter=7, tol=1e-9,
                                   refl_sigma=0.01)  # fmt: skip
    assert by_keyword != handed_on(monkeypatch, name)


def test_unmix_file_takes_the_run_options_and_sigma_as_keywords_with_a_warning(monkeypatch):
    seen = handed_on(monkeypatch, "unmix_file", max_iter=7)
    assert seen["solver"] == lumaxlike.SolverOptions("numba", max_iter=7)
    assert seen["call"]["route"] == "one_step" and seen["call"]["refl_sigma"] is None
    with pytest.warns(DeprecationWarning, match="sigma= is deprecated; use refl_sigma="):
        assert handed_on(monkeypatch, "unmix_file", sigma=0.01)["sigma"] == 0.01
    with pytest.raises(TypeError, match="unexpected keyword argument 'chunk_row'"):
        handed_on(monkeypatch, "unmix_file", chunk_row=5)
    refused = pytest.raises(ValueError, match=r"chunk_rows is given as a keyword \(5\)")
    with refused, pytest.warns(DeprecationWarning, match="unmix_file: the keywords chunk_rows"):
        handed_on(monkeypatch, "unmix_file", chunk_rows=5, run=lumaxlike.RunOptions(chunk_rows=4))


@pytest.mark.parametrize("name", UNMIX_FRONT_ENDS)
@pytest.mark.parametrize(
    "options, message",
    [
        (dict(route="three_step"), "route='three_step' is not one of 'one_step', 'two_step'"),
        (dict(sum_to_one="yes"), "sum_to_one must be True or False"),
        (dict(max_iter=0), "max_iter must be a positive integer"),
        (dict(tol=-1.0), r"tol must be positive and finite \[-\]"),
        (dict(free=("grain_size", "colour")), "free must name distinct parameters among"),
        (dict(starts=0), "starts must be a positive int"),
    ],
)
def test_unmix_front_ends_refuse_a_bad_option_naming_it(name, options, message):
    """Refused before anything is read: the other arguments are not even looked at."""
    arguments = (None,) * (6 if name == "unmix" else 2 if name == "unmix_file" else 4)
    if name != "unmix":
        options = {**options, **REQUIRED.get(name, {"units": "r"})}
    with pytest.raises(ValueError, match=message):
        getattr(lumaxlike, name)(*arguments, **options)


def test_unmix_flags_old_spellings_and_names_in_errors():
    from lumaxlike import UnmixSettings

    def unmix_command(*flags):
        return command("unmix", "--units", "r", *flags)

    assert UnmixSettings.from_arguments(unmix_command()) == UnmixSettings()
    flags = ["--route", "two_step", "--no-sum-to-one", "--max-iter", "7", "--tol", "1e-9"]
    flags += ["--sigma", "0.01", "--free", "grain_size, npfe", "--starts", "3"]
    assert UnmixSettings.from_arguments(unmix_command(*flags)) == UnmixSettings(
        **NOT_DEFAULT, free=("grain_size", "npfe"), starts=3
    )
    assert UnmixSettings.from_arguments(unmix_command("--sum-to-one")).sum_to_one is True
    # a flag given wins over --params-from's record, which fills the others
    recorded = {"route": "two_step", "sum_to_one": False, "max_iter": 30, "refl_sigma": 0.5}
    assert UnmixSettings.from_arguments(unmix_command("--max-iter", "9"), recorded) == (
        UnmixSettings(route="two_step", sum_to_one=False, max_iter=9, refl_sigma=0.5)
    )
    with pytest.raises(ValueError, match=r"^--free must name distinct parameters"):
        UnmixSettings.from_arguments(unmix_command("--free", "grain_size,colour"))
    from lumaxlike._cli.options import UsageError

    with pytest.raises(UsageError, match="--no-sum-to-one: not allowed with argument --sum-to"):
        unmix_command("--sum-to-one", "--no-sum-to-one")
    with pytest.raises(UsageError, match="argument --route: invalid choice: 'three_step'"):
        unmix_command("--route", "three_step")


def test_unmix_command_refuses_a_bad_free_naming_the_flag(tmp_path, capsys):
    from lumaxlike._cli import main

    argv = ["unmix", str(tmp_path / "cube.tif"), "--geometry", str(tmp_path / "obs.tif")]
    argv += ["--units", "r", "--optical-constants", "olivine:40", "--free", "grain_size,iron"]
    assert main([*argv, "--out", str(tmp_path / "o.tif")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lumaxlike unmix: error: --free must name distinct parameters"), err


# spectral parameters: SpectralSettings

SPECTRAL_FRONT_ENDS = (
    "spectral_parameters",
    "spectral_parameters_file",
    "spectral_parameters_dataarray",
)
SPECTRAL_ARGV = ["parameters", "c.tif", "--out", "o.tif", "--products", "FeO"]


def spectral_command(*flags):
    return build_parser().parse_args([*SPECTRAL_ARGV, *flags])


@pytest.mark.parametrize("name", SPECTRAL_FRONT_ENDS)
def test_spectral_front_ends_show_every_option_once_at_its_default(name):
    from lumaxlike import SpectralSettings

    assert SpectralSettings.defaults() == {"quantity": None, "tolerance": 0.01, "lucey": None}
    parameters = inspect.signature(getattr(lumaxlike, name)).parameters
    for option, default in SpectralSettings.defaults().items():
        assert parameters[option].kind is inspect.Parameter.KEYWORD_ONLY, (name, option)
        assert parameters[option].default == default, (name, option)
    assert "settings" in parameters


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(), r"quantity is required: what the spectra hold, one of \['w', "),
        (dict(quantity="albedo"), "quantity='albedo' is not one of 'w', 'normalized'"),
        (dict(quantity="w", tolerance=0.0), r"tolerance must be positive \[um\], got 0.0"),
        (dict(quantity="w", tolerance=float("nan")), r"tolerance must be positive \[um\]"),
        (dict(quantity="w", tolerance="0.01"), r"tolerance must be positive \[um\], got '0.01'"),
        (dict(quantity="w", lucey={"fe_slope": 10}), "lucey must be a lumaxlike.LuceyConstants"),
    ],
)
def test_spectral_checks_name_their_option(options, message):
    from lumaxlike import SpectralSettings

    with pytest.raises(ValueError, match=message):
        SpectralSettings(**options)


SPECTRAL_ARGUMENTS = {
    "spectral_parameters": ((None, None, "FeO"), {}),
    "spectral_parameters_file": (("c.tif", "o.tif"), {"products": "FeO"}),
    "spectral_parameters_dataarray": ((None, "FeO"), {}),
}


@pytest.mark.parametrize("name", SPECTRAL_FRONT_ENDS)
def test_spectral_front_ends_refuse_no_quantity_and_an_unknown_keyword(name):
    """Refused before the data are looked at (before: a TypeError, the missing keyword)."""
    arguments, keywords = SPECTRAL_ARGUMENTS[name]
    function = getattr(lumaxlike, name)
    with pytest.raises(ValueError, match="quantity is required"):
        function(*arguments, **keywords)
    with pytest.raises(TypeError, match="unexpected keyword argument 'tolerance_nm'"):
        function(*arguments, **keywords, quantity="w", tolerance_nm=5)


def test_spectral_record_keeps_every_option_as_json():
    from lumaxlike import LuceyConstants, SpectralSettings

    record = SpectralSettings(quantity="w").record()
    assert record == {"quantity": "w", "tolerance": 0.01, "lucey": None}
    lucey = SpectralSettings(quantity="r", lucey=LuceyConstants(fe_slope=10.0)).record()["lucey"]
    assert lucey["fe_slope"] == 10.0 and lucey["fe_intercept"] == -7.565


def test_spectral_flags_and_the_old_tolerance_in_nm(capsys):
    """``--tolerance`` in um, as Python and the record have it (and as every other
    wavelength flag); the old ``--tolerance-nm`` still taken, converted, hidden, warned of
    with the value to give instead."""
    from lumaxlike import SpectralSettings
    from lumaxlike._cli.options import UsageError

    assert SpectralSettings.from_arguments(spectral_command("--quantity", "w")) == (
        SpectralSettings(quantity="w")
    )
    args = spectral_command("--quantity", "radf", "--tolerance", "0.005")
    assert SpectralSettings.from_arguments(args) == SpectralSettings("radf", 0.005)
    assert capsys.readouterr().err == ""
    args = spectral_command("--quantity", "w", "--tolerance-nm", "5")
    assert SpectralSettings.from_arguments(args).tolerance == 0.005  # um
    assert "--tolerance-nm is deprecated; use --tolerance 0.005" in capsys.readouterr().err
    # the old default, 10 nm, is the default to the bit (as the command divided by 1000)
    args = spectral_command("--quantity", "w", "--tolerance-nm", "10")
    assert SpectralSettings.from_arguments(args) == SpectralSettings(quantity="w")
    with pytest.raises(UsageError, match="--tolerance-nm: expected a positive number"):
        spectral_command("--quantity", "w", "--tolerance-nm", "-5")
    with pytest.raises(UsageError, match="required: --quantity"):
        spectral_command()
    with pytest.raises(UsageError, match="argument --quantity: invalid choice: 'albedo'"):
        spectral_command("--quantity", "albedo")
    parameters = build_parser()._subparsers._group_actions[0].choices["parameters"]
    shown = parameters.format_help()
    assert "--tolerance UM" in shown and "--tolerance-nm" not in shown


def test_spectral_keywords_and_settings_give_the_same_products_and_record(monkeypatch):
    """By name, as ``settings=`` or split: the same maps, the same recorded call; a
    conflict refused, naming the option."""
    import numpy as np
    import xarray as xr

    from lumaxlike import LuceyConstants, SpectralSettings

    x = np.array([0.415, 0.750, 0.950, 1.0])
    spectra = np.array([[0.10, 0.12, 0.11, 0.13], [0.2, 0.21, 0.19, 0.22]])
    lucey = LuceyConstants(fe_slope=10.0)
    options = dict(quantity="normalized", tolerance=0.02, lucey=lucey)
    routes = (options, {"settings": SpectralSettings(**options)})
    routes += ({"settings": SpectralSettings("normalized", 0.02), "lucey": lucey},)
    names = ["FeO", "OMAT"]
    results = [lumaxlike.spectral_parameters(spectra, x, names, **route) for route in routes]
    default = lumaxlike.spectral_parameters(spectra, x, names, quantity="normalized")
    for result in results:
        assert result.quantity == "normalized" and result.constants == {"lucey": lucey}
        for name in names:
            np.testing.assert_array_equal(result[name], results[0][name])
    assert not np.array_equal(results[0]["FeO"], default["FeO"])  # lucey reached it
    with pytest.raises(ValueError, match=r"tolerance is given as a keyword \(0.03\)"):
        lumaxlike.spectral_parameters(spectra, x, names, settings=routes[1]["settings"],
                                      tolerance=0.03)  # fmt: skip
    data = xr.DataArray(spectra, dims=("y", "band"), coords={"wavelength": ("band", x)})
    made = [data.hapke.spectral_parameters(names, **route) for route in routes]
    for dataset in made:
        assert dataset.attrs == made[0].attrs and "tolerance=0.02" in dataset.attrs["history"]
        for name in names:
            np.testing.assert_array_equal(dataset[name].values, results[0][name])
    calls, stop = _stopped(monkeypatch, "lumaxlike._files.spectral", "run_on_cube")
    for route in routes:
        with pytest.raises(stop):
            lumaxlike.spectral_parameters_file("c.tif", "o.tif", products=names, **route)
    recorded = [kwargs["call"] for _, kwargs in calls]
    assert recorded[0] == recorded[1] == recorded[2]
    assert recorded[0] == {"products": names, **SpectralSettings(**options).record(), "units": None}
