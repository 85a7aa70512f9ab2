"""Bounded retries with exponential backoff and full jitter."""

import random
from typing import Iterator, Optional

from kiel.exc import ConfigError


class Backoff:
    """Delays for successive retries: ``min(cap, base * 2**n)``, jittered.

    Full jitter (a uniform draw in ``[delay/2, delay]``) keeps many clients
    that failed together from retrying in lockstep.

    Args:
        base: the first delay, seconds.
        cap: the largest delay, seconds.
        retries: how many retries at most (``None``: unbounded, for loops that
            have their own deadline).
    """

    def __init__(self, base: float = 0.1, cap: float = 5.0, retries: Optional[int] = 5) -> None:
        if base <= 0 or cap < base:
            raise ConfigError(f"backoff needs 0 < base <= cap, got base={base} cap={cap}")
        if retries is not None and retries < 0:
            raise ConfigError(f"retries must be >= 0, got {retries}")
        self.base = base
        self.cap = cap
        self.retries = retries

    def delays(self) -> Iterator[float]:
        """Yield one delay per allowed retry."""
        attempt = 0
        while self.retries is None or attempt < self.retries:
            delay = min(self.cap, self.base * (2**attempt))
            yield random.uniform(delay / 2, delay)
            attempt += 1
