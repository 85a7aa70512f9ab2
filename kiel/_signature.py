"""Give one function another's parameters: written once, read by mypy, ``help()`` and Sphinx.

Public functions that take the same arguments declare them once: the
others are written ``(*args, **kwargs)``, decorated with
:func:`parameters_of`, and pass their arguments on to a function with the
declared signature, which checks and binds them as Python does. Where it is
used:

- ``Producer.enqueue`` takes ``Producer.produce``'s parameters (and passes
  them to ``Producer._prepare``);
- ``decode_message_set`` and ``decode_record_batches`` take
  :func:`kiel.protocol.log_format.decode_arguments`' (and bind them by
  calling it).
"""
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from typing_extensions import ParamSpec

    _P = ParamSpec("_P")

_R = TypeVar("_R")

__all__ = ["parameters_of"]


def parameters_of(
    source: "Callable[_P, Any]",
) -> "Callable[[Callable[..., _R]], Callable[_P, _R]]":
    """Decorate a function so that it shows and type-checks with ``source``'s parameters.

    The decorated function keeps its own body and return type; mypy sees
    ``source``'s parameters (a ``ParamSpec``), and ``inspect.signature`` (so
    ``help()`` and Sphinx) sees them through ``__signature__``. Checking the
    arguments at run time stays the decorated function's job: it passes
    them on to a function with the same signature.

    Args:
        source: the function whose parameters are given.

    Returns:
        the decorator.
    """

    def give(target: Callable[..., _R]) -> "Callable[_P, _R]":
        returns = inspect.signature(target).return_annotation
        target.__signature__ = inspect.signature(source).replace(  # type: ignore[attr-defined]
            return_annotation=returns
        )
        return target

    return give
