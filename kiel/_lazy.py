"""One PEP 562 ``__getattr__`` for kiel's facades that import on first use.

``kiel``, ``kiel.clients`` and ``kiel.consumer`` re-export names whose modules
are expensive or optional to import (``GroupedConsumer`` needs kazoo): they
bind their module-level ``__getattr__`` to :func:`lazy_exports`, so
``import kiel`` or ``import kiel.consumer`` imports neither kazoo nor
Tornado until a name that needs it is used.
"""
import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(module: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``exports[name]`` on first use.

    Args:
        module: the facade's ``__name__``.
        exports: name -> the module that defines it.

    Returns:
        the function to assign to the facade's ``__getattr__``; the value it
        finds is stored in the facade, so each name is looked up once.
    """

    def __getattr__(name: str) -> Any:
        source = exports.get(name)
        if source is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(sys.modules[module], name, value)
        return value

    return __getattr__
