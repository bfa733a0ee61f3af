"""The command line explains itself: --version, units and defaults, one example per command."""

import argparse
import re
import subprocess
import sys

import pytest

import lumaxlike
from lumaxlike._cli import build_parser, main
from lumaxlike._demo.run import _parser as demo_parser


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every parser behind ``lumaxlike [COMMAND] --help``."""
    top = build_parser()
    (commands,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return {
        "lumaxlike": top,
        "invert": commands.choices["invert"],
        "demo": demo_parser(),
        "profile": commands.choices["profile"],
    }


PARSERS = subcommand_parsers()


def test_version_prints_the_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"lumaxlike {lumaxlike.__version__}"
    done = subprocess.run(
        [sys.executable, "-m", "lumaxlike", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == f"lumaxlike {lumaxlike.__version__}"


@pytest.mark.parametrize("command", list(PARSERS))
def test_every_option_says_its_default_unless_a_flag_or_required(command):
    for action in PARSERS[command]._actions:
        if action.help == argparse.SUPPRESS or isinstance(
            action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)
        ):
            continue  # (a hidden deprecated spelling)
        is_flag = action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction)
        required = (
            action.required
            or not action.option_strings
            or "required" in (action.help or "").lower()
        )
        assert action.help, f"{command} {action.option_strings or action.dest} has no help"
        assert is_flag or required or "default" in action.help.lower(), (
            f"{command} {action.option_strings}: help does not say its default: {action.help!r}"
        )


@pytest.mark.parametrize("command", list(PARSERS))
def test_help_ends_with_an_example_and_names_only_public_api(command):
    text = PARSERS[command].format_help()
    assert text.rstrip().splitlines()[-1].strip().startswith("lumaxlike "), text[-300:]
    assert "._" not in text


@pytest.mark.parametrize("argv", [["--help"], ["invert", "--help"], ["demo", "--help"]])
def test_help_through_main_exits_0(capsys, argv):
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1].strip().startswith("lumaxlike ")


def test_solver_defaults_to_numba_and_explains_each_choice():
    (solver,) = [a for a in PARSERS["invert"]._actions if "--solver" in a.option_strings]
    assert not solver.required and "default numba" in solver.help
    assert "numba: " in solver.help and "jax: " in solver.help and "GPU" in solver.help


#: the least command line each command parses (files need not exist to parse)
MINIMAL = {
    "invert": ["invert", "c.tif", "--out", "o.tif"],
    "normalize": ["normalize", "c.tif", "--out", "o.tif"],
    "unmix": ["unmix", "c.tif", "--out", "o.tif"],
    "fit": ["fit", "c.tif", "--geometry", "g.tif", "--units", "r", "--free", "w", "--out", "o.tif"],
    "sample": [
        "sample",
        "c.tif",
        "--geometry",
        "g.tif",
        "--units",
        "r",
        "--free",
        "w",
        "--refl-sigma",
        "0.01",
        "--out",
        "o.tif",
    ],
}


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    top = build_parser()
    (commands,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


def test_help_is_consistent_across_commands():
    """One spelling of the noise option (--refl-sigma), --chunk in rows, every --out listing
    the formats the file commands write, --workers exclusive of --scheduler, and no option
    group that names an option its command lacks."""
    from lumaxlike._cli.options import UsageError

    parsers = command_parsers()
    assert set(MINIMAL) < set(parsers)
    for name, parser in parsers.items():
        options = {flag: a for a in parser._actions for flag in a.option_strings}
        visible = {flag for flag, a in options.items() if a.help != argparse.SUPPRESS}
        noise = {flag for flag in visible if "sigma" in flag}
        assert noise <= {"--refl-sigma"}, (name, noise)
        chunks = {flag: options[flag].metavar for flag in visible if "chunk" in flag}
        assert chunks in ({}, {"--chunk": "ROWS"}, {"--chunk-pixels": "PIXELS"}), (name, chunks)
        if name in MINIMAL:
            assert "--refl-sigma" in visible and chunks == {"--chunk": "ROWS"}, name
            for suffix in (".tif", ".img", ".nc", ".zarr"):
                assert suffix in options["--out"].help, (name, suffix)
            with pytest.raises(UsageError, match="not allowed with argument"):
                build_parser().parse_args(
                    [*MINIMAL[name], "--workers", "2", "--scheduler", "tcp://h:8786"]
                )
        for group in parser._action_groups:
            for flag in re.findall(r"--[a-z][a-z-]*", group.title or ""):
                assert flag in options, (name, group.title)


def test_every_solving_command_takes_the_one_declared_solver_flag():
    """``--solver`` is declared once (`lumaxlike._cli.inputs.INPUTS`): every command that
    takes it offers numba and jax; those with --params-from leave it None (the record's,
    else numba), fit defaults to numba; a solver outside the choices is refused."""
    from lumaxlike._cli.options import UsageError

    taking = {
        name: parser
        for name, parser in command_parsers().items()
        if name not in ("demo", "profile")  # (their --solver picks solvers to run: "both")
        and "--solver" in parser._option_string_actions
    }
    assert set(taking) == {"invert", "normalize", "thermal", "unmix", "fit"}
    for name, parser in taking.items():
        solver = parser._option_string_actions["--solver"]
        assert solver.choices == ("numba", "jax") and not solver.required, name
        assert solver.default == ("numba" if name == "fit" else None), name
        assert "default numba" in solver.help, name
    for name in ("invert", "unmix", "fit"):
        assert build_parser().parse_args([*MINIMAL[name], "--solver", "jax"]).solver == "jax"
        with pytest.raises(UsageError, match="invalid choice"):
            build_parser().parse_args([*MINIMAL[name], "--solver", "cuda"])


def test_the_old_sigma_spelling_still_works_with_a_warning(capsys):
    args = build_parser().parse_args([*MINIMAL["invert"], "--sigma", "0.01"])
    assert args.refl_sigma == 0.01
    assert "--sigma is deprecated; use --refl-sigma" in capsys.readouterr().err


def test_model_flags_default_to_the_models_defaults():
    """The command line's model flags are written apart from `HapkeParams` (so that ``--help``
    imports no JAX): their defaults must stay the model's own, b and c aside (the model
    takes no default for them; the command line's 0.2 and 0.5 are its choice)."""
    import dataclasses

    from lumaxlike._cli.options import HAPKE_OPTIONS, MODEL_OPTIONS, dest

    defaults = {f.name: f.default for f in dataclasses.fields(lumaxlike.HapkeParams)}
    flags = {field: default for _, field, default, _ in HAPKE_OPTIONS}
    assert set(flags) == set(defaults) - {"legendre"} - {f for _, f, _ in MODEL_OPTIONS}
    for field, default in flags.items():
        if field not in ("b", "c"):
            assert default == defaults[field], field  # roughness: 0 in degrees and radians
    parsed = build_parser().parse_args(["invert", "c.tif", "--geometry", "g.tif", "--out", "o"])
    for flag, _, _ in MODEL_OPTIONS:  # given no flag, the model's default applies
        assert getattr(parsed, dest(flag)) is None, flag
