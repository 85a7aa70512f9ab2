"""``python -m kiel.cli``: the ``kiel`` command."""

import sys

from kiel.cli import main

sys.exit(main())
