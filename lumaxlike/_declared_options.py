"""An operation's options declared once, and every front end's reading of them.

An operation's options are one small frozen dataclass (``ThermalSettings``), each field
declared with `option`: its default, unit, check, command-line parsing and record; its
help text is the class docstring's "Attributes:" line for it (`help_texts`), where the
API reference reads it. `DeclaredOptions`, its base, derives the rest, so that no front end spells an
option out:

- the value checked and normalised when the object is made (`DeclaredOptions.__post_init__`);
- the run record (`DeclaredOptions.record`);
- the Python keywords of the array, file and xarray functions, which take the object
  (``settings=``) or its options by name (`DeclaredOptions.merged`), and their
  signatures as `inspect.signature` shows them (`takes_options`);
- the command line's flags (`DeclaredOptions.add_arguments`, the flag ``--name-in-dashes``
  unless declared otherwise, old spellings kept as hidden aliases) and the object from the parsed flags
  (`DeclaredOptions.from_arguments`).

As optimistix's solvers are small classes whose options are fields. This module imports
nothing heavy: the command line builds its parsers from the declarations.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import math
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Real
from typing import Any, TypeVar

__all__ = [
    "DeprecatedAlias",
    "DeclaredOptions",
    "Option",
    "help_texts",
    "option",
    "option_of",
    "pair_text",
    "positive",
    "positive_float",
    "positive_int",
    "refuse_unknown",
    "renamed_keyword",
    "to_pair",
    "takes_options",
]

Declared = TypeVar("Declared", bound="DeclaredOptions")


@dataclass(frozen=True)
class Option:
    """One option of an operation (the field of its options class that holds it). Its
    help text is the options class's docstring's line for it (`help_texts`).

    Attributes:
        unit: its unit in words (``"K"``, ``"um"``), or None.
        convert: the value normalised (``float``; a pair as a tuple of two floats), so
            that the record and the operation read one type whatever a front end gave.
        check: ``check(name, value)``, raising ValueError naming the option; None: none.
        choices: the values it takes, when a few names.
        parse: the command line's text to a value (``float``, `pair_text`); ``bool``: a
            switch, ``--name`` and ``--no-name``; None: not on the command line.
        metavar: the flag's value in the help (``"K"``).
        flag: the flag where the command line spells it otherwise than the name in
            dashes (its rule: no visible flag but ``--refl-sigma`` says "sigma",
            ``--max-temperature-uncertainty``); the name's spelling is then taken too,
            hidden.
        aliases: old spellings of the flag, still taken (with a warning on stderr naming
            the flag to use) and hidden from the help; ``(flag, parse)`` for one that reads
            its text otherwise, e.g. in other units, converted (``--tolerance-nm``: nm to
            um; its warning gives the value in the flag's units).
        old_names: old Python keywords of the option, still taken by every front end with
            a DeprecationWarning naming the new one (``sigma`` for ``refl_sigma``).
        shown: the default as the help states it, where a default of None stands for a
            value the operation picks (``"50"``, ``"1e-10 (float64), 1e-5 (float32)"``).
        required: the command line requires the flag (its help says so); the Python
            front ends check it themselves (its default is None).
        record: the value as the run's record keeps it (JSON-able); None: as it is,
            a tuple as a list.
    """

    unit: str | None = None
    convert: Callable[[Any], Any] | None = None
    check: Callable[[str, Any], None] | None = None
    choices: tuple | None = None
    parse: Callable[[str], Any] | None = None
    metavar: str | None = None
    flag: str | None = None
    aliases: tuple[str | tuple[str, Callable[[str], Any]], ...] = ()
    old_names: tuple[str, ...] = ()
    shown: str | None = None
    required: bool = False
    record: Callable[[Any], Any] | None = None


def option(default, **declared) -> Any:
    """A field of a `DeclaredOptions` class: its default and its `Option` (the other
    keywords)."""
    return dataclasses.field(default=default, metadata={"option": Option(**declared)})


def option_of(kind: type, name: str, **changes) -> Any:
    """A field of a `DeclaredOptions` class that is option ``name`` of ``kind``, another
    operation's, as ``kind`` declares it (its default, check, flag), ``changes`` (`Option`'s
    fields) aside: an option that operations share, declared once. Its help text is the
    new class's own."""
    field = {f.name: f for f in dataclasses.fields(kind)}[name]
    declared = field.metadata["option"]
    if changes:
        declared = dataclasses.replace(declared, **changes)
    return dataclasses.field(default=field.default, metadata={"option": declared})


def help_texts(kind: type) -> dict[str, str]:
    """``{name: text}`` of the "Attributes:" section of ``kind``'s docstring (Google
    style: ``name: text``, continued on lines indented further), each text on one line,
    its backticks and last full stop dropped: an option's help, written once where the
    API reference (griffe, statically) and ``help()`` read it too. An options class that
    composes another (a subclass) describes its own options, and those whose text it
    changes, in its own section; the others' are its base's.

    Raises:
        ValueError: an option of ``kind`` that no section describes (under ``python
            -OO``, which drops docstrings, every text is empty instead).
    """
    names = [f.name for f in dataclasses.fields(kind)]
    if sys.flags.optimize >= 2:  # python -OO drops docstrings: the flags keep their defaults
        return dict.fromkeys(names, "")
    texts = _attribute_texts(kind.__doc__)
    for base in kind.__mro__[1:] if texts else ():  # composed: the base's texts
        for name, text in _attribute_texts(base.__dict__.get("__doc__")).items():
            texts.setdefault(name, text)
    missing = [name for name in names if name not in texts]
    if missing:
        raise ValueError(f"{kind.__name__}'s docstring describes no option {missing[0]!r}")
    return {k: v.replace("`", "").rstrip(".") for k, v in texts.items() if k in names}


def _attribute_texts(doc: str | None) -> dict[str, str]:
    """``{name: text}`` of a docstring's "Attributes:" section."""
    section = re.search(r"^Attributes:\n((?:[ \t]+\S.*\n?)+)", inspect.cleandoc(doc or ""), re.M)
    texts: dict[str, str] = {}
    name = None
    for line in section.group(1).splitlines() if section else ():
        entry = re.match(r"^ {4}(\w+): (.*)", line)
        if entry:
            name, text = entry.groups()
            texts[name] = text
        elif name is not None:
            texts[name] += " " + line.strip()
    return texts


def format_value(value) -> str:
    """A value as the help writes it: ``2.3,2.65`` for a pair, ``none`` for None."""
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return ",".join(format_value(v) for v in value) if value else "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def flag_of(name: str) -> str:
    """The command line's flag of an option (``--max-temperature-sigma``)."""
    return "--" + name.replace("_", "-")


class DeclaredOptions:
    """The base of an operation's options class (a frozen dataclass whose fields are
    declared with `option`); see the module's docstring."""

    @classmethod
    def declared(cls) -> dict[str, Option]:
        """``{name: Option}`` of every option, in their order."""
        return {f.name: f.metadata["option"] for f in dataclasses.fields(cls)}  # type: ignore[arg-type]

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """``{name: default}`` of every option."""
        return {f.name: f.default for f in dataclasses.fields(cls)}  # type: ignore[arg-type]

    def __post_init__(self):
        for name, declared in self.declared().items():
            value = getattr(self, name)
            if value is not None and declared.convert is not None:
                value = declared.convert(value)
                object.__setattr__(self, name, value)
            if value is not None and declared.choices is not None and value not in declared.choices:
                choices = ", ".join(map(repr, declared.choices))
                raise ValueError(f"{name}={value!r} is not one of {choices}")
            if value is not None and declared.check is not None:
                declared.check(name, value)
        self.check_together()

    def check_together(self) -> None:
        """The checks of options against one another (none here; a subclass's)."""

    def record(self) -> dict:
        """The options as the run's record keeps them, in their order."""
        recorded = {}
        for name, declared in self.declared().items():
            value = getattr(self, name)
            if declared.record is not None:
                value = declared.record(value)
            elif isinstance(value, tuple):
                value = [list(v) if isinstance(v, tuple) else v for v in value]
            recorded[name] = value
        return recorded

    @classmethod
    def merged(
        cls: type[Declared], settings, keywords: dict, argument: str = "settings"
    ) -> Declared:
        """``settings`` (an instance, or None for the defaults) with the options among
        ``keywords`` (taken out of it; None means the default; an old name, `Option.old_names`,
        taken with a DeprecationWarning), refusing one given both ways differently.

        Raises:
            ValueError: ``settings`` is not an instance, or an option is given as a
                keyword and in ``settings`` with different values (naming both).
        """
        if settings is not None and not isinstance(settings, cls):
            raise ValueError(
                f"{argument} must be a lumaxlike.{cls.__name__}, got {type(settings).__name__}"
            )
        _take_old_names(cls, keywords)
        given = {
            name: value
            for name in cls.declared()
            if name in keywords and (value := keywords.pop(name)) is not None
        }
        if settings is None:
            return cls(**given)
        defaults = cls.defaults()
        for name, value in given.items():
            current = getattr(settings, name)
            if not _same(current, defaults[name]) and not _same(current, value):
                raise ValueError(
                    f"{name} is given as a keyword ({value!r}) and in {argument}= "
                    f"({current!r}): give it once"
                )
        return dataclasses.replace(settings, **given)  # type: ignore[type-var]

    def changed(self) -> dict[str, Any]:
        """``{name: value}`` of the options not at their defaults."""
        defaults = self.defaults()
        return {
            name: getattr(self, name)
            for name in defaults
            if not _same(getattr(self, name), defaults[name])
        }

    @classmethod
    def add_arguments(cls, group, recorded: str = "", names=None) -> None:
        """The command line's flags of the options that have one (`Option.parse`),
        added to an argparse parser or group: ``--name-in-dashes`` (default None: the
        declared default, which the help states, followed by ``recorded``, e.g. "; with
        --params-from: the recorded value"), the name's spelling hidden where the flag
        differs, old spellings (`Option.aliases`) hidden and warned of; ``names``: those
        options only (None: all; a command that copies another's flags adds its own)."""
        defaults, texts = cls.defaults(), help_texts(cls)
        for name, declared in cls.declared().items():
            if declared.parse is None or (names is not None and name not in names):
                continue
            flag = declared.flag or flag_of(name)
            shown = declared.shown or format_value(defaults[name])
            if declared.parse is bool:
                _add_switch(group, name, flag, f"{texts[name]} (default {shown}{recorded})")
                continue
            common = dict(dest=name, type=declared.parse, choices=declared.choices)
            stated = "required" if declared.required else f"default {shown}{recorded}"
            group.add_argument(
                flag,
                default=None,
                metavar=declared.metavar,
                required=declared.required,
                help=f"{texts[name]} ({stated})",
                **common,
            )
            _add_hidden(group, name, declared, flag, common)

    @classmethod
    def from_arguments(cls: type[Declared], args, recorded: Mapping | None = None) -> Declared:
        """The options of parsed command-line ``args`` (`add_arguments`), those not given
        from ``recorded`` (``{name: value}``, an earlier run's record) where it holds
        them; a bad value's message names its flag."""
        given = {name: getattr(args, name, None) for name in cls.declared()}
        for name, value in (recorded or {}).items():
            if given.get(name, value) is None:
                given[name] = value
        try:
            return cls(**{k: v for k, v in given.items() if v is not None})
        except ValueError as error:
            text = str(error)
            for name, declared in cls.declared().items():
                flag = declared.flag or flag_of(name)
                text = re.sub(rf"(?<![\w-]){name}\b", flag, text)
            raise ValueError(text) from None

    @classmethod
    def keyword_parameters(cls) -> list[inspect.Parameter]:
        """The options as keyword-only parameters, for a front end's signature."""
        return [
            inspect.Parameter(
                f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type
            )
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        ]


def _add_hidden(group, name: str, declared: Option, flag: str, common: dict) -> None:
    """An option's hidden spellings: the name's where ``flag`` differs (taken silently),
    its old ones (`Option.aliases`: warned of, each read by its own parse if it has one)."""
    hidden: dict[str, tuple[type | None, Callable[[str], Any] | None]] = {}
    for alias in declared.aliases:
        spelling, parse = alias if isinstance(alias, tuple) else (alias, None)
        hidden[spelling] = (DeprecatedAlias, parse)
    if declared.flag:
        hidden[flag_of(name)] = (None, None)
    for spelling, (action, parse) in hidden.items():
        taken = common if parse is None else {**common, "type": parse}
        deprecated = {} if action is None else dict(action=action, new=flag, converted=bool(parse))
        group.add_argument(
            spelling, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **taken, **deprecated
        )


def _add_switch(group, name: str, flag: str, help: str) -> None:
    """A boolean option's flags, one of them: ``flag`` (True) and ``--no-...`` (False)."""
    pair = group.add_mutually_exclusive_group()
    switch = dict(dest=name, action="store_const", default=None)
    pair.add_argument(flag, const=True, help=help, **switch)
    pair.add_argument("--no-" + flag[2:], const=False, help=f"the opposite of {flag}", **switch)


def takes_options(options: type[DeclaredOptions], more: Mapping[str, Any] | None = None):
    """A front end whose ``**keywords`` are the options of ``options`` (and those of
    ``more``, ``{name: default}``, such as a file function's run keywords), shown so by
    `inspect.signature` (``help()``, IPython, IDEs): each a keyword-only parameter in the
    place of ``**keywords``, at its default."""

    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function)
        kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        extra = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
            for name, default in (more or {}).items()
        ]
        parameters = kept + options.keyword_parameters() + extra
        setattr(function, "__signature__", signature.replace(parameters=parameters))  # noqa: B010
        return function

    return decorate


def renamed_keyword(function: str, old: str, old_value: Any, new: str, new_value: Any) -> Any:
    """The value of keyword ``new``, or the one given under its deprecated name ``old``
    (a DeprecationWarning naming ``new``), for a front end without a declaration of its
    options; a TypeError where both are given."""
    if old_value is None:
        return new_value
    warnings.warn(
        f"{function}: {old}= is deprecated; use {new}= (the same in every front end)",
        DeprecationWarning,
        stacklevel=3,
    )
    if new_value is not None:
        raise TypeError(f"{function}() got {new} twice, as {new}= and as {old}=")
    return old_value


def refuse_unknown(function: str, keywords: Mapping, accepted=()) -> None:
    """TypeError, as Python raises it, for a keyword of ``keywords`` not in ``accepted``."""
    for name in keywords:
        if name not in accepted:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")


def _take_old_names(kind: type[DeclaredOptions], keywords: dict) -> None:
    """``keywords`` with each old name of an option (`Option.old_names`) renamed to it,
    with a DeprecationWarning; a TypeError where both are given."""
    for name, declared in kind.declared().items():
        for old in declared.old_names:
            if old not in keywords:
                continue
            warnings.warn(
                f"{old}= is deprecated; use {name}= (the same in every front end)",
                DeprecationWarning,
                stacklevel=4,
            )
            value = keywords.pop(old)
            if keywords.get(name) is not None and value is not None:
                raise TypeError(f"got {name} twice, as {name}= and as {old}=")
            if value is not None:
                keywords[name] = value


class DeprecatedAlias(argparse.Action):
    """An old spelling of a flag, hidden from ``--help``: sets the new flag's ``dest``
    and says on stderr which spelling to use (``converted``: with the value in its units,
    for an old spelling in other units)."""

    def __init__(self, option_strings, dest, new: str = "", converted: bool = False, **kwargs):
        self.new = new
        self.converted = converted
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        use = f"{self.new} {format_value(values)}" if self.converted else self.new
        print(f"lumaxlike: warning: {option_string} is deprecated; use {use}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def positive_int(text: str) -> int:
    """An argparse type: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite, positive number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays: compare by identity
        return a is b


def to_pair(value) -> tuple[float, float]:
    """``(low, high)`` as a tuple of two floats (from a list, ints, NumPy scalars)."""
    low, high = value
    return float(low), float(high)


def increasing_pair(unit: str, positive_ends: bool = False) -> Callable[[str, Any], None]:
    """The check of a pair (shortest, longest) or (lowest, highest) in ``unit``: finite,
    first < second (and first > 0 where ``positive_ends``)."""
    words = "(lowest, highest)" if unit == "K" else "(shortest, longest)"

    def check(name: str, value) -> None:
        low, high = value
        if not (math.isfinite(low) and math.isfinite(high) and low < high) or (
            positive_ends and not low > 0
        ):
            condition = "0 < lowest < highest" if positive_ends else "first < second"
            raise ValueError(f"{name} must be {words} [{unit}], {condition}, got {value!r}")

    return check


def positive(unit: str, finite: bool = True) -> Callable[[str, Any], None]:
    """The check of a positive number in ``unit``: finite, or (``finite=False``) up to
    infinity (never NaN)."""
    words = "positive and finite" if finite else "positive"

    def check(name: str, value) -> None:
        if not (isinstance(value, Real) and float(value) > 0) or (
            finite and not math.isfinite(value)
        ):
            raise ValueError(f"{name} must be {words} [{unit}], got {value!r}")

    return check


def pair_text(text: str) -> tuple[float, float]:
    """The command line's ``A,B`` as two floats (argparse's error otherwise)."""
    parts = text.split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        return float(parts[0]), float(parts[1])
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected two numbers A,B, got {text!r}") from None
