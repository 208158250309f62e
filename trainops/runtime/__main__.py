"""``python -m trainops.runtime launch [--dry-run]``: see :mod:`trainops.runtime.cli`."""

import sys

from trainops.runtime.cli import main

if __name__ == "__main__":
    sys.exit(main())
