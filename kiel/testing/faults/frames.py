"""Kafka-frame-aware faults: the proxy reads the size-prefixed frames that
pass and acts on Produce answers (a proxy made with ``kafka=True``).

Byte-level faults (cut, blackout, delay, stall) cannot say *when* a broker
has written a batch. These can:

* **cut after a Produce answer** -- every Nth Produce answer is dropped and
  the connection reset right there: the broker wrote the batch, the client
  never hears of it (and sends it again: an idempotent producer must not
  write it twice). The same for another API's answers (EndTxn,
  AddPartitionsToTxn...): the broker did what was asked, the client never
  hears of it.
* **rewrite a Produce answer's error code** -- every Nth Produce answer has
  each partition's error code replaced (its offset becomes -1), to drive a
  client's handling of codes a broker rarely sends on cue
  (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, an epoch error...).
  The broker did write what it said it wrote: a test that rewrites a
  success into an error must expect that batch in the log.

Strategy: each direction of a link is split into whole frames (held until
complete, then passed on together); requests are read only as far as their
header (and a Produce request's ``acks``, to know whether an answer
comes), answers only when they are Produce answers a rule applies to.
Produce v0 to v8 (the non-flexible versions) are understood; other
versions' answers pass unchanged. Bytes that are not Kafka frames (a
negative or huge size) stop the watch on that link: everything then passes
unchanged.
"""

import struct
from dataclasses import dataclass
from typing import Optional

__all__ = ["FrameWatch", "KafkaRules"]

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_PRODUCE = 0
#: A frame larger than this is not Kafka (or not worth holding): stop watching.
_MAX_FRAME = 256 * 1024 * 1024


@dataclass
class _Rule:
    every: int
    times: Optional[int]
    code: int = 0
    seen: int = 0
    done: int = 0
    #: The API whose answers the rule counts (a cut rule: any API; 0 Produce).
    api_key: int = _PRODUCE

    def hits(self) -> bool:
        """Count one answer of the rule's API; whether the rule applies to it."""
        if self.times is not None and self.done >= self.times:
            return False
        self.seen += 1
        if self.seen % self.every:
            return False
        self.done += 1
        return True


class KafkaRules:
    """The frame rules in effect for every link of one proxy (on its loop).

    Attributes:
        produce_answers: Produce answers seen (all links).
        cut: connections reset after a Produce answer.
        rewritten: Produce answers rewritten.
    """

    def __init__(self) -> None:
        self.cut_rule: Optional[_Rule] = None
        self.rewrite_rule: Optional[_Rule] = None
        self.produce_answers = 0
        self.cut = 0
        self.rewritten = 0

    def counts(self) -> dict[str, int]:
        """The counters, as a dict."""
        return {"produce_answers": self.produce_answers, "cut": self.cut,
                "rewritten": self.rewritten}


class _Splitter:
    """Whole frames out of a byte stream."""

    __slots__ = ("buffer",)

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> Optional[list[bytes]]:
        """The frames ``data`` completes; ``None``: not Kafka framing."""
        buffer = self.buffer
        buffer += data
        frames: list[bytes] = []
        start = 0
        while len(buffer) - start >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            if size < 0 or size > _MAX_FRAME:
                return None
            end = start + 4 + size
            if end > len(buffer):
                break
            frames.append(bytes(buffer[start:end]))
            start = end
        del buffer[:start]
        return frames


class FrameWatch:
    """One link's frames, both directions.

    Args:
        rules: the proxy's rules (shared by its links).
    """

    def __init__(self, rules: KafkaRules) -> None:
        self.rules = rules
        self._up = _Splitter()
        self._down = _Splitter()
        #: correlation id -> (api key, version) of the requests watched that
        #: get an answer: Produce, and the API of a cut rule
        self._produce: dict[int, tuple[int, int]] = {}
        self._lost = False

    def upstream(self, data: bytes) -> tuple[bytes, bool]:
        """Client to broker: note Produce requests. Returns what to pass
        (whole frames) and whether to reset the link (never)."""
        if self._lost:
            return data, False
        frames = self._up.feed(data)
        if frames is None:
            return self._give_up(self._up), False
        cut = self.rules.cut_rule
        for frame in frames:
            if len(frame) >= 12:
                api_key, version, correlation_id = _HEADER.unpack_from(frame, 4)
                if (api_key == _PRODUCE and _answered(frame, version)) or (
                        cut is not None and api_key == cut.api_key != _PRODUCE):
                    self._produce[correlation_id] = (api_key, version)
        return b"".join(frames), False

    def downstream(self, data: bytes) -> tuple[bytes, bool]:
        """Broker to client: apply the rules to Produce answers. Returns
        what to pass and whether to reset the link after it."""
        if self._lost:
            return data, False
        frames = self._down.feed(data)
        if frames is None:
            return self._give_up(self._down), False
        out: list[bytes] = []
        rules = self.rules
        for frame in frames:
            watched = None
            if len(frame) >= 8:
                watched = self._produce.pop(_INT32.unpack_from(frame, 4)[0], None)
            if watched is not None:
                api_key, version = watched
                if api_key == _PRODUCE:
                    rules.produce_answers += 1
                cut = rules.cut_rule
                if cut is not None and cut.api_key == api_key and cut.hits():
                    rules.cut += 1
                    return b"".join(out), True
                if (api_key == _PRODUCE and rules.rewrite_rule is not None and version <= 8
                        and rules.rewrite_rule.hits()):
                    frame = _rewrite(frame, version, rules.rewrite_rule.code)
                    rules.rewritten += 1
            out.append(frame)
        return b"".join(out), False

    def _give_up(self, splitter: _Splitter) -> bytes:
        self._lost = True
        held = bytes(splitter.buffer)
        splitter.buffer.clear()
        return held


def _answered(frame: bytes, version: int) -> bool:
    """Whether a Produce request frame gets an answer (``acks`` is not 0)."""
    try:
        offset = 12
        (client_id,) = _INT16.unpack_from(frame, offset)
        offset += 2 + max(client_id, 0)
        if version >= 9:  # flexible: tagged fields and compact strings; assume acks != 0
            return True
        if version >= 3:
            (transactional_id,) = _INT16.unpack_from(frame, offset)
            offset += 2 + max(transactional_id, 0)
        (acks,) = _INT16.unpack_from(frame, offset)
    except struct.error:
        return True
    return acks != 0


def _rewrite(frame: bytes, version: int, code: int) -> bytes:
    """A Produce answer (v0 to v8) with every partition's error code set to
    ``code`` and its base offset to -1."""
    data = bytearray(frame)
    offset = 8  # size, correlation id
    try:
        (topics,) = _INT32.unpack_from(data, offset)
        offset += 4
        for _ in range(topics):
            (name,) = _INT16.unpack_from(data, offset)
            offset += 2 + name
            (partitions,) = _INT32.unpack_from(data, offset)
            offset += 4
            for _ in range(partitions):
                offset += 4  # partition index
                struct.pack_into(">hq", data, offset, code, -1)
                offset += 10
                if version >= 2:
                    offset += 8  # log_append_time
                if version >= 5:
                    offset += 8  # log_start_offset
                if version >= 8:
                    (errors,) = _INT32.unpack_from(data, offset)
                    offset += 4
                    for _ in range(max(errors, 0)):
                        offset += 4
                        (length,) = _INT16.unpack_from(data, offset)
                        offset += 2 + max(length, 0)
                    (length,) = _INT16.unpack_from(data, offset)
                    offset += 2 + max(length, 0)
    except struct.error:
        return frame  # not the layout expected: passed unchanged
    return bytes(data)
