"""``python -m lumaxlike``: the ``lumaxlike`` command line (see `lumaxlike._cli`; its exit
codes, late signals included: `lumaxlike._cli.console`)."""

import signal
import sys

if __name__ == "__main__":
    # before the imports: a SIGTERM while they run exits 143, not -15
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    from ._cli import console

    console()
