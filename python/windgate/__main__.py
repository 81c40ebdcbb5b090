"""``python -m windgate ...``: the command line of :mod:`windgate.cli`."""

import sys

from windgate.cli import main

if __name__ == "__main__":
    sys.exit(main())
