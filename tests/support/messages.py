"""kafka-python's legacy encoder, the judge of kiel's message sets."""

from kafka.record.legacy_records import LegacyRecordBatchBuilder

NONE, GZIP, SNAPPY, LZ4 = 0, 1, 2, 3


def kp_encode(msgs, codec=NONE, magic=0, offsets=None, timestamps=None):
    """kafka-python's LegacyRecordBatchBuilder output for (key, value) pairs."""
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 30)
    for i, (key, value) in enumerate(msgs):
        offset = i if offsets is None else offsets[i]
        ts = None if timestamps is None else timestamps[i]
        assert builder.append(offset, ts, key, value) is not None
    return bytes(builder.build())

