"""An operation's options declared once (`lumaxlike._declared_options`, `ThermalSettings`):
every front end takes the same names, defaults and checks, the command line its flags
(old spellings hidden), and nothing else; no JAX or numba is needed here."""

import inspect

import pytest

import lumaxlike
from lumaxlike._cli import build_parser
from lumaxlike._declared_options import help_texts
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
