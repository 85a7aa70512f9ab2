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

Strategy: every name is imported on first use (PEP 562 ``__getattr__``), as
in :mod:`kiel`: ``import kiel.consumer.offsets`` loads only what it needs,
and ``import kiel.consumer`` does not import kazoo (only ``GroupedConsumer``
needs it).
"""
import importlib
from typing import TYPE_CHECKING, Any, Dict, List

# name -> the module that defines it
_EXPORTS: Dict[str, str] = {
    "SingleConsumer": "kiel.consumer.single",
    "GroupedConsumer": "kiel.consumer.grouped",
    "ConsumerRebalanceListener": "kiel.consumer.listener",
    "BEGINNING": "kiel.consumer.positions",
    "END": "kiel.consumer.positions",
    "StartPosition": "kiel.consumer.positions",
}

__all__ = [
    "BEGINNING",
    "END",
    "ConsumerRebalanceListener",
    "GroupedConsumer",
    "SingleConsumer",
    "StartPosition",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from kiel.consumer.grouped import GroupedConsumer
    from kiel.consumer.listener import ConsumerRebalanceListener
    from kiel.consumer.positions import BEGINNING, END, StartPosition
    from kiel.consumer.single import SingleConsumer


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kiel.consumer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(__all__)
