"""kiel's version, in a module of its own so any layer may read it.

The protocol names it in ApiVersions v3 (KIP-511) and must not import the
``kiel`` package, which lists every layer; pyproject.toml reads it from here.
"""

__version__ = "1.0.0.dev0"
