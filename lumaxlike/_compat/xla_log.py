"""Keep XLA's "Very slow compile?" banner off stderr, and nothing else.

XLA (C++) logs a banner when compiling a program takes long (its slow-operation alarm):
an ``E... slow_operation_alarm.cc:...]`` line, a row of asterisks, ``[Compiling module
...] Very slow compile? If you want to file a bug, run with envvar XLA_FLAGS=... and
attach the results.``, and asterisks again. The sampler's programs are slow to compile
by nature, so the banner is noise to a user of ``lumaxlike sample``. It is written by
C++ straight to file descriptor 2, out of reach of Python's `logging` and `warnings`,
and the only switch (``TF_CPP_MIN_LOG_LEVEL``) is global and silences every other error
too. `without_slow_compile_banner` instead routes descriptor 2 through a pipe while it
is active and passes every line on unchanged except the banner's.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator

__all__ = ["BANNER_TEXT", "without_slow_compile_banner", "BannerFilter"]

#: the text that marks the banner
BANNER_TEXT = b"Very slow compile?"
_ALARM = re.compile(rb"[EWIF]\d{4} [\d:.]+\s+\d+ slow_operation_alarm")  # its log prefix
#: how long the end of a run waits for the last of its stderr to be passed on [s]
JOIN_SECONDS = 10.0


class BannerFilter:
    """Lines in, the same lines out but the banner's (`feed` each chunk, then `close`).

    The banner is the alarm's log line, its ``Very slow compile?`` line and the lines of
    asterisks around them; a lone line of asterisks elsewhere passes.
    """

    def __init__(self, write) -> None:
        self._write = write
        self._pending = b""
        # the alarm's line and asterisks, until we know (with what preceded the alarm's
        # log prefix on its line)
        self._held: list[tuple[bytes, bytes]] = []
        self._after_banner = False  # the next line of asterisks closes the banner

    def feed(self, data: bytes) -> None:
        """Take a chunk of the stream; pass on the complete lines that are not the banner's."""
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._line(line + b"\n")
        if b"\r" in self._pending and not _ALARM.search(self._pending):
            self._release()  # a progress bar redrawing its line: pass it on now
            self._write(self._pending)
            self._pending = b""

    def close(self) -> None:
        """Pass on what is still held (an unfinished line, an alarm that was not one)."""
        if self._pending:
            self._line(self._pending)
            self._pending = b""
        self._release()

    def _line(self, line: bytes) -> None:
        text = line.strip()
        if BANNER_TEXT in text:  # the banner: its alarm line and asterisks go with it
            for _, before_alarm in self._held:
                self._write(before_alarm)  # e.g. a progress bar's text the alarm followed
            self._held.clear()
            self._after_banner = True
            return
        if self._after_banner and _is_asterisks(text):
            self._after_banner = False  # the closing asterisks
            return
        self._after_banner = False
        alarm = _ALARM.search(line)
        if alarm is not None or _is_asterisks(text):
            self._held.append((line, line[: alarm.start()] if alarm else b""))
            return
        self._release()
        self._write(line)

    def _release(self) -> None:
        for line, _ in self._held:
            self._write(line)
        self._held.clear()


def _is_asterisks(text: bytes) -> bool:
    return bool(text) and set(text) == {ord("*")}


@contextlib.contextmanager
def without_slow_compile_banner() -> Iterator[None]:
    """While active, stderr (descriptor 2, so C++ and Python alike) goes through a
    `BannerFilter`; restored on exit, everything else written in the meantime passed on.

    Does nothing where descriptor 2 cannot be redirected (no descriptor 2, or a
    ``sys.stderr`` that is not it, e.g. captured by a test harness: XLA still writes to
    descriptor 2, which is then filtered all the same)."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr descriptor: nothing to filter
        yield
        return
    read_end, write_end = os.pipe()
    flush = getattr(sys.stderr, "flush", None)
    if flush is not None:
        flush()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward(data: bytes) -> None:
        os.write(saved, data)

    def pump() -> None:
        banner = BannerFilter(forward)
        while chunk := os.read(read_end, 65536):
            banner.feed(chunk)
        banner.close()

    thread = threading.Thread(target=pump, name="lumaxlike-xla-log", daemon=True)
    thread.start()
    try:
        yield
    finally:
        if flush is not None:
            flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the pump reads to its end
        thread.join(timeout=JOIN_SECONDS)
        if not thread.is_alive():  # else a child holds a copy of the write end: leave it
            os.close(read_end)
            os.close(saved)
