"""``kiel allocate``: run an allocator without a cluster (pure)."""

import argparse
import importlib
import json
from collections.abc import Callable
from typing import Any

from kiel.exc import ConfigError

__all__ = ["allocate", "load_allocator"]


def load_allocator(name: str) -> Callable[..., Any]:
    """A registered allocator by name, or a user's ``module:function``.

    Raises:
        ConfigError: no such allocator, module or function.
    """
    from kiel.allocators import get_allocator

    if ":" not in name:
        return get_allocator(name)
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"cannot import allocator module {module_name!r}: {e}") from e
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(f"{module_name!r} has no callable {attr!r}")
    return fn


def _expand_partitions(spec: str) -> list[str]:
    from kiel.allocators import format_partition, parse_partition

    out: list[str] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        if item.endswith("*"):
            topic, _, count = item[:-1].rpartition(":")
            if not topic or not count.isdigit():
                raise ConfigError(f"expected topic:COUNT*, got {item!r}")
            out.extend(format_partition(topic, p) for p in range(int(count)))
        else:
            topic, partition = parse_partition(item)
            out.append(format_partition(topic, partition))
    return out


def _capacities(spec: str) -> dict[str, float]:
    """``--capacities a=3,b=1``.

    Raises:
        ConfigError: an item that is not ``member=number``.
    """
    capacities: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        member, sep, value = item.partition("=")
        try:
            if not sep or not member:
                raise ValueError(item)
            capacities[member.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--capacities takes member=number,...; got {item!r}") from None
    return capacities


def allocate(args: argparse.Namespace, out: Any) -> int:
    """Run an allocator on the given members and partitions and print the result.

    Raises:
        ConfigError: an unknown allocator, no member, bad partitions or
            capacities (or capacities for another allocator than ``weighted``).
        AllocationError: the allocation lost or doubled a partition.
    """
    from kiel.allocators import validate, weighted

    if args.allocator.strip().lower() == "weighted":
        # A factory, not an allocator: made here with the capacities given.
        allocator = weighted(_capacities(args.capacities or ""))
    elif args.capacities:
        raise ConfigError("--capacities is for --allocator weighted")
    else:
        allocator = load_allocator(args.allocator)
    members = sorted(filter(None, (m.strip() for m in args.members.split(","))))
    partitions = sorted(_expand_partitions(args.partitions))
    if not members:
        raise ConfigError("--members names no member")
    allocation = allocator(members, partitions)
    validate(allocation, members, partitions)
    if args.json:
        out.write(json.dumps(allocation, sort_keys=True) + "\n")
        return 0
    for member in members:
        owned = allocation.get(member, {})
        total = sum(len(ps) for ps in owned.values())
        parts = "; ".join(
            f"{t}: {','.join(map(str, sorted(ps)))}" for t, ps in sorted(owned.items())
        )
        out.write(f"{member}\t{total}\t{parts}\n")
    return 0
