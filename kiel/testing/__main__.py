"""``python -m kiel.testing serve ...``: see :mod:`kiel.testing.broker.cli`."""
import sys

from kiel.testing.broker.cli import main

if __name__ == "__main__":
    sys.exit(main())
