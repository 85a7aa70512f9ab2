"""MessageSetBuilder, kiel's one message encoder: byte for byte what kiel
wrote before it (tests/support/legacy_encoder.py) on random input, with every codec,
however the messages are fed to it."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiel import compression
from kiel.exc import LocalProtocolError, UnsupportedCodecError
from kiel.protocol.messages import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    LOG_OVERHEAD,
    MESSAGE_OVERHEAD,
    MESSAGE_V0_HEADER,
    MessageSetBuilder,
    assign_offsets,
    decode_message_set,
    encode_message_set,
    iter_message_boundaries,
)
from tests.support import legacy_encoder

CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4]
maybe_bytes = st.none() | st.binary(max_size=300)
messages = st.lists(st.tuples(maybe_bytes, maybe_bytes), max_size=40)


@given(messages, st.sampled_from(CODECS))
@settings(max_examples=400, deadline=None)
def test_extend_matches_the_old_encoder(msgs, codec):
    builder = MessageSetBuilder(codec)
    builder.extend(msgs)
    assert builder.build() == legacy_encoder.encode_message_set(msgs, codec)
    assert encode_message_set(msgs, codec) == legacy_encoder.encode_message_set(msgs, codec)


@given(messages, st.sampled_from(CODECS), st.data())
@settings(max_examples=300, deadline=None)
def test_append_and_extend_in_any_mix_match_the_old_encoder(msgs, codec, data):
    builder = MessageSetBuilder(compression.get_codec(codec) if codec else None)
    sizes = []
    i = 0
    while i < len(msgs):
        n = data.draw(st.integers(0, len(msgs) - i), label="run")
        if n == 0:
            sizes.append(builder.append(*msgs[i]))
            i += 1
        else:
            run = msgs[i : i + n]
            builder.extend(run)
            sizes.extend(MESSAGE_OVERHEAD + len(k or b"") + len(v or b"") for k, v in run)
            i += n
    assert len(builder) == len(msgs)
    assert builder.size == sum(sizes) == len(legacy_encoder.encode_message_set(msgs))
    assert builder.build() == legacy_encoder.encode_message_set(msgs, codec)


@pytest.mark.parametrize("level", [1, 6, 9])
def test_gzip_level_matches_the_old_encoder(level):
    msgs = [(None, b"v%d" % i) for i in range(100)] + [(b"k", b"keyed" * 20)]
    builder = MessageSetBuilder(CODEC_GZIP, compresslevel=level)
    builder.extend(msgs)
    assert builder.build() == legacy_encoder.encode_message_set(msgs, CODEC_GZIP,
                                                                compresslevel=level)
    codec = compression.get_codec(CODEC_GZIP, level=level)
    assert MessageSetBuilder(codec).build() == b""


def test_append_returns_the_message_size():
    builder = MessageSetBuilder()
    assert builder.append(None, None) == MESSAGE_OVERHEAD == LOG_OVERHEAD + MESSAGE_V0_HEADER
    assert builder.append(b"key", b"value") == MESSAGE_OVERHEAD + 8
    assert builder.append(bytearray(b"k"), memoryview(b"v")) == MESSAGE_OVERHEAD + 2
    data = builder.build()
    assert builder.size == len(data) == 3 * MESSAGE_OVERHEAD + 10
    records = decode_message_set(data).records
    assert [(r.offset, r.key, r.value) for r in records] == [
        (0, None, None), (1, b"key", b"value"), (2, b"k", b"v")
    ]


def test_base_offset_numbers_messages_and_the_wrapper():
    plain = MessageSetBuilder(base_offset=40)
    plain.extend([(None, b"a"), (None, b"b")])
    assert [b.offset for b in iter_message_boundaries(plain.build())] == [40, 41]
    wrapped = MessageSetBuilder(CODEC_SNAPPY, base_offset=7)
    wrapped.append(None, b"a")
    assert [b.offset for b in iter_message_boundaries(wrapped.build())] == [7]


def test_refused_input_leaves_the_builder_as_it_was():
    builder = MessageSetBuilder()
    builder.append(b"k", b"v")
    before = builder.build()
    for bad in ([(None, b"ok"), ("text", b"v")], [(None, b"ok"), b"abc"], [(b"k", 5)]):
        with pytest.raises(LocalProtocolError):
            builder.extend(bad)
        assert builder.build() == before and len(builder) == 1
    with pytest.raises(LocalProtocolError):
        builder.append(None, "text")
    with pytest.raises(LocalProtocolError):
        builder.append(None, b"v", attributes=300)  # not a byte
    assert builder.build() == before and builder.size == len(before)


def test_unknown_codec_id():
    with pytest.raises(UnsupportedCodecError):
        MessageSetBuilder(7)


@pytest.mark.parametrize("codec", [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4])
def test_broker_recompression_wraps_with_the_builder(codec):
    """assign_offsets (the embedded broker's append) numbers the inner
    messages and wraps them at the last inner offset."""
    msgs = [(None, b"x%d" % i) for i in range(5)]
    data, count = assign_offsets(encode_message_set(msgs, codec), 100)
    assert count == 5
    assert [b.offset for b in iter_message_boundaries(data)] == [104]
    records = decode_message_set(data).records
    assert [(r.offset, r.value) for r in records] == [(100 + i, v) for i, (_, v) in enumerate(msgs)]
