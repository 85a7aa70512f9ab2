"""Typed checks for the clients' options: one place that says what a
number, an int, a string or a flag option must be.

Every client checks its options when it is built, so a bad one fails at
construction with a :class:`~kiel.exc.ConfigError` naming it rather than
later inside the I/O (``linger=nan`` once made every batch wait for ever:
``nan`` compares false with everything, so range checks written as
``value < 0`` let it through). Hence these checks are written so that
only a value that *passes* is accepted: NaN and infinity fail them, and a
bool is not a number (``True`` is an ``int`` to Python, never a timeout
to kiel).
"""

import math
import numbers
from collections.abc import Callable
from typing import Any, Optional, TypeVar

from kiel.exc import ConfigError

__all__ = ["flag", "integer", "optional", "real", "text"]

T = TypeVar("T")


def real(name: str, value: Any, *, at_least: Optional[float] = None,
         above: Optional[float] = None, most: Optional[float] = None,
         unit: str = "seconds") -> float:
    """A finite real number (not a bool) within the bounds given.

    Args:
        name: the option's keyword (for the message).
        value: what was given.
        at_least: the smallest value allowed.
        above: the value must be greater than this.
        most: the largest value allowed.
        unit: what the number counts, for the message (``"seconds"``, kiel's
            unit of time, or ``"a number"``).

    Returns:
        ``value`` as a float.

    Raises:
        ConfigError: not a number, NaN, infinite, or out of bounds.
    """
    number = math.nan
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int past the largest float: not finite either
            pass
    # Each comparison must hold: NaN (and anything not a number) fails them all.
    ok = (math.isfinite(number)
          and (at_least is None or number >= at_least)
          and (above is None or number > above)
          and (most is None or number <= most))
    if not ok:
        raise ConfigError(f"{name} must be {unit} {_bounds(at_least, above, most)}, "
                          f"got {value!r}")
    return number


def integer(name: str, value: Any, *, at_least: int = 0, most: Optional[int] = None) -> int:
    """An int (not a bool, nor a float with no fraction) within the bounds given.

    Args:
        name: the option's keyword (for the message).
        value: what was given.
        at_least: the smallest value allowed.
        most: the largest value allowed.

    Returns:
        ``value`` as an int.

    Raises:
        ConfigError: not an int, or out of bounds.
    """
    whole = int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) \
        else None
    if whole is None or whole < at_least or (most is not None and whole > most):
        raise ConfigError(f"{name} must be an int {_bounds(at_least, None, most)}, "
                          f"got {value!r}")
    return whole


def text(name: str, value: Any, *, empty: bool = False) -> str:
    """A str (not bytes), non-empty unless ``empty``.

    Raises:
        ConfigError: not a str, or empty when that is not allowed.
    """
    if not isinstance(value, str) or (not value and not empty):
        raise ConfigError(f"{name} must be a {'' if empty else 'non-empty '}str, got {value!r}")
    return value


def flag(name: str, value: Any) -> bool:
    """``True`` or ``False`` (not 1, 0, ``None`` or ``"yes"``).

    Raises:
        ConfigError: anything else.
    """
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False, got {value!r}")
    return value


def optional(check: Callable[..., T], name: str, value: Any, **bounds: Any) -> Optional[T]:
    """``None``, or ``value`` passed through ``check`` with ``bounds``.

    Raises:
        ConfigError: what ``check`` raises.
    """
    return None if value is None else check(name, value, **bounds)


def _bounds(at_least: Optional[float], above: Optional[float], most: Optional[float]) -> str:
    """The bounds in words: ``>= 0``, ``> 0``, ``in [0, 60]``, ``in (0, 60]``."""
    low = (f"> {above:g}" if above is not None
           else f">= {at_least:g}" if at_least is not None else "")
    if most is None:
        return low or "(finite)"
    if not low:
        return f"<= {most:g}"
    bracket, bound = ("(", above) if above is not None else ("[", at_least)
    return f"in {bracket}{bound:g}, {most:g}]"
