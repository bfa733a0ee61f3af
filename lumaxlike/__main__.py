"""``python -m lumaxlike``: the ``lumaxlike`` command line (see :mod:`lumaxlike._cli`).

A SIGTERM or SIGINT outside the command's own handlers (during start-up, or after the
run has published its outputs and restored them) ends the process with exit code 128 +
the signal's number (143, 130), as a shell reports a stopped command, never by the
signal itself (which a parent sees as -15 or -2). A signal that lands after publication
leaves the outputs complete: the exit code is then 0 (the command reports it) or 143 /
130, never negative.
"""

import signal
import sys


def _stop(signum, frame):
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop)  # SIGINT: Python's KeyboardInterrupt, caught below
    try:
        from ._cli import main

        code = main()
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    sys.exit(code)
