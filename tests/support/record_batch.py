"""Record batches with chosen offset and timestamp deltas."""

import struct
from typing import List

from kiel import compression
from kiel.protocol.crc32c import crc32c
from kiel.protocol.primitives import encode_varint
from kiel.protocol.record_batch import CODEC_LZ4, CODEC_NONE

TS = 1_700_000_000_000


def _record(*fields: bytes) -> bytes:
    body = b"".join(fields)
    return encode_varint(len(body)) + body


def batch_with_deltas(deltas: List[int], last_delta: int, base_offset: int = 0,
                      codec: int = CODEC_NONE) -> bytes:
    """A batch whose records carry ``deltas`` as their offset deltas and
    whose header says ``last_delta``, CRC valid: what a hostile or broken
    broker may send."""
    records = b"".join(
        _record(b"\x00", b"\x00", encode_varint(delta), encode_varint(-1),
                encode_varint(len(value)) + value, b"\x00")
        for delta, value in ((d, b"v%d" % i) for i, d in enumerate(deltas))
    )
    if codec:
        records = compression.get_codec(codec, **({"magic": 1} if codec == CODEC_LZ4 else {})
                                        ).compress(records)
    tail = struct.pack(">hiqqqhii", codec, last_delta, TS, TS, -1, -1, -1, len(deltas))
    body = tail + records
    head = struct.pack(">qiibI", base_offset, len(body) + 9, -1, 2, crc32c(body))
    return head + body

