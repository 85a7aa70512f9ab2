"""Answers the fault proxy writes itself: a coordinator's error, in the
place of the broker's answer (see :meth:`FaultProxy.answer_error
<kiel.testing.faults.proxy.FaultProxy.answer_error>`); and the broker's
answers that say where a broker is, made to name the proxy
(:func:`readvertise`, for ``FaultProxy(advertise=True)``).

A coordinator that answers NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
or CONCURRENT_TRANSACTIONS did not do what it was asked. So the honest
fault is a request that never reaches the broker, answered by the proxy
with that code: :func:`error_answer` reads the request frame and writes
the answer frame of the same API and version, every error code field set
to the code (and each partition of the request answered, for the APIs that
answer per partition).

The APIs and versions understood (:data:`ANSWERABLE`), flexible ones
included (KIP-482: request header v2 with tagged fields after the client
id, response header v1 with tagged fields after the correlation id,
compact strings and arrays, tagged fields closing every struct):

* FindCoordinator (10) v0-3: the error, no coordinator (node -1, host "",
  port -1); v4+ (batched keys) is not.
* InitProducerId (22) v0-5: the error, producer id -1, epoch -1.
* AddPartitionsToTxn (24) v0-3: the error for each partition of the
  request (v4+, the brokers' batched form, is not).
* AddOffsetsToTxn (25) v0-4 and EndTxn (26) v0-4: the error.
* TxnOffsetCommit (28) v0-4: the error for each partition of the request.

Written by hand from Apache Kafka's message definitions (not with kiel's
own codec, so that a mistake in one does not hide in the other);
tests/testing/test_fault_proxy_answers.py judges every one with
kafka-python's classes.
"""

import struct
from collections.abc import Callable
from typing import Optional, TypeVar

__all__ = ["ANSWERABLE", "answerable", "error_answer", "readvertise"]

_T = TypeVar("_T")

#: API key -> (first, last) version the proxy answers itself.
ANSWERABLE: dict[int, tuple[int, int]] = {
    10: (0, 3),  # FindCoordinator
    22: (0, 5),  # InitProducerId
    24: (0, 3),  # AddPartitionsToTxn
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 4),  # EndTxn
    28: (0, 4),  # TxnOffsetCommit
}
#: The first flexible version of each (Kafka's ``flexibleVersions``).
_FLEXIBLE = {10: 3, 22: 2, 24: 3, 25: 3, 26: 3, 28: 3}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class _Malformed(Exception):
    """The request is not laid out as its API and version say."""


class _Reader:
    """Reads a request body, classic or flexible."""

    def __init__(self, data: bytes, offset: int, flexible: bool) -> None:
        self.data, self.offset, self.flexible = data, offset, flexible

    def take(self, size: int) -> bytes:
        end = self.offset + size
        if size < 0 or end > len(self.data):
            raise _Malformed(f"{size} bytes past the end")
        chunk = self.data[self.offset:end]
        self.offset = end
        return chunk

    def unpack(self, fmt: struct.Struct) -> int:
        (value,) = fmt.unpack(self.take(fmt.size))
        return int(value)

    def varint(self) -> int:
        """An unsigned varint."""
        value = shift = 0
        while True:
            (byte,) = self.take(1)
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise _Malformed("varint too long")

    def string(self) -> Optional[str]:
        """A (nullable) string: int16 length, or compact (varint length + 1)."""
        size = self.varint() - 1 if self.flexible else self.unpack(_I16)
        if size < 0:
            return None
        return self.take(size).decode("utf-8", "replace")

    def array(self, item: Callable[[], _T]) -> list[_T]:
        """An array: int32 count, or compact (varint count + 1)."""
        count = self.varint() - 1 if self.flexible else self.unpack(_I32)
        return [item() for _ in range(max(count, 0))]

    def tags(self) -> None:
        """Skip the tagged fields closing a struct (flexible only)."""
        if not self.flexible:
            return
        for _ in range(self.varint()):
            self.varint()  # tag
            self.take(self.varint())


class _Writer:
    """Writes an answer body, classic or flexible."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.out = bytearray()

    def pack(self, fmt: struct.Struct, value: int) -> None:
        self.out += fmt.pack(value)

    def varint(self, value: int) -> None:
        while value > 0x7F:
            self.out.append((value & 0x7F) | 0x80)
            value >>= 7
        self.out.append(value)

    def string(self, value: Optional[str]) -> None:
        raw = None if value is None else value.encode()
        if self.flexible:
            self.varint(0 if raw is None else len(raw) + 1)
        else:
            self.pack(_I16, -1 if raw is None else len(raw))
        self.out += raw or b""

    def count(self, count: int) -> None:
        if self.flexible:
            self.varint(count + 1)
        else:
            self.pack(_I32, count)

    def tags(self) -> None:
        if self.flexible:
            self.out.append(0)  # no tagged fields


def answerable(api_key: int, version: int) -> bool:
    """Whether the proxy can answer this API's ``version`` itself."""
    span = ANSWERABLE.get(api_key)
    return span is not None and span[0] <= version <= span[1]


def error_answer(frame: bytes, code: int) -> Optional[bytes]:
    """The answer frame to the request ``frame`` (size prefix included) with
    error ``code``, in the request's API and version.

    Args:
        frame: a whole request frame of an :func:`answerable` API and version.
        code: the int16 error code.

    Returns:
        the answer frame (size prefix included), or ``None`` if the request
        is not of an API and version understood, or not laid out as they say.
    """
    if len(frame) < 12:
        return None
    api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 4)
    if not answerable(api_key, version):
        return None
    flexible = version >= _FLEXIBLE[api_key]
    reader = _Reader(frame, 12, flexible)
    writer = _Writer(flexible)
    try:
        size = reader.unpack(_I16)  # client id: a classic nullable string in every header
        reader.take(max(size, 0))
        reader.tags()  # request header v2
        _body(api_key, version, code, reader, writer)
    except _Malformed:
        return None
    header = _I32.pack(correlation_id) + (b"\0" if flexible else b"")  # response header v1
    body = header + bytes(writer.out)
    return _I32.pack(len(body)) + body


def _body(api_key: int, version: int, code: int, reader: _Reader, writer: _Writer) -> None:
    if api_key == 10:  # FindCoordinator
        if version >= 1:
            writer.pack(_I32, 0)  # throttle
        writer.pack(_I16, code)
        if version >= 1:
            writer.string(None)  # error message
        writer.pack(_I32, -1)  # node id
        writer.string("")  # host
        writer.pack(_I32, -1)  # port
    elif api_key == 22:  # InitProducerId
        writer.pack(_I32, 0)
        writer.pack(_I16, code)
        writer.pack(_I64, -1)
        writer.pack(_I16, -1)
    elif api_key in (25, 26):  # AddOffsetsToTxn, EndTxn
        writer.pack(_I32, 0)
        writer.pack(_I16, code)
    elif api_key == 24:  # AddPartitionsToTxn
        writer.pack(_I32, 0)
        _per_partition(_add_partitions(reader), code, writer)
    else:  # 28 TxnOffsetCommit
        writer.pack(_I32, 0)
        _per_partition(_offsets(reader, version), code, writer)
    writer.tags()


def _add_partitions(reader: _Reader) -> list[tuple[str, list[int]]]:
    """AddPartitionsToTxn v0-3: each topic and its partitions."""
    reader.string()  # transactional id
    reader.take(8 + 2)  # producer id, epoch

    def topic() -> tuple[str, list[int]]:
        name = reader.string() or ""
        partitions = reader.array(lambda: reader.unpack(_I32))
        reader.tags()
        return name, partitions

    return reader.array(topic)


def _offsets(reader: _Reader, version: int) -> list[tuple[str, list[int]]]:
    """TxnOffsetCommit v0-4: each topic and its partitions."""
    reader.string()  # transactional id
    reader.string()  # group id
    reader.take(8 + 2)  # producer id, epoch
    if version >= 3:
        reader.take(4)  # generation id
        reader.string()  # member id
        reader.string()  # group instance id

    def partition() -> int:
        index = reader.unpack(_I32)
        reader.take(8 + (4 if version >= 2 else 0))  # offset, leader epoch
        reader.string()  # metadata
        reader.tags()
        return index

    def topic() -> tuple[str, list[int]]:
        name = reader.string() or ""
        partitions = reader.array(partition)
        reader.tags()
        return name, partitions

    return reader.array(topic)


def _per_partition(topics: list[tuple[str, list[int]]], code: int, writer: _Writer) -> None:
    writer.count(len(topics))
    for name, partitions in topics:
        writer.string(name)
        writer.count(len(partitions))
        for index in partitions:
            writer.pack(_I32, index)
            writer.pack(_I16, code)
            writer.tags()
        writer.tags()


def readvertise(frame: bytes, api_key: int, version: int, old: int, new: int) -> bytes:
    """A Metadata (3, v0-13) or FindCoordinator (10, v0-6) answer frame with
    every broker port ``old`` replaced by ``new`` (in place: the size does
    not change); other answers, and answers not laid out as their version
    says, are returned unchanged.

    Args:
        frame: a whole answer frame (size prefix included).
        api_key: the API of the request it answers.
        version: that request's version.
        old: the port the broker advertises (the proxy's target).
        new: the port to name instead (the proxy's).
    """
    if api_key == 3 and version <= 13:
        flexible = version >= 9
    elif api_key == 10 and version <= 6:
        flexible = version >= 3
    else:
        return frame
    data = bytearray(frame)
    reader = _Reader(frame, 8, flexible)  # size, correlation id
    ports: list[int] = []
    try:
        reader.tags()  # response header v1
        if version >= (3 if api_key == 3 else 1):
            reader.take(4)  # throttle (Metadata v3+; FindCoordinator v1+)
        if api_key == 3:
            def broker() -> None:
                reader.take(4)  # node id
                reader.string()  # host
                ports.append(reader.offset)
                reader.take(4)
                if version >= 1:
                    reader.string()  # rack
                reader.tags()

            reader.array(broker)
        elif version <= 3:
            reader.take(2)  # error code
            if version >= 1:
                reader.string()  # error message
            reader.take(4)  # node id
            reader.string()  # host
            ports.append(reader.offset)
            reader.take(4)
        else:
            def coordinator() -> None:
                reader.string()  # key
                reader.take(4)  # node id
                reader.string()  # host
                ports.append(reader.offset)
                reader.take(4 + 2)  # port, error code
                reader.string()  # error message
                reader.tags()

            reader.array(coordinator)
    except _Malformed:
        return frame
    for offset in ports:
        if _I32.unpack_from(data, offset)[0] == old:
            _I32.pack_into(data, offset, new)
    return bytes(data)
