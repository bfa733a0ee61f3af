"""The command line explains itself: --version, units and defaults, one example per command."""

import argparse
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
        if isinstance(
            action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)
        ):
            continue
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
