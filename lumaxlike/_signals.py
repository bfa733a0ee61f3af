"""Stopping a run cleanly on SIGINT (Ctrl-C) and SIGTERM.

Python runs a signal handler in the main thread between two bytecodes, wherever that is;
an exception raised there is lost ("Exception ignored in ...") when it lands in a
garbage-collection callback or a ``__del__`` (JAX registers such callbacks). So the
handlers `stop_on_signals` *record* the signal; they raise `Interrupted`
only inside `interruptible` blocks (the block loop: start-up and imports, where an
exception in a C++ callback can abort the process, only record it); long-running code calls `raise_if_interrupted` at safe points
(between blocks, before publishing outputs), which raises again if the first exception was
lost (and Python's "Exception ignored" report of it is silenced). Code that must not be cut in half (moving outputs into place, removing temporary
files, stopping workers) runs inside `deferred`: a signal arriving there is only
recorded. Without `stop_on_signals` (the Python API) nothing here changes Python's
own handling of signals.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

__all__ = [
    "Interrupted",
    "STOP_SIGNALS",
    "deferred",
    "interruptible",
    "pending_signal",
    "raise_if_interrupted",
    "stop_on_signals",
]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Signals that stop a run: exit code 128 + number (130 for SIGINT, 143 for SIGTERM)."""


class Interrupted(BaseException):
    """A stop signal arrived. A ``BaseException``, so ``except Exception`` does not stop it.

    Attributes:
        signum: the signal's number.
    """

    def __init__(self, signum: int):
        self.signum = int(signum)
        super().__init__(f"interrupted by {signal.Signals(self.signum).name}")

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a process the signal ended."""
        return 128 + self.signum


class _State:
    installed = False
    raising = False
    received: int | None = None


_state = _State()


def _handle(signum, frame) -> None:
    if _state.received is None:
        _state.received = int(signum)
    if _state.raising:
        raise Interrupted(_state.received)


def pending_signal() -> int | None:
    """The stop signal recorded so far (its number), or None."""
    return _state.received


def raise_if_interrupted() -> None:
    """Raise `Interrupted` if a stop signal was recorded (a safe point of a run)."""
    if _state.received is not None:
        raise Interrupted(_state.received)


@contextlib.contextmanager
def interruptible():
    """Within: a stop signal raises `Interrupted` at once (when handlers are installed).

    Wrap only code where an exception may land anywhere: a loop of Python and
    exception-safe extension calls (the block loop), not imports or start-up.
    """
    raising, _state.raising = _state.raising, _state.installed
    try:
        raise_if_interrupted()
        yield
    finally:
        _state.raising = raising


@contextlib.contextmanager
def deferred():
    """Within: a stop signal is recorded, not raised (see `raise_if_interrupted`)."""
    raising, _state.raising = _state.raising, False
    try:
        yield
    finally:
        _state.raising = raising


@contextlib.contextmanager
def stop_on_signals():
    """Handle SIGINT and SIGTERM while the ``with`` block runs; restore the old handlers after.

    Within, a stop signal is recorded, raises `Interrupted` inside
    `interruptible` blocks and at `raise_if_interrupted`, and is remembered until the block ends: the yielded function returns its number, or
    None if none came.
    Only the main thread can install handlers; elsewhere this changes nothing.
    """
    if threading.current_thread() is not threading.main_thread() or _state.installed:
        yield lambda: _state.received
        return
    _state.received, _state.raising, _state.installed = None, False, True
    previous = {signum: signal.signal(signum, _handle) for signum in STOP_SIGNALS}
    previous_hook = sys.unraisablehook

    def unraisable(report):
        if not isinstance(report.exc_value, Interrupted):  # recorded; raised again later
            previous_hook(report)

    sys.unraisablehook = unraisable
    try:
        yield lambda: _state.received
    finally:
        _state.raising = False
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sys.unraisablehook = previous_hook
        _state.installed, _state.received = False, None
