"""The producer: :class:`Producer` and its parts.

* :mod:`kiel.producer.producer`: the public :class:`Producer`;
* :mod:`kiel.producer.accumulator`: per-partition batches and the bytes
  they hold (pure bookkeeping, no I/O);
* :mod:`kiel.producer.sender`: Produce requests, acknowledgements, retries;
* :mod:`kiel.producer.routing`: which partition a record goes to;
* :mod:`kiel.producer.admission`: records waiting for metadata or room;
* :mod:`kiel.producer.outcomes`: records delivered and failed since the
  last :meth:`Producer.flush` (its report);
* :mod:`kiel.producer.partitioners`: the partitioner type and the default
  (Java-compatible) one.

Messages are encoded by :class:`kiel.protocol.messages.MessageSetBuilder`.
"""
from kiel.producer.outcomes import FailedRecord, FlushResult
from kiel.producer.producer import Producer
from kiel.structs import RecordMetadata

__all__ = ["FailedRecord", "FlushResult", "Producer", "RecordMetadata"]
