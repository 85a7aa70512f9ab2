"""Record batches built for tests: chosen offset and timestamp deltas, kiel's
builder over (key, value, timestamp, headers) specs, a broker's base offset,
control (COMMIT/ABORT) batches."""

import struct
from typing import Any, List, Optional, Tuple

from kiel import compression
from kiel.protocol.crc32c import crc32c
from kiel.protocol.primitives import encode_varint
from kiel.protocol.record_batch import CODEC_LZ4, CODEC_NONE, RecordBatchBuilder

TS = 1_700_000_000_000

Spec = Tuple[Optional[bytes], Optional[bytes], int, List[Tuple[str, Optional[bytes]]]]


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


def kiel_batch(specs: List[Spec], codec: int = CODEC_NONE, **options: Any) -> bytes:
    builder = RecordBatchBuilder(codec, **options)
    for key, value, ts, headers in specs:
        builder.append(key, value, timestamp=ts, headers=headers)
    return builder.build()


def with_base_offset(batch: bytes, base_offset: int) -> bytes:
    """A producer's batch as a broker stores it: base offset assigned (not in the CRC)."""
    return struct.pack(">q", base_offset) + batch[8:]


def restamp(batch: bytes, set_bits: int = 0, leader_epoch: Optional[int] = None) -> bytes:
    """``batch`` with attribute bits set and its CRC-32C recomputed."""
    data = bytearray(batch)
    (attributes,) = struct.unpack_from(">h", data, 21)
    struct.pack_into(">h", data, 21, attributes | set_bits)
    if leader_epoch is not None:
        struct.pack_into(">i", data, 12, leader_epoch)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def control_batch(base_offset: int, control_type: int, producer_id: int) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=1, base_sequence=-1,
                                 is_transactional=True)
    builder.append(struct.pack(">hh", 0, control_type), struct.pack(">hi", 0, 5), timestamp=TS)
    return with_base_offset(restamp(builder.build(), 0x20), base_offset)
