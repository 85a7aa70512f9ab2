"""The idempotent producer's state: its producer id and epoch, and how batches
are numbered (KIP-98, KIP-360).

An idempotent producer asks a broker once for a producer id and epoch
(InitProducerId), then numbers every batch per partition: the first record
of a partition's first batch has sequence 0, the next batch starts where the
previous one ended. The broker keeps the last few batches' numbers per
producer and partition, so a batch sent again after a lost answer is not
written twice (Apache Kafka answers with the first write's offset, Tansu with
DUPLICATE_SEQUENCE_NUMBER), and a batch that would leave a gap is refused
(OUT_OF_ORDER_SEQUENCE_NUMBER).

A batch is numbered once, when it is first taken for a request, and keeps
its numbers over its retries. When the broker refuses the numbering (45
with no earlier batch of the partition unacknowledged, 59, an epoch error),
the producer renews its identity: it bumps its epoch where the broker
allows it (InitProducerId v3+ with the current id and epoch), otherwise it
takes a new producer id; then every partition starts again at sequence 0
and the batches not yet acknowledged are numbered again as they go. A batch
that an earlier attempt may have written (an attempt went unanswered) is
not sent again under the new identity, which the broker could not match
with the old one: it fails with :class:`~kiel.exc.DeliveryUnknownError`.

No I/O here but :meth:`Idempotence.acquire`; the sender decides when.
"""

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Optional

from kiel.cluster import Cluster
from kiel.exc import KielError, UnsupportedFeatureError, for_code
from kiel.producer.accumulator import PartitionQueue, ProducerBatch
from kiel.protocol.init_producer_id import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    init_producer_id_request,
)
from kiel.protocol.versions import INIT_PRODUCER_ID, Versions

log = logging.getLogger(__name__)

__all__ = ["MAX_IN_FLIGHT", "SEQUENCE_LIMIT", "Idempotence", "RENEW_CODES"]

#: Batches of one partition in flight at most (the broker keeps the numbers
#: of a producer's last five batches per partition, so more could not be
#: told apart after a retry).
MAX_IN_FLIGHT = 5
#: Sequence numbers wrap to 0 past the largest int32, as Kafka's do.
SEQUENCE_LIMIT = 2**31
#: Error codes that say the broker refused the producer's numbering: 45
#: OUT_OF_ORDER_SEQUENCE_NUMBER, 47 INVALID_PRODUCER_EPOCH, 59
#: UNKNOWN_PRODUCER_ID, 90 PRODUCER_FENCED.
RENEW_CODES = frozenset((45, 47, 59, 90))
#: 46 DUPLICATE_SEQUENCE_NUMBER: written before; a delivery.
DUPLICATE_SEQUENCE = 46
OUT_OF_ORDER_SEQUENCE = 45


class Idempotence:
    """One producer's id, epoch and state.

    Args:
        required: ``idempotent=True`` was asked for (a broker that cannot
            serve it is an error), else it is on where the broker serves
            InitProducerId and off without a word where not.

    Attributes:
        enabled: ``None`` until the first broker was asked, then whether
            batches are numbered.
        producer_id, producer_epoch: the identity (-1 before the first).
        renew: the broker refused the numbering: no batch goes until the
            identity is renewed.
        renewals: how many times the identity was renewed (bumped or new).
        transactional_id: a transactional producer's id (``None``: idempotent
            only), sent with InitProducerId with
            ``transaction_timeout_ms`` (see :mod:`kiel.producer.transactions`).
        send_to: how InitProducerId is sent, ``send_to(build, timeout)``:
            ``None`` sends it to any broker; a transactional producer sends
            it to its transaction coordinator.
    """

    def __init__(self, required: bool) -> None:
        self.required = required
        self.enabled: Optional[bool] = None
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.renew = False
        self.renewals = 0
        self.transactional_id: Optional[str] = None
        self.transaction_timeout_ms = 60000
        self.send_to: Optional[Callable[[Callable[[Versions], Any], float],
                                        Awaitable[Any]]] = None

    @property
    def ready(self) -> bool:
        """Whether batches may go now: idempotence is off, or on with an identity."""
        return self.enabled is False or (
            self.enabled is True and self.producer_id >= 0 and not self.renew)

    def number(self, queue: PartitionQueue, batch: ProducerBatch) -> None:
        """Number ``batch`` (the next of its partition) unless it already
        is, under the current identity (a retry keeps its numbers)."""
        if (batch.base_sequence >= 0 and batch.producer_id == self.producer_id
                and batch.producer_epoch == self.producer_epoch):
            return
        base = queue.next_sequence
        batch.number(self.producer_id, self.producer_epoch, base)
        queue.next_sequence = (base + len(batch.values)) % SEQUENCE_LIMIT
        queue.unacked.append(batch)

    @staticmethod
    def earlier_unacked(queue: PartitionQueue, batch: ProducerBatch) -> bool:
        """Whether a batch numbered before ``batch`` in its partition is not
        acknowledged yet (then a gap the broker sees is that batch's, still
        to be retried, not a lost numbering)."""
        return bool(queue.unacked) and queue.unacked[0] is not batch

    async def acquire(self, cluster: Cluster, timeout: float) -> None:
        """Ask a broker for an identity: a bumped epoch if there is one to
        bump (KIP-360, InitProducerId v3+), else (or when the bump is
        refused) a new producer id.

        The first call also decides :attr:`enabled`.

        Raises:
            UnsupportedFeatureError: the broker does not serve
                InitProducerId and ``idempotent=True`` was asked for
                (without it, idempotence is off instead).
            KielError: the broker could not be reached or refused.
        """
        bump = self.producer_id >= 0
        send = cluster.send_any if self.send_to is None else self.send_to
        try:
            response = await send(lambda versions: self._request(versions, bump), timeout)
        except UnsupportedFeatureError as e:
            if self.enabled is None and not self.required:
                self.enabled = False
                return
            raise UnsupportedFeatureError(
                "idempotent=True needs a broker that serves InitProducerId v2+ "
                f"(Kafka 2.4+): {e.message}") from e
        error = for_code(response.error_code)
        if error is not None and bump:
            # The broker does not bump the epoch of an idempotent producer
            # (Tansu refuses it): a new producer id does as well.
            log.info("producer: epoch bump of producer id %d refused (%s); "
                     "taking a new producer id", self.producer_id, error.__name__)
            response = await send(lambda versions: self._request(versions, False), timeout)
            error = for_code(response.error_code)
        if error is not None:
            raise error(f"InitProducerId failed: {error.__doc__}",
                        errno=response.error_code, api="InitProducerId")
        if self.producer_id >= 0:
            self.renewals += 1
            log.info("producer: producer id %d epoch %d renewed as id %d epoch %d",
                     self.producer_id, self.producer_epoch, response.producer_id,
                     response.producer_epoch)
        self.producer_id = response.producer_id
        self.producer_epoch = response.producer_epoch
        self.enabled = True
        self.renew = False

    def _request(self, versions: Versions, bump: bool) -> Any:
        version = versions.of(INIT_PRODUCER_ID)
        txn, timeout_ms = self.transactional_id, self.transaction_timeout_ms
        if bump and version >= 3:
            return init_producer_id_request(version, txn, timeout_ms, self.producer_id,
                                            self.producer_epoch)
        return init_producer_id_request(version, txn, timeout_ms)


def renewal_error(code: int, **context: Any) -> KielError:
    """The typed error of a refused numbering ``code`` (for the records whose
    retries run out on it)."""
    error_class = for_code(code)
    assert error_class is not None
    return error_class(errno=code, **context)
