"""What a grouped consumer does when the partitions it owns change.

:class:`ConsumerHooks` is the :class:`~kiel.consumer.membership.PartitionHooks`
that :class:`~kiel.consumer.grouped.GroupedConsumer` gives its
:class:`~kiel.consumer.membership.Membership` (ZooKeeper's or the brokers'):
an acquired partition gets the listener, then its committed offset (read
from the coordinator, or where the membership keeps others, such as the 0.8
broker's znodes) and fetching; a revoked one stops fetching, waits for the
records in the application's hands, gets the listener, then its commit; a
lost one stops fetching with no commit. A suspension (the membership's
connection lost for now) stops all fetching at once until it is back.

The hooks also time each rebalance for the consumer's ``rebalances``
counters: the membership says when one begins and ends, the hooks note
when partitions stop fetching and which are assigned
(:class:`~kiel.metrics.RebalanceClock`).
"""

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Optional, Protocol

from kiel.cluster import Cluster
from kiel.consumer.commits import MOVED_ON, Commits
from kiel.consumer.listener import call_listener
from kiel.consumer.membership import PartitionHooks
from kiel.consumer.offsets import EARLIEST, LATEST, GroupOffsets, list_offsets
from kiel.consumer.subscription import Status, Subscription
from kiel.exc import KielError, OffsetResetError
from kiel.metrics import Rebalance, RebalanceClock, RebalanceCounters
from kiel.structs import TopicPartition

if TYPE_CHECKING:
    from kiel.consumer.membership import Membership

__all__ = ["ConsumerHooks", "HookedConsumer"]

log = logging.getLogger(__name__)


class HookedConsumer(Protocol):
    """What the hooks read of their consumer: its public settings and parts.

    Read when a hook runs, not copied: the membership comes with
    ``connect()``, and settings changed after construction apply.
    """

    @property
    def group(self) -> str: ...
    @property
    def cluster(self) -> Cluster: ...
    @property
    def subscription(self) -> Subscription: ...
    @property
    def membership(self) -> "Optional[Membership]": ...
    @property
    def listener(self) -> Any: ...
    @property
    def listener_timeout(self) -> float: ...
    @property
    def revoke_timeout(self) -> float: ...
    @property
    def offset_reset(self) -> str: ...
    @property
    def isolation_level(self) -> str: ...
    @property
    def rebalances(self) -> RebalanceCounters: ...


class ConsumerHooks(PartitionHooks):
    """What this member does when the partitions it owns change.

    The consumer's :class:`~kiel.consumer.membership.Membership` awaits these on the loop:
    an acquired partition gets the listener, then its committed offset and
    fetching; a revoked one stops fetching, waits for the records in the
    application's hands, gets the listener, then its commit.

    Args:
        consumer: the consumer whose settings, subscription and listener these use.
        commits: the owned partitions' hand-out bookkeeping and commits.
        offsets: reads the group's committed offsets.
        errors: where errors are kept for the application's next ``consume()``.
        reclaim: takes back what ``stream()`` loops have not yielded of the
            given partitions (``None``: all) and seeks them back to it.
        waited: whether ``close()`` already waited for the records in the
            application's hands (a revocation then waits no longer: what is
            still held past ``revoke_timeout`` is delivered again).
    """

    def __init__(
        self,
        consumer: HookedConsumer,
        *,
        commits: Commits,
        offsets: GroupOffsets,
        errors: "deque[BaseException]",
        reclaim: Callable[[Optional[Iterable[TopicPartition]]], None],
        waited: Callable[[], bool],
    ) -> None:
        self.consumer = consumer
        self._commits = commits
        self._offsets = offsets
        self._errors = errors
        #: The owned partitions' records (revoking, paused, what is in hand).
        self._state = commits.held
        self._reclaim = reclaim
        self._waited = waited
        #: Times the rebalances for the consumer's ``rebalances`` counters.
        self._clock = RebalanceClock()

    async def assigned(self, partitions: Sequence[tuple[str, int]]) -> None:
        tps = _partitions(partitions)
        self._clock.assigned(tps)
        for tp in tps:
            self._commits.own(tp)
        try:
            await self._listen("on_partitions_assigned", tps)
        finally:
            await self.start(tps)

    async def revoked(self, partitions: Sequence[tuple[str, int]]) -> None:
        tps = _partitions(partitions)
        self._clock.stopped(time.monotonic(), tps)
        commits = self._commits
        for tp in tps:
            part = self._state.get(tp)
            if part is not None:
                part.revoking = True
        self._stop(tps)
        held = await commits.wait_finished(tps, self.consumer.revoke_timeout, self._waited)
        if held and not self._waited():
            log.warning(
                "revoke_timeout: %s still in the application's hands; the next owner "
                "gets them again", held,
            )
        if not commits.may_commit():
            # The group moved on while the application finished its records
            # (a coordinator that did not wait for this member, a session or
            # a connection gone meanwhile): another member may own them now,
            # so they are lost, not revoked, and nothing is committed.
            log.warning("%s may belong to another member now (the group moved on while "
                        "they were being revoked): lost, not revoked", tps)
            for tp in tps:
                commits.forget(tp)
            await self._listen("on_partitions_lost", tps)
            return
        try:
            await self._listen("on_partitions_revoked", tps)
        finally:
            try:
                await commits.commit(tps)
            except MOVED_ON as e:
                # The group moved on while the application finished its
                # records, unseen by this member's own clock (its coordinator
                # did not wait the rebalance timeout out): the listener heard
                # "revoked" already; the next owner delivers again.
                commits.moved_on(e, f"committing {tps} on revocation")
            except KielError as e:
                # The commit's own retries are spent: release anyway (holding
                # on would stall the group). The next owner starts from the
                # last committed offset: duplicates, never loss.
                log.error("committing %s on revocation failed: %s; the next owner "
                          "delivers again from the last commit", tps, e)
                self._errors.append(e)
            for tp in tps:
                commits.forget(tp)  # its revoking mark goes with it

    def in_hand(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        state = self._state
        return [tp for tp in partitions if tp in state and state[tp].in_hand]

    async def lost(self, partitions: Sequence[tuple[str, int]]) -> None:
        tps = _partitions(partitions)
        self._clock.stopped(time.monotonic(), tps, lost=True)
        self._stop(tps)
        for tp in tps:
            self._commits.forget(tp)
        await self._listen("on_partitions_lost", tps)

    async def _listen(self, name: str, tps: list[TopicPartition]) -> None:
        """The listener's ``name`` callback, bounded by ``listener_timeout``."""
        consumer = self.consumer
        await call_listener(
            consumer.listener, name, tps, self._errors, consumer.listener_timeout
        )

    def rebalance_began(self, fresh: bool = False) -> None:
        self._clock.began(time.monotonic(), fresh)

    def rebalance_ended(self) -> Optional[Rebalance]:
        moved = self._clock.ended(time.monotonic())
        if moved is not None:
            self.consumer.rebalances.observe(moved.seconds)
        return moved

    @property
    def suspended(self) -> bool:
        """Whether the membership's connection is suspended: nothing is fetched."""
        return self.consumer.subscription.suspended

    def suspend(self) -> None:
        """Stop fetching at once; drop fetched, undelivered records (positions kept)."""
        self._reclaim(None)
        self.consumer.subscription.suspend()

    def resume(self) -> None:
        # The partitions the application paused stay paused: their records say so.
        self.consumer.subscription.unsuspend()

    def _stop(self, tps: list[TopicPartition]) -> None:
        self._reclaim(tps)  # nothing of theirs is yielded any more
        subscription = self.consumer.subscription
        for tp in tps:
            subscription.unassign(tp)
            record = self._state.record(tp)
            if record is not None:
                record.paused = False  # a pause ends with the ownership

    async def start(self, tps: list[TopicPartition]) -> None:
        """Committed offset (or the reset policy) -> fetching.

        Errors are kept for ``consume()``; the partitions await their start
        (``consume()`` tries again) until it works.
        """
        subscription = self.consumer.subscription
        commits = self._commits
        state = self._state
        tps = [tp for tp in tps if tp in state and not state.is_revoking(tp)]
        for tp in tps:
            subscription.assign(tp)  # awaiting its start (a started one stays as it is)
        tps = [tp for tp in tps if subscription.status(tp) is Status.AWAITING_RESET]
        if not tps:
            return
        generations = {tp: state.generation(tp) for tp in tps}
        try:
            committed, starts = await self._starts(tps)
        except KielError as e:
            log.warning("starting %s failed (%s); consume() retries", tps, e)
            self._errors.append(e)
            return
        for tp in tps:
            offset = starts.get(tp)
            if (
                offset is None
                or state.is_revoking(tp)
                or state.generation(tp) != generations[tp]
                or subscription.status(tp) is not Status.AWAITING_RESET
            ):
                continue
            commits.start(tp, offset, committed.get(tp))
            # Fetched unless its record says otherwise (paused, suspended).
            subscription.seek(tp, offset)

    async def _starts(
        self, tps: list[TopicPartition]
    ) -> tuple[dict[TopicPartition, Optional[int]], dict[TopicPartition, int]]:
        """The committed offsets of ``tps``, and where each starts.

        A partition without a committed offset starts where ``offset_reset``
        says; with ``"raise"`` it is left unstarted (owned, not fetched, until
        ``seek()``) and :class:`~kiel.exc.OffsetResetError` is kept for
        ``consume()``.

        Raises:
            KielError: the offsets could not be read or resolved.
        """
        consumer = self.consumer
        cluster = consumer.cluster
        unknown = sorted({tp.topic for tp in tps} - set(cluster.partitions))
        if unknown:
            await cluster.refresh_metadata(unknown)
        committed = await self._offsets.fetch(tps)
        unsure = sorted(tp for tp in tps if committed.get(tp) is None)
        if unsure:
            committed.update(await self._stored_offsets(unsure))
        starts = {tp: o for tp, o in committed.items() if o is not None}
        missing = sorted(tp for tp in tps if committed.get(tp) is None)
        if missing and consumer.offset_reset == "raise":
            for tp in missing:
                if consumer.subscription.status(tp) is Status.AWAITING_RESET:
                    consumer.subscription.unassign(tp)
            self._errors.append(
                OffsetResetError(
                    f"no committed offset for {missing} and offset_reset='raise'",
                    group=consumer.group, topic=missing[0].topic, partition=missing[0].partition,
                )
            )
        elif missing:
            when = EARLIEST if consumer.offset_reset == "earliest" else LATEST
            await cluster.maybe_refresh()
            committed_only = consumer.isolation_level == "read_committed"
            starts.update(await list_offsets(cluster, {tp: when for tp in missing},
                                             read_committed=committed_only))
        return committed, starts

    async def _stored_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The offsets the group keeps outside the coordinator's answer, where it keeps any.

        Strategy: a 0.8.2 coordinator answers UnknownTopicOrPartition (with
        offset -1) both for "never committed" and for a topic it has not
        learnt about yet, and ``offset_reset="latest"`` would then skip (and
        commit) past what was never consumed. The membership knows where else
        the group's commits are (a ZooKeeper group: the 0.8 broker's znodes)
        and reads them unambiguously; a broker group has nowhere else.

        Raises:
            KielError: they could not be read (``consume()`` tries again).
        """
        membership = self.consumer.membership
        if membership is None:
            return {}
        return await membership.stored_offsets(tps)


def _partitions(partitions: Sequence[tuple[str, int]]) -> list[TopicPartition]:
    # Memberships hand TopicPartitions (plain (topic, partition) tuples before
    # kiel.zookeeper moved to kiel.structs); TopicPartition(*tp) takes both.
    return [TopicPartition(*tp) for tp in partitions]
