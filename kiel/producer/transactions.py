"""The transactional producer (KIP-98, KIP-447): its transaction's state and
the requests to the transaction coordinator.

A producer with a ``transactional_id`` writes records only inside a
transaction; a read_committed consumer sees them once the transaction
commits, and never when it aborts. The offsets of the records the
application consumed can commit with it (``send_offsets_to_transaction``),
which makes consume-transform-produce exactly once.

The wire, in the order a transaction uses it:

* InitProducerId with the transactional id, at :meth:`Producer.connect
  <kiel.producer.producer.Producer.connect>`, to the transactional id's
  coordinator (FindCoordinator, key type 1): the coordinator aborts what
  an older instance left open and fences it (its epoch is now stale). The
  idempotent producer's code does it (:class:`~kiel.producer.idempotence.
  Idempotence`); this module only sends it to the coordinator.
* AddPartitionsToTxn before the first batch of a partition in the
  transaction: the sender holds every batch until the partitions that have
  records are added (:meth:`Transactions.partitions_added`).
* AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to
  the group's coordinator with the consumer's group metadata.
* EndTxn, commit (after every record of the transaction is acknowledged)
  or abort (after the records not sent yet are dropped, failing with
  :class:`~kiel.exc.TransactionAbortedError`, and the ones out are settled).

States: no transaction, open, doomed (an error means it can only abort),
ending (EndTxn under way or to be retried) and fatal. Fatal is for good:
the producer was fenced (a newer instance with the same transactional id
initialised: PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH in a transaction),
or refused the transactional id (authorization, an invalid timeout): every
later call raises :class:`~kiel.exc.ProducerFencedError` (or that error)
again; close it and make a new producer.

Retries: coordinator moves (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS), CONCURRENT_TRANSACTIONS and other retriable
errors are retried through :mod:`kiel.retry`, bounded by the producer's
``retries`` and backoff, then raised.

kiel's own bound: a transaction open longer than ``transaction_timeout``
is aborted by the producer, and the next :meth:`commit` raises
:class:`~kiel.exc.TransactionTimeoutError`. (The timeout also goes to the
broker with InitProducerId; neither broker kiel is tested with enforces
it, so kiel does.)
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Optional

from kiel import _options
from kiel._aio import Tasks, within
from kiel.cluster import BrokerInfo, Cluster
from kiel.exc import (
    ConfigError,
    KielError,
    ProducerFencedError,
    TransactionAbortedError,
    TransactionStateError,
    TransactionTimeoutError,
    UnsupportedFeatureError,
    for_code,
)
from kiel.producer.accumulator import RecordAccumulator
from kiel.producer.idempotence import Idempotence
from kiel.producer.outcomes import Outcomes
from kiel.protocol.group_coordinator import (
    KEY_TYPE_TRANSACTION,
    FindCoordinatorRequestV1,
    FindCoordinatorRequestV2,
)
from kiel.protocol.transactions import (
    REQUESTS,
    AddPartitionsToTxnTopic,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kiel.protocol.versions import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    GROUP_COORDINATOR,
    TXN_OFFSET_COMMIT,
    Versions,
)
from kiel.retry import Backoff, attempts
from kiel.structs import GroupMetadata, TopicPartition

log = logging.getLogger(__name__)

__all__ = ["MAX_TRANSACTION_TIMEOUT", "Transactions", "check_transactional"]

#: Kafka's default ``transaction.max.timeout.ms``: 15 minutes, in seconds.
MAX_TRANSACTION_TIMEOUT = 900.0
#: The default ``transaction_timeout`` (Java's ``transaction.timeout.ms``).
DEFAULT_TRANSACTION_TIMEOUT = 60.0
#: Codes that fence this producer for good: PRODUCER_FENCED (KIP-588) and
#: INVALID_PRODUCER_EPOCH (what brokers before KIP-588 answer).
FENCED_CODES = frozenset((90, 47))
#: Codes after which the producer cannot go on either: the transactional id
#: is not authorized (53), the cluster refuses it (31), the timeout is too
#: large for the broker (50), the producer id is not the id's (49).
FATAL_CODES = frozenset((31, 49, 50, 53))
#: The coordinator moved or is loading: find it again (15, 16; 14 loading).
COORDINATOR_MOVED = frozenset((14, 15, 16, 52))
#: OPERATION_NOT_ATTEMPTED: another partition of the request failed.
NOT_ATTEMPTED = 55

_NONE, _OPEN, _ENDING = "none", "open", "ending"


def check_transactional(transactional_id: Optional[str], transaction_timeout: Any,
                        idempotent: Optional[bool], required_acks: int,
                        max_batches_in_flight: Optional[int]) -> tuple[Optional[bool], float]:
    """Check a producer's transactional settings.

    Args:
        transactional_id: ``None`` (not transactional) or a non-empty str.
        transaction_timeout: seconds, above 0 (at least a millisecond) and at
            most :data:`MAX_TRANSACTION_TIMEOUT`.
        idempotent, required_acks, max_batches_in_flight: the producer's
            (a transactional producer is idempotent: ``idempotent=False``,
            acks other than -1 or more than 5 batches in flight are errors).

    Returns:
        the ``idempotent`` setting to use (``True`` with a transactional id)
        and the timeout in seconds.

    Raises:
        ConfigError: any of the above.
    """
    timeout = _options.real("transaction_timeout", transaction_timeout, at_least=0.001,
                            most=MAX_TRANSACTION_TIMEOUT)
    if transactional_id is None:
        return idempotent, timeout
    _options.text("transactional_id", transactional_id)
    if idempotent is False:
        raise ConfigError("transactional_id needs an idempotent producer: remove "
                          "idempotent=False (a transaction numbers its batches)")
    if required_acks != -1:
        raise ConfigError(f"transactional_id needs required_acks=-1, got "
                          f"required_acks={required_acks}")
    if max_batches_in_flight is not None and type(max_batches_in_flight) is int \
            and max_batches_in_flight > 5:
        raise ConfigError(f"transactional_id allows at most 5 batches in flight per "
                          f"partition, got max_batches_in_flight={max_batches_in_flight}")
    return True, timeout


def _first_error(codes: Iterable[int]) -> int:
    """The code that says what went wrong: the first other than 0 and
    OPERATION_NOT_ATTEMPTED (which only says another partition failed)."""
    seen = 0
    for code in codes:
        if code and code != NOT_ATTEMPTED:
            return code
        seen = seen or code
    return seen


class Transactions:
    """One transactional producer's transaction state and coordinator calls.

    Args:
        transactional_id: the id (non-empty).
        timeout: ``transaction_timeout``, seconds.
        cluster: the producer's cluster.
        idempotence: the producer's idempotent state (its id and epoch).
        accumulator: the producer's batches.
        outcomes: the producer's record outcomes (failures are counted).
        tasks: the producer's background tasks.
        backoff: the producer's retry backoff (``retries`` bounds every call).
        request_timeout: seconds per request.
        settle_all: waits until every record produced so far is settled.
        admitted: waits until every record parked so far is batched.
        wake: wakes the sender.
        settled: called after records were failed here (frees buffer room).
    """

    def __init__(self, transactional_id: str, timeout: float, *, cluster: Cluster,
                 idempotence: Idempotence, accumulator: RecordAccumulator, outcomes: Outcomes,
                 tasks: Tasks, backoff: Backoff, request_timeout: float,
                 settle_all: Callable[[], Awaitable[None]],
                 admitted: Callable[[], Awaitable[None]], wake: Callable[[], None],
                 settled: Callable[[], None]) -> None:
        self.transactional_id = transactional_id
        self.timeout = timeout
        self._cluster = cluster
        self._idem = idempotence
        self._accumulator = accumulator
        self._outcomes = outcomes
        self._tasks = tasks
        self._backoff = backoff
        self._request_timeout = request_timeout
        self._settle_all = settle_all
        self._admitted = admitted
        self._wake = wake
        self._settled = settled
        idempotence.transactional_id = transactional_id
        idempotence.transaction_timeout_ms = max(1, round(timeout * 1000))
        idempotence.send_to = self._send_init
        #: Whether records may be produced now (a transaction is open and
        #: not doomed): the one attribute the producer's hot path reads.
        self.open = False
        self.state = _NONE
        #: Why the open transaction can only abort (``None``: it may commit).
        self.doomed: Optional[KielError] = None
        #: What made the producer unusable, raised again by every call.
        self.fatal: Optional[KielError] = None
        #: ``True`` (commit) or ``False`` (abort) while an EndTxn is under
        #: way or failed past its retries and must be retried with the same
        #: outcome.
        self._ending: Optional[bool] = None
        #: Why the last EndTxn failed past its retries (``None``: none did,
        #: or one is under way again).
        self._end_failed: Optional[KielError] = None
        self.added: set[TopicPartition] = set()
        self._offsets_groups: set[str] = set()
        self._adding: Optional[asyncio.Task[None]] = None
        self._expiring: Optional[asyncio.Task[None]] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._failed_at_begin = 0
        #: kiel's bound aborted the transaction: the next commit raises it.
        self._expired: Optional[TransactionTimeoutError] = None
        self._coordinator: Optional[int] = None
        #: Transactions committed and aborted (for tests and metrics).
        self.committed = self.aborted = 0

    # ------------------------------------------------------------------
    # checks

    def refuse(self, topic: Optional[str] = None) -> None:
        """Raise why no record may be produced now (the hot path calls this
        only when :attr:`open` is false).

        Raises:
            ProducerFencedError: (or the fatal error) the producer is unusable.
            TransactionStateError: no transaction is open, or it is ending
                or can only abort.
        """
        self._check_fatal()
        if self._expired is not None and self.state == _NONE:
            raise TransactionStateError(
                f"the transaction was aborted ({self._expired.message}): begin the next "
                "one; nothing was sent", topic=topic) from self._expired
        if self.doomed is not None:
            raise TransactionStateError(
                f"the transaction can only be aborted ({self.doomed}): call "
                "abort_transaction(); nothing was sent", topic=topic) from self.doomed
        if self.state == _ENDING:
            unfinished = self._unfinished()
            if unfinished is not None:
                raise TransactionStateError(
                    f"{unfinished}, then produce in the next transaction; nothing was sent",
                    topic=topic) from self._end_failed
            raise TransactionStateError(
                "the transaction is being committed or aborted: produce in the next one "
                "(begin_transaction()); nothing was sent", topic=topic)
        raise TransactionStateError(
            "a transactional producer produces only inside a transaction: call "
            "begin_transaction() first; nothing was sent", topic=topic)

    def _unfinished(self) -> Optional[str]:
        """What to do about an EndTxn that failed past its retries (``None``:
        none did)."""
        failed = self._end_failed
        if failed is None or self._ending is None:
            return None
        end = "commit" if self._ending else "abort"
        return (f"the transaction's {end} failed ({failed.message}): call "
                f"{end}_transaction() again to finish it")

    def _check_fatal(self) -> None:
        fatal = self.fatal
        if fatal is not None:
            raise type(fatal)(f"the producer cannot be used any more: {fatal.message}",
                              **fatal.context) from fatal

    def make_fatal(self, error: KielError) -> KielError:
        """Make the producer unusable for good because of ``error`` (a copy of
        which every later call raises); fencing codes become
        :class:`~kiel.exc.ProducerFencedError`.

        Returns:
            the error to raise or fail records with.
        """
        code = getattr(error, "errno", None)
        if code in FENCED_CODES and not isinstance(error, ProducerFencedError):
            error = ProducerFencedError(
                f"another producer with transactional id {self.transactional_id!r} took "
                f"over (the broker answered {type(error).__name__}): close this one",
                errno=code, **{k: v for k, v in error.context.items() if k != "errno"})
        if self.fatal is None:
            log.error("producer: transactional id %r: %s; the producer cannot be used any "
                      "more", self.transactional_id, error)
            self.fatal = error
        self.open = False
        self._cancel_timer()
        return error

    # ------------------------------------------------------------------
    # the coordinator

    async def _send_init(self, build: Callable[[Versions], Any], timeout: float) -> Any:
        """Send InitProducerId to the transactional id's coordinator (the
        idempotent producer's code builds it); a coordinator that moved is
        forgotten (the error is retriable, the sender retries)."""
        try:
            node = await self._find_coordinator()
            versions = await self._cluster.versions(node)
            response = await self._cluster.send(node, build(versions), timeout=timeout)
        except KielError as e:
            if e.retriable:
                self._coordinator = None
            raise
        code = response.error_code
        if code in COORDINATOR_MOVED:
            self._coordinator = None
        elif code in FENCED_CODES or code in FATAL_CODES:
            error_class = for_code(code)
            assert error_class is not None
            raise self.make_fatal(error_class(
                "InitProducerId refused", errno=code, api="InitProducerId"))
        return response

    async def _find_coordinator(self) -> int:
        """The transactional id's coordinator (FindCoordinator, key type 1), cached.

        Raises:
            BrokerError: the broker's answer (COORDINATOR_NOT_AVAILABLE: retriable).
            NoBrokersError: no broker answered.
        """
        if self._coordinator is not None and self._coordinator in self._cluster.brokers:
            return self._coordinator
        response = await self._cluster.send_any(self._coordinator_request,
                                                timeout=self._request_timeout)
        error_class = for_code(response.error_code)
        if error_class is not None:
            raise error_class(api="FindCoordinator", errno=response.error_code,
                              transactional_id=self.transactional_id)
        info = BrokerInfo(response.coordinator_id, response.host, response.port)
        if self._cluster.brokers.get(info.node_id) != info:
            self._cluster.brokers[info.node_id] = info
        self._coordinator = info.node_id
        return info.node_id

    def _coordinator_request(self, versions: Versions) -> Any:
        version = versions.get(GROUP_COORDINATOR) or 0
        if version >= 2:
            return FindCoordinatorRequestV2(self.transactional_id, KEY_TYPE_TRANSACTION)
        if version >= 1:
            return FindCoordinatorRequestV1(self.transactional_id, KEY_TYPE_TRANSACTION)
        raise UnsupportedFeatureError("transactions need FindCoordinator v1+ (Kafka 0.11+)",
                                      api="FindCoordinator")

    async def _call(self, api_key: int, build: Callable[[int], Any],
                    codes: Callable[[Any], list[int]], what: str,
                    group: Optional[str] = None) -> None:
        """Send a request to the transaction coordinator (or ``group``'s
        coordinator), retrying coordinator moves, CONCURRENT_TRANSACTIONS
        and retriable errors within the producer's retries.

        Args:
            api_key: the API (its version is negotiated with the coordinator).
            build: ``build(version) -> request``.
            codes: the error codes of an answer.
            what: the call, for messages.
            group: the consumer group whose coordinator gets it (TxnOffsetCommit).

        Raises:
            ProducerFencedError: fenced (the producer is now unusable), or
                the fatal error (authorization).
            BrokerError, NoBrokersError, KielConnectionError,
            RequestTimeoutError: a non-retriable answer, or retries ran out.
        """
        async for attempt in attempts(self._backoff, closed=self._cluster_closed):
            try:
                if group is None:
                    node = await self._find_coordinator()
                else:
                    node = await self._cluster.group_coordinator(group)
                version = (await self._cluster.versions(node)).of(api_key)
                response = await self._cluster.send(node, build(version),
                                                    timeout=self._request_timeout)
            except KielError as e:
                if not e.retriable:
                    raise
                if group is None:
                    self._coordinator = None
                log.info("producer: %s failed (%s); retrying", what, e)
                attempt.failed(e)
                continue
            code = _first_error(codes(response))
            if code == 0:
                return
            error_class = for_code(code)
            assert error_class is not None
            error = error_class(f"{what}: {error_class.__doc__}", errno=code, group=group,
                                transactional_id=self.transactional_id)
            if code in FENCED_CODES or code in FATAL_CODES:
                raise self.make_fatal(error)
            if code in COORDINATOR_MOVED and group is None:
                self._coordinator = None
            if not error.retriable:
                raise error
            log.info("producer: %s answered %s; retrying", what, error_class.__name__)
            attempt.failed(error)

    def _cluster_closed(self) -> bool:
        return self._cluster.closed

    # ------------------------------------------------------------------
    # the sender's hook: partitions join the transaction before their records go

    def partitions_added(self) -> bool:
        """Whether every partition with records waiting is in the
        transaction; if not, add them (in a task that wakes the sender once
        done) and answer ``False``: the sender sends nothing until then."""
        if self._adding is not None:
            return False
        added = self.added
        new = [queue.tp for queue in self._accumulator.queues()
               if queue.tp not in added and (queue.open is not None or queue.ready)]
        if not new:
            return True
        self._adding = self._tasks.spawn(self._add(sorted(new)), "add-partitions-to-txn",
                                         quiet=(KielError,))
        return False

    async def _add(self, tps: list[TopicPartition]) -> None:
        """AddPartitionsToTxn for ``tps``; on failure their records fail and
        the transaction can only abort (or the producer is fenced)."""
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        idem = self._idem

        def build(version: int) -> Any:
            return REQUESTS[ADD_PARTITIONS_TO_TXN][version](
                self.transactional_id, idem.producer_id, idem.producer_epoch,
                [AddPartitionsToTxnTopic(t, ps) for t, ps in topics.items()])

        def codes(response: Any) -> list[int]:
            answered = {(t.name, p.partition_index): p.partition_error_code
                        for t in response.results_by_topic_v3_and_below
                        for p in t.results_by_partition}
            # A partition left out of the answer was not added.
            return [answered.get(tp, 48) for tp in tps]

        try:
            await self._call(ADD_PARTITIONS_TO_TXN, build, codes, "AddPartitionsToTxn")
            self.added.update(tps)
        except KielError as e:
            error = e if self.fatal is not None else self._doom(e)
            self.drop_unsent(error, only=set(tps))
        finally:
            self._adding = None
            self._wake()

    # ------------------------------------------------------------------
    # the transaction

    def begin(self) -> None:
        """Open a transaction (local: nothing is sent until a record or
        offsets are).

        Raises:
            ProducerFencedError: the producer is unusable.
            TransactionStateError: a transaction is open or ending.
        """
        self._check_fatal()
        unfinished = self._unfinished()
        if unfinished is not None:
            raise TransactionStateError(f"{unfinished} before beginning the next") \
                from self._end_failed
        if self.state != _NONE:
            raise TransactionStateError(
                "a transaction is already open (or ending): commit or abort it before "
                "beginning the next")
        if self._idem.producer_id < 0:
            raise TransactionStateError(
                "the transactional producer has no producer id: await connect() first")
        self.state = _OPEN
        self.open = True
        self.doomed = self._expired = None
        self.added = set()
        self._offsets_groups = set()
        self._failed_at_begin = self._outcomes.failed_total
        self._timer = asyncio.get_running_loop().call_later(self.timeout, self._expire)

    def _expire(self) -> None:
        """kiel's bound: the transaction stayed open past ``transaction_timeout``."""
        self._timer = None
        if self.state != _OPEN or self.fatal is not None:
            return
        self._expired = TransactionTimeoutError(
            f"the transaction was open longer than transaction_timeout={self.timeout}s: "
            "the producer aborted it")
        self._doom(self._expired)
        log.warning("producer: transactional id %r: transaction open past %ss; aborting it",
                    self.transactional_id, self.timeout)
        self._expiring = self._tasks.spawn(self._abort(), "transaction-timeout",
                                           quiet=(KielError,))

    def _doom(self, error: KielError) -> KielError:
        if self.doomed is None:
            self.doomed = error
        self.open = False
        return error

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _require(self, action: str) -> None:
        self._check_fatal()
        if self.state == _NONE:
            raise TransactionStateError(f"{action}: no transaction is open "
                                        "(begin_transaction() first)")

    async def send_offsets(self, offsets: Mapping[Any, int], group_metadata: Any) -> None:
        """Commit ``offsets`` of ``group_metadata``'s group with the transaction.

        Raises:
            ConfigError: malformed offsets or group metadata.
            TransactionStateError: no transaction open, or it can only abort.
            ProducerFencedError: fenced.
            GroupError: the group refused the commit (a member no longer in
                the generation: IllegalGenerationError, UnknownMemberIdError,
                FencedInstanceIdError); the transaction can only abort.
            BrokerError, NoBrokersError: as for the other calls.
        """
        self._require("send_offsets_to_transaction")
        if self.state != _OPEN or self.doomed is not None:
            self.refuse()
        if isinstance(group_metadata, str):
            group_metadata = GroupMetadata(group_metadata)
        if not isinstance(group_metadata, GroupMetadata):
            raise ConfigError("group_metadata must be a GroupMetadata "
                              f"(GroupedConsumer.group_metadata()), got {group_metadata!r}")
        _options.text("group_metadata.group_id", group_metadata.group_id)
        by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
        if not isinstance(offsets, Mapping):
            raise ConfigError(f"offsets must be a mapping {{(topic, partition): offset}}, "
                              f"got {offsets!r}")
        for key, offset in offsets.items():
            if (not isinstance(key, tuple) or len(key) != 2 or type(key[0]) is not str
                    or not key[0] or type(key[1]) is not int or key[1] < 0):
                raise ConfigError(f"offsets keys must be (topic, partition), got {key!r}")
            _options.integer(f"offset of {key[0]}/{key[1]}", offset)
            by_topic.setdefault(key[0], []).append(
                TxnOffsetCommitRequestPartition(key[1], offset))
        if not by_topic:
            return
        idem = self._idem
        group = group_metadata.group_id
        try:
            if group not in self._offsets_groups:
                await self._call(
                    ADD_OFFSETS_TO_TXN,
                    lambda v: REQUESTS[ADD_OFFSETS_TO_TXN][v](
                        self.transactional_id, idem.producer_id, idem.producer_epoch, group),
                    lambda r: [r.error_code], "AddOffsetsToTxn")
                self._offsets_groups.add(group)
            topics = [TxnOffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()]
            await self._call(
                TXN_OFFSET_COMMIT,
                lambda v: REQUESTS[TXN_OFFSET_COMMIT][v](
                    self.transactional_id, group, idem.producer_id, idem.producer_epoch,
                    group_metadata.generation_id, group_metadata.member_id,
                    group_metadata.group_instance_id, topics),
                lambda r: [p.error_code for t in r.topics for p in t.partitions],
                "TxnOffsetCommit", group=group)
        except KielError as e:
            if self.fatal is None:
                self._doom(e)
            raise

    async def commit(self) -> None:
        """Send every record of the transaction, then commit it (EndTxn).

        Raises:
            TransactionStateError: no transaction open.
            TransactionTimeoutError: kiel aborted it (open past
                ``transaction_timeout``).
            TransactionAbortedError: a record of it failed or its offsets
                were refused: it was aborted now.
            ProducerFencedError: fenced (unusable from now on).
            BrokerError, NoBrokersError, KielConnectionError,
            RequestTimeoutError: EndTxn failed past its retries; the
                outcome is unknown: call :meth:`commit` again.
        """
        self._check_fatal()
        expired = self._expired
        if expired is not None:
            self._expired = None
            if self.state != _NONE:
                await self.abort()  # finish what kiel's bound started
            raise TransactionTimeoutError(expired.message) from expired
        self._require("commit_transaction")
        if self._ending is False:
            raise TransactionStateError("the transaction is being aborted: call "
                                        "abort_transaction() again to finish it")
        if self.doomed is not None:
            doomed = self.doomed
            await self.abort()
            if isinstance(doomed, TransactionAbortedError):
                raise type(doomed)(doomed.message) from doomed
            raise TransactionAbortedError(
                f"the transaction was aborted, not committed: {doomed}") from doomed
        self.state, self.open, self._ending = _ENDING, False, True
        self._cancel_timer()
        await self._settle_all()
        self._check_fatal()
        failed = self._outcomes.failed_total - self._failed_at_begin
        if failed:
            self.state = _OPEN
            self._ending = None
            self._doom(TransactionAbortedError(
                f"{failed} record(s) of the transaction failed (see their futures or "
                "flush())"))
            await self.commit()  # aborts and raises
            return
        await self._end(True)

    async def abort(self) -> None:
        """Abort the transaction: records not sent yet fail with
        :class:`~kiel.exc.TransactionAbortedError`, the ones out settle,
        then EndTxn (abort).

        Raises:
            TransactionStateError: no transaction open, or its commit is
                under way.
            ProducerFencedError: fenced.
            BrokerError, NoBrokersError: EndTxn failed past its retries:
                call :meth:`abort` again.
        """
        self._check_fatal()
        if self._expired is not None and self.state == _NONE:
            self._expired = None  # kiel's bound aborted it already
            return
        self._require("abort_transaction")
        if self._ending is True:
            raise TransactionStateError("the transaction's commit was sent and not "
                                        "confirmed: call commit_transaction() again")
        expiring = self._expiring
        if expiring is not None:
            # kiel's bound aborted (or is aborting) it: wait for that.
            self._expiring = None
            try:
                await expiring
            except KielError:
                pass  # the state says what is left to do
            if self.state == _NONE:
                return
            self._check_fatal()
        await self._abort()

    async def _abort(self) -> None:
        self.state, self.open, self._ending = _ENDING, False, False
        self._cancel_timer()
        await self._admitted()  # records waiting for metadata are dropped too
        self.drop_unsent(TransactionAbortedError(
            "the transaction was aborted before the record was sent"))
        await self._settle_all()
        self._check_fatal()
        await self._end(False)

    async def _end(self, commit: bool) -> None:
        """EndTxn; the transaction is over when it succeeds (or when nothing
        of it reached the broker)."""
        adding = self._adding
        if adding is not None:
            # An AddPartitionsToTxn still out belongs to this transaction:
            # let it settle first, or its partitions would count as added
            # to the next one.
            await asyncio.wait([adding])
        if self.added or self._offsets_groups:
            idem = self._idem
            self._end_failed = None
            try:
                await self._call(
                    END_TXN,
                    lambda v: REQUESTS[END_TXN][v](self.transactional_id, idem.producer_id,
                                                   idem.producer_epoch, commit),
                    lambda r: [r.error_code], "EndTxn (commit)" if commit else "EndTxn (abort)")
            except KielError as e:
                if self.fatal is not None:
                    raise
                # Past the retries: the transaction stays ending, and the
                # error says how to finish it (the same call again).
                self._end_failed = e
                again = "commit_transaction()" if commit else "abort_transaction()"
                raise type(e)(f"{e.message} (retries ran out; the transaction is not "
                              f"finished: call {again} again)", **e.context) from e
        if commit:
            self.committed += 1
        else:
            self.aborted += 1
        self.state, self.open, self._ending, self.doomed = _NONE, False, None, None
        self.added = set()
        self._offsets_groups = set()

    def drop_unsent(self, error: KielError,
                    only: Optional[set[TopicPartition]] = None) -> int:
        """Fail the records not sent yet (of ``only``'s partitions, or all)
        with ``error``: batches never numbered (a numbered one may be a
        retry of an attempt the broker wrote; it goes, and the abort
        marker covers it).

        Returns:
            how many records failed.
        """
        accumulator = self._accumulator
        fail = self._outcomes.fail
        count = 0
        for queue in accumulator.queues():
            tp = queue.tp
            if only is not None and tp not in only:
                continue
            # A completed batch left in ``ready`` is skipped when drained.
            dropped = [batch for batch in queue.ready
                       if batch.base_sequence < 0 and not batch.done]
            if queue.open is not None and queue.open.base_sequence < 0:
                dropped.append(queue.open)
            for batch in dropped:
                for future in accumulator.complete(batch):
                    fail(future, type(error)(error.message, topic=tp.topic,
                                             partition=tp.partition), tp.topic, tp.partition)
                    count += 1
        if count:
            self._settled()
        return count

    async def close(self, timeout: Optional[float]) -> None:
        """At the producer's close: abort an open transaction, within
        ``timeout`` (``None``: twice the request timeout). Never raises:
        the close goes on (the coordinator aborts what is left when the
        next instance initialises)."""
        if self.fatal is not None or self.state == _NONE:
            return
        bound = 2 * self._request_timeout if timeout is None else timeout
        try:
            await within(self.abort(), bound)
        except (KielError, asyncio.TimeoutError) as e:
            log.warning("producer: transactional id %r: aborting the open transaction at "
                        "close failed (%s); the next producer with this id aborts it",
                        self.transactional_id, e)

    def numbering_refused(self, error: KielError) -> KielError:
        """The broker refused this producer's numbering inside a transaction
        (the sender's hook): a transactional producer does not take a new
        identity on its own (it would fence the instance that fenced it), so
        it is unusable from now on.

        Returns:
            the error the records fail with.
        """
        return self.make_fatal(error)
