"""``python -m kiel.testing serve|proxy ...``.

``serve``: see :mod:`kiel.testing.broker.cli`; ``proxy``: see :mod:`kiel.testing.faults.cli`.
"""
import argparse
import sys
from typing import Optional

from kiel.testing.broker.cli import add_serve_parser
from kiel.testing.faults.cli import add_proxy_parser


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point of ``python -m kiel.testing``."""
    parser = argparse.ArgumentParser(prog="python -m kiel.testing",
                                     description="kiel's real test parts")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add_parser in (add_serve_parser, add_proxy_parser):
        add_parser(subparsers)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
