"""The call a file command records in its outputs' provenance (``lumaxlike_command``)."""

from __future__ import annotations

from .._provenance import OptionsCall, python_call

__all__ = ["parallel_call", "recorded_command"]


def parallel_call(workers, scheduler) -> dict:
    """``workers``/``scheduler`` when not the defaults (the maps do not depend on them;
    the record says where the run ran)."""
    return {
        name: value
        for name, value, default in (("workers", workers, 1), ("scheduler", scheduler, None))
        if value != default
    }


def recorded_command(
    command, function: str, *args, workers=1, scheduler=None, product=None, **kwargs
) -> str:
    """``command`` when given (the command line), else the Python call
    ``lumaxlike.<function>(*args, **kwargs)``, with ``run=lumaxlike.RunOptions(...)``
    (``workers``/``scheduler``) and ``product=lumaxlike.ProductOptions(...)`` (a
    `ProductOptions`' fields) where they are not the defaults."""
    if command:
        return command
    options = {
        "run": ("RunOptions", parallel_call(workers, scheduler)),
        "product": ("ProductOptions", {} if product is None else product.call()),
    }
    return python_call(
        function,
        *args,
        **kwargs,
        **{
            argument: OptionsCall(kind, fields)
            for argument, (kind, fields) in options.items()
            if fields
        },
    )
