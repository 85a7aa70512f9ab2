"""RecordBatchBuilder.extend_columns (the producer's encoder since issue 34)
writes the very bytes extend() writes for the same records, whatever their
shape: one length or many, keys or none, offsets past 63 and 8191, values
past 8191 bytes; and the batch decodes back to them."""
import random
from itertools import repeat
from typing import List, Optional

import pytest

from kiel.exc import LocalProtocolError
from kiel.protocol.record_batch import RecordBatchBuilder, decode_record_batches


def _both(keys: Optional[List[Optional[bytes]]], values: List[Optional[bytes]],
          start: int = 0, timestamp: int = 1_700_000_000_000) -> bytes:
    by_pairs, by_columns = RecordBatchBuilder(), RecordBatchBuilder()
    if start:  # records before, as a producer's joined batches have
        for builder in (by_pairs, by_columns):
            builder.extend([(None, b"x")] * start, timestamp=timestamp - 5)
    added = by_pairs.extend(zip(repeat(None) if keys is None else keys, values),
                            timestamp=timestamp)
    assert by_columns.extend_columns(keys, values, timestamp=timestamp) == added
    assert (len(by_columns), by_columns.size) == (len(by_pairs), by_pairs.size)
    data = by_columns.build()
    assert data == by_pairs.build()
    return data


@pytest.mark.parametrize("start", [0, 1, 40, 63, 64, 100, 8000, 8191, 8192, 9000])
@pytest.mark.parametrize("key_length", [None, 0, 11, 70])
@pytest.mark.parametrize("value_length", [0, 1, 63, 64, 100, 8191, 8192])
def test_one_shape_gives_extends_bytes(start, key_length, value_length):
    n = 150
    values = [bytes([i % 256]) * value_length for i in range(n)]
    keys = None if key_length is None else [b"%d" % i * key_length for i in range(n)]
    if keys is not None:
        keys = [key[:key_length].ljust(key_length, b"k") for key in keys]
    data = _both(keys, values, start)
    records = decode_record_batches(data).records[start:]
    assert [(r.key, r.value) for r in records] == list(
        zip(repeat(None) if keys is None else keys, values))


def test_any_shape_gives_extends_bytes():
    rng = random.Random(34)
    for _ in range(300):
        n = rng.randrange(1, 200)
        values = [None if rng.random() < 0.05 else bytes(rng.randrange(0, 130))
                  for _ in range(n)]
        shape = rng.randrange(4)
        keys = (None if shape == 0 else [None] * n if shape == 1
                else [bytes(rng.randrange(0, 20)) for _ in range(n)] if shape == 2
                else [None if rng.random() < 0.3 else b"key" for _ in range(n)])
        _both(keys, values, rng.choice([0, 0, 50, 8150]))


def test_columns_of_other_lengths_or_types_are_refused_as_extend_refuses():
    with pytest.raises(LocalProtocolError):
        RecordBatchBuilder().extend_columns([b"k"], [b"a", b"b"])
    with pytest.raises(LocalProtocolError):
        RecordBatchBuilder().extend_columns(None, ["text"])  # type: ignore[list-item]
    assert RecordBatchBuilder().extend_columns(None, []) == 0
