"""``python -m kiel.testing.broker serve ...`` (same as ``python -m kiel.testing``)."""
import sys

from kiel.testing.broker.cli import main

if __name__ == "__main__":
    sys.exit(main())
