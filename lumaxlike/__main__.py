"""``python -m lumaxlike``: the ``lumaxlike`` command line (see `lumaxlike._cli`)."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
