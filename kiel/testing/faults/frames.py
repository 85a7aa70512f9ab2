"""Kafka-frame-aware faults: the proxy reads the size-prefixed frames that
pass and acts on chosen requests and answers (a proxy made with ``kafka=True``).

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
* **answer a request with an error, in the broker's place** -- every Nth
  request of a coordinator API (FindCoordinator, InitProducerId,
  AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit) is kept
  from the broker and answered by the proxy with an error code
  (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
  CONCURRENT_TRANSACTIONS...): the broker never did it, as a coordinator
  that answers those codes did not (:mod:`~kiel.testing.faults.answers`
  writes the answers). The answer goes to the client after the broker's
  answers to the requests sent before it on that connection, as Kafka
  orders them.
* **re-advertise** (``advertise=True``) -- Metadata and FindCoordinator
  answers that name the target's port name the proxy's instead, for a
  broker that advertises the port it listens on (noida-db).

Strategy: each direction of a link is split into whole frames (held until
complete, then passed on together); requests are read only as far as their
header (and a Produce request's ``acks``, to know whether an answer
comes; the body of a request answered in the broker's place), answers only
when they are Produce answers a rule applies to. Produce v0 to v8 (the
non-flexible versions) are rewritten; other versions' answers pass
unchanged, as do requests of versions :mod:`~kiel.testing.faults.answers`
does not know. Bytes that are not Kafka frames (a negative or huge size)
stop the watch on that link: everything then passes unchanged.
"""

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from kiel.testing.faults.answers import answerable, error_answer, readvertise

__all__ = ["FrameWatch", "KafkaRules"]

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_PRODUCE = 0
_METADATA = 3
_FIND_COORDINATOR = 10
#: A frame larger than this is not Kafka (or not worth holding): stop watching.
_MAX_FRAME = 256 * 1024 * 1024


@dataclass
class _Rule:
    every: int
    times: Optional[int]
    code: int = 0
    seen: int = 0
    done: int = 0
    #: The API whose answers (requests, for an answer rule) the rule counts
    #: (a cut rule: any API; 0 Produce).
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
        cut: connections reset after an answer (the cut rule).
        rewritten: Produce answers rewritten.
        answered: requests the proxy answered itself (an answer rule).
        requests: requests seen, by API key (the ones answered by the
            proxy included).
    """

    def __init__(self) -> None:
        self.cut_rule: Optional[_Rule] = None
        self.rewrite_rule: Optional[_Rule] = None
        #: API key -> the rule answering its requests in the broker's place.
        self.answer_rules: dict[int, _Rule] = {}
        self.produce_answers = 0
        self.cut = 0
        self.rewritten = 0
        self.answered = 0
        self.requests: dict[int, int] = {}
        #: ``(target port, proxy port)``: Metadata and FindCoordinator
        #: answers naming the first name the second (``advertise=True``).
        self.advertise: Optional[tuple[int, int]] = None

    def counts(self) -> dict[str, int]:
        """The counters (but :attr:`requests`), as a dict."""
        return {"produce_answers": self.produce_answers, "cut": self.cut,
                "rewritten": self.rewritten, "answered": self.answered}


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
        inject: passes bytes to the client now, as if the broker had sent
            them (the link's downstream pipe); without it, no request is
            answered in the broker's place.
    """

    def __init__(self, rules: KafkaRules,
                 inject: Optional[Callable[[bytes], None]] = None) -> None:
        self.rules = rules
        self.inject = inject
        self._up = _Splitter()
        self._down = _Splitter()
        #: correlation id -> (api key, version) of every request that gets
        #: an answer from the broker, in the order sent (Kafka answers in
        #: that order on a connection)
        self._pending: dict[int, tuple[int, int]] = {}
        #: correlation id -> the proxy's own answers that pass right after
        #: the broker's answer to that request
        self._after: dict[int, list[bytes]] = {}
        self._lost = False

    def upstream(self, data: bytes) -> tuple[bytes, bool]:
        """Client to broker: note the requests; keep from the broker those
        an answer rule answers. Returns what to pass (whole frames) and
        whether to reset the link (never)."""
        if self._lost:
            return data, False
        frames = self._up.feed(data)
        if frames is None:
            return self._give_up(self._up), False
        rules = self.rules
        out: list[bytes] = []
        for frame in frames:
            if len(frame) < 12:
                out.append(frame)
                continue
            api_key, version, correlation_id = _HEADER.unpack_from(frame, 4)
            rules.requests[api_key] = rules.requests.get(api_key, 0) + 1
            rule = rules.answer_rules.get(api_key)
            if (rule is not None and self.inject is not None
                    and answerable(api_key, version)):
                answer = error_answer(frame, rule.code)
                if answer is not None and rule.hits():
                    rules.answered += 1
                    self._answer(answer)
                    continue  # never reaches the broker
            if api_key != _PRODUCE or _answered(frame, version):
                self._pending[correlation_id] = (api_key, version)
            out.append(frame)
        return b"".join(out), False

    def _answer(self, answer: bytes) -> None:
        """Pass the proxy's own ``answer`` once the broker answered every
        request sent before it on this link."""
        if self._pending:
            last = next(reversed(self._pending))
            self._after.setdefault(last, []).append(answer)
        else:
            assert self.inject is not None
            self.inject(answer)

    def downstream(self, data: bytes) -> tuple[bytes, bool]:
        """Broker to client: apply the rules to the answers. Returns what
        to pass and whether to reset the link after it."""
        if self._lost:
            return data, False
        frames = self._down.feed(data)
        if frames is None:
            return self._give_up(self._down), False
        out: list[bytes] = []
        rules = self.rules
        for frame in frames:
            watched = None
            after: list[bytes] = []
            if len(frame) >= 8:
                (correlation_id,) = _INT32.unpack_from(frame, 4)
                watched = self._pending.pop(correlation_id, None)
                after = self._after.pop(correlation_id, after)
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
                if rules.advertise is not None and api_key in (_METADATA, _FIND_COORDINATOR):
                    frame = readvertise(frame, api_key, version, *rules.advertise)
            out.append(frame)
            out.extend(after)
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
