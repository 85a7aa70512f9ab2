"""Partitioners: pick the partition of a record from its key.

A partitioner is any callable ``partitioner(key, partitions) -> partition``:

* ``key`` is the record's key as bytes (after the key serializer), or ``None``;
* ``partitions`` is the sorted list of the topic's partition ids. For a record
  without a key, the producer passes only the partitions that have a leader
  right now (all of them if none has), so that unkeyed records are not
  parked on a partition that cannot take them.

It returns one of ``partitions``. :class:`DefaultPartitioner` (what
:class:`~kiel.producer.Producer` uses unless told otherwise) places keyed
records exactly as the Java client and kafka-python's ``DefaultPartitioner``
do -- ``(murmur2(key) & 0x7fffffff) % len(partitions)`` -- so records with
the same key land on the same partition whichever of these clients produced
them, and spreads unkeyed records round-robin.
"""
import itertools
import random
import struct
from collections.abc import Callable, Sequence
from typing import Optional

__all__ = ["DefaultPartitioner", "Partitioner", "murmur2", "random_partitioner", "key_partition"]

#: The partitioner signature.
Partitioner = Callable[[Optional[bytes], Sequence[int]], int]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


#: ``_WORDS[n](data)``: the first ``n`` 4-byte little-endian words of ``data``.
_WORDS = [struct.Struct(f"<{n}I").unpack_from for n in range(64)]


def murmur2(data: bytes) -> int:
    """MurmurHash2 (32 bit) of ``data``, as the Java client computes it.

    Same algorithm and seed as ``org.apache.kafka.common.utils.Utils.murmur2``
    and kafka-python's ``murmur2``; the result is unsigned (Java's ``int``
    read as unsigned).

    Args:
        data: the bytes to hash.

    Returns:
        the hash, ``0 <= h < 2**32``.
    """
    length = len(data)
    h = _SEED ^ length
    blocks = length >> 2
    if blocks:
        # Strategy: one unpack for all 4-byte little-endian words (with a
        # compiled Struct for keys under 256 bytes, not a format string
        # made per key), then plain integer arithmetic masked to 32 bits.
        words = (_WORDS[blocks] if blocks < 64 else struct.Struct(f"<{blocks}I").unpack_from)
        for k in words(data):
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ (((k ^ (k >> 24)) * _M) & _MASK)
    tail = length & 3
    if tail:
        base = blocks << 2
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h = ((h ^ data[base]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def key_partition(key: bytes, partitions: Sequence[int]) -> int:
    """The partition the Java client would pick for ``key``.

    Args:
        key: the serialized key.
        partitions: the topic's partition ids, sorted.

    Returns:
        ``partitions[(murmur2(key) & 0x7fffffff) % len(partitions)]``.
    """
    return partitions[(murmur2(key) & 0x7FFFFFFF) % len(partitions)]


class DefaultPartitioner:
    """Keyed records by murmur2 (Java-compatible); unkeyed ones round-robin.

    Instances are callables with the partitioner signature. The round-robin
    counter starts at a random point so that many producers started together
    do not all begin with partition 0.
    """

    def __init__(self) -> None:
        self._counter = itertools.count(random.randrange(1 << 16))

    def __call__(self, key: Optional[bytes], partitions: Sequence[int]) -> int:
        """Pick a partition.

        Args:
            key: the serialized key, or ``None``.
            partitions: sorted partition ids (only the available ones for an
                unkeyed record).

        Returns:
            one of ``partitions``.
        """
        if key is None:
            return partitions[next(self._counter) % len(partitions)]
        return partitions[(murmur2(key) & 0x7FFFFFFF) % len(partitions)]


def random_partitioner(key: Optional[bytes], partitions: Sequence[int]) -> int:
    """Ignore the key and pick a partition at random.

    Args:
        key: ignored.
        partitions: the candidate partition ids.

    Returns:
        one of ``partitions``, uniformly at random.
    """
    return random.choice(partitions)
