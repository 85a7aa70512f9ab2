"""kiel's consumers: :class:`SingleConsumer` and :class:`GroupedConsumer`.

The parts, each in its module:

* :mod:`kiel.consumer.positions` -- start positions (``BEGINNING``, ``END``, times) and lag;
* :mod:`kiel.consumer.subscription` -- each partition's state (an explicit status);
* :mod:`kiel.consumer.fetcher` -- Fetch requests (the I/O);
* :mod:`kiel.consumer.decoder` -- message sets to records, within a loop-time budget;
* :mod:`kiel.consumer.offsets` -- ListOffsets, OffsetCommit and OffsetFetch;
* :mod:`kiel.consumer.base` -- what both consumers share;
* :mod:`kiel.consumer.single`, :mod:`kiel.consumer.grouped` -- the consumers;
* :mod:`kiel.consumer.commits` -- a grouped consumer's finished offsets and commits;
* :mod:`kiel.consumer.listener` -- :class:`ConsumerRebalanceListener`.

Strategy: ``GroupedConsumer`` needs kazoo, so it is imported on first use
(PEP 562 ``__getattr__``): ``import kiel.consumer`` does not import kazoo.
"""
from typing import TYPE_CHECKING

from kiel._lazy import lazy_exports
from kiel.consumer.listener import ConsumerRebalanceListener
from kiel.consumer.positions import BEGINNING, END, StartPosition
from kiel.consumer.single import SingleConsumer

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from kiel.consumer.grouped import GroupedConsumer

__all__ = [
    "BEGINNING",
    "END",
    "ConsumerRebalanceListener",
    "GroupedConsumer",
    "SingleConsumer",
    "StartPosition",
]


__getattr__ = lazy_exports(__name__, {"GroupedConsumer": "kiel.consumer.grouped"})
