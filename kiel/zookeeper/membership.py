"""The ZooKeeper group behind the consumer's :class:`~kiel.consumer.membership.Membership`.

:class:`ZooKeeperMembership` is the adapter a
:class:`~kiel.consumer.grouped.GroupedConsumer` given ``zk_hosts`` uses: it
starts a ZooKeeper session, learns where the partition counts come from
(``/brokers/topics`` where 0.8 brokers register, else the brokers'
metadata), and runs a :class:`~kiel.zookeeper.group.GroupMember` that drives
the consumer's hooks. Its settings are a :class:`ZooKeeperSettings`, checked
once when the consumer is built.
"""

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Optional, Union

from kazoo.exceptions import KazooException, NoNodeError

from kiel._aio import within
from kiel._options import real, text
from kiel.allocators import Allocator, get_allocator, weighted
from kiel.consumer.membership import GroupContext
from kiel.consumer.partition_counts import MetadataCounts
from kiel.exc import ConfigError, ZooKeeperError
from kiel.structs import TopicPartition
from kiel.zookeeper.client import ZooKeeper, digest_acls, translate
from kiel.zookeeper.group import GroupMember
from kiel.zookeeper.legacy import LegacyGate, wait_for_legacy_members, watch_legacy_members

__all__ = ["SOURCES", "ZooKeeperMembership", "ZooKeeperSettings", "brokers_registered"]

log = logging.getLogger(__name__)

#: The values of ``GroupedConsumer(partitions_from=...)``.
SOURCES = ("auto", "zookeeper", "metadata")


@dataclass(frozen=True)
class ZooKeeperSettings:
    """A ZooKeeper group's settings: the consumer's keywords of the same names.

    Checked once, when built (see :meth:`check`); the consumer's docstring
    says what each means.
    """

    zk_hosts: str
    allocator: Any = None
    zk_session_timeout: float = 10.0
    zk_chroot: Optional[str] = None
    zk_max_retry_delay: float = 5.0
    zk_connect_timeout: float = 15.0
    partitions_from: str = "auto"
    zk_auth: Optional[str] = None
    acquire_timeout: float = 30.0
    member_id: Optional[str] = None
    capacity: float = 1.0
    join_timeout: float = 60.0
    leave_timeout: float = 10.0

    def __post_init__(self) -> None:
        self.check()

    def __repr__(self) -> str:
        # The digest password stays out of logs and tracebacks.
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.zk_auth:
            shown["zk_auth"] = self.zk_auth.split(":", 1)[0] + ":***"
        return "ZooKeeperSettings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    def check(self) -> None:
        """Refuse a bad setting.

        Raises:
            ConfigError: a bad setting, named with the consumer's keyword.
        """
        _check_hosts(self.zk_hosts)
        for name in ("zk_session_timeout", "acquire_timeout", "leave_timeout",
                     "zk_max_retry_delay"):
            _seconds(name, getattr(self, name), allow_zero=True)
        for name in ("zk_connect_timeout", "join_timeout"):
            _seconds(name, getattr(self, name), allow_zero=False)
        if self.zk_session_timeout > 3600:
            value = self.zk_session_timeout
            raise ConfigError(f"zk_session_timeout is in seconds: {value!r} is over an hour "
                              f"({value!r} ms would be {value / 1000:g} s)")
        if not 0 < self.zk_max_retry_delay < 3600:
            raise ConfigError(
                f"zk_max_retry_delay must be seconds in (0, 3600), got {self.zk_max_retry_delay!r}"
            )
        if self.zk_chroot is not None and not text("zk_chroot", self.zk_chroot).startswith("/"):
            raise ConfigError(f"zk_chroot must start with '/', got {self.zk_chroot!r}")
        if not isinstance(self.partitions_from, str) or self.partitions_from not in SOURCES:
            raise ConfigError(f"partitions_from must be one of {', '.join(SOURCES)}, "
                              f"got {self.partitions_from!r}")
        if self.zk_auth is not None:
            if not isinstance(self.zk_auth, str):
                raise ConfigError("zk_auth must be 'user:password', got a "
                                  f"{type(self.zk_auth).__name__}")
            digest_acls(self.zk_auth)  # raises ConfigError for a bad "user:password"
        real("capacity", self.capacity, above=0, unit="a number")
        if self.member_id is not None:
            text("member_id", self.member_id)
        allocator_of(self.allocator)  # raises ConfigError for an unknown name

    def zookeeper(self) -> ZooKeeper:
        """A ZooKeeper session with these settings, not started yet."""
        return ZooKeeper(
            self.zk_hosts, session_timeout=self.zk_session_timeout, chroot=self.zk_chroot,
            auth=self.zk_auth, max_retry_delay=self.zk_max_retry_delay,
            connect_timeout=self.zk_connect_timeout,
        )


def allocator_of(
    setting: Union[str, Callable[..., Any], None]
) -> tuple[Allocator, Optional[dict[str, float]]]:
    """The allocator function for a setting (``None``: ``"round_robin"``), and
    for ``"weighted"`` the dict of members' capacities it reads (the
    GroupMember fills it before each allocation).

    Raises:
        ConfigError: an unknown allocator name, or a list (a preference list
            is for a group the brokers coordinate: every ZooKeeper member
            runs the one allocator itself).
    """
    if setting is None:
        setting = "round_robin"
    if isinstance(setting, (list, tuple)):
        raise ConfigError("allocator: a preference list is for a group the brokers "
                          "coordinate; a ZooKeeper group's members all run one allocator")
    if isinstance(setting, str) and setting.lower() == "weighted":
        capacities: dict[str, float] = {}
        return weighted(capacities.get), capacities
    return get_allocator(setting), None


def _check_hosts(hosts: Any) -> None:
    """Refuse a ``zk_hosts`` that is not ``"host:port[,host:port...][/chroot]"``.

    Raises:
        ConfigError: it is not (kiel 0.9 took a list: join it with commas).
    """
    if isinstance(hosts, (list, tuple)):
        raise ConfigError("zk_hosts is one string 'host:port,host:port[/chroot]' "
                          f"(kiel 0.9 took a list): write {','.join(map(str, hosts))!r}")
    if not isinstance(hosts, str) or not hosts:
        raise ConfigError(f"zk_hosts must be 'host:port[,...][/chroot]', got {hosts!r}")
    servers, _, _ = hosts.partition("/")
    for server in servers.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not server.strip() or (sep and (not host or not port.isdigit()
                                           or not 0 < int(port) < 65536)):
            raise ConfigError(f"zk_hosts: {server!r} in {hosts!r} is not 'host:port'")


def _seconds(name: str, value: Any, allow_zero: bool) -> None:
    if allow_zero:
        real(name, value, at_least=0)
    else:
        real(name, value, above=0)


async def brokers_registered(zk: ZooKeeper) -> bool:
    """Whether brokers register in this ZooKeeper (``/brokers/ids`` has children).

    Raises:
        ZooKeeperError: ZooKeeper failed.
    """
    try:
        return bool(await zk.get_children("/brokers/ids"))
    except NoNodeError:
        return False
    except KazooException as e:
        raise translate(e, "reading /brokers/ids") from e


class ZooKeeperMembership:
    """A member of a group kept in ZooKeeper (Kafka 0.8's layout).

    Args:
        context: what the consumer gives every membership.
        settings: the checked ZooKeeper settings.
    """

    #: The consumer keywords this adapter reads (the shared ones included).
    OPTIONS = tuple(f.name for f in fields(ZooKeeperSettings))

    @classmethod
    def settings_for(cls, options: Mapping[str, Any]) -> ZooKeeperSettings:
        """Check the options given (the others keep their defaults).

        Raises:
            ConfigError: a bad setting, or one this adapter does not read.
        """
        unknown = sorted(set(options) - set(cls.OPTIONS))
        if unknown:
            raise ConfigError(
                f"{', '.join(unknown)}: only for a group coordinated by the brokers "
                "(leave zk_hosts out to use one)"
            )
        return ZooKeeperSettings(**options)

    def __init__(self, context: GroupContext, settings: ZooKeeperSettings) -> None:
        self.context = context
        self.settings = settings
        self.zk: Optional[ZooKeeper] = None
        self.member: Optional[GroupMember] = None
        #: The consumer's hooks as the member sees them: held while kiel 0.9
        #: members are live (see kiel.zookeeper.legacy).
        self.gate = LegacyGate(context.hooks)
        self._watching: Optional[asyncio.Future[None]] = None

    @property
    def member_id(self) -> Optional[str]:
        """The member's id (``<host>-<pid>-<random>`` unless the settings name one)."""
        return self.member.member_id if self.member is not None else self.settings.member_id

    @property
    def failure(self) -> Optional[BaseException]:
        return self.member.failure if self.member is not None else None

    @failure.setter
    def failure(self, value: Optional[BaseException]) -> None:
        if self.member is not None:
            self.member.failure = value

    async def join(self) -> None:
        """Start ZooKeeper, find the offsets coordinator, register and take the first allocation.

        ZooKeeper starts in an executor: the IOLoop keeps serving meanwhile.

        Raises:
            ZooKeeperError: ZooKeeper could not be reached (then nothing is
                left running: joining again makes a fresh session).
            LegacyGroupError: kiel 0.9 members of the group stayed live
                through ``join_timeout`` (nothing was registered).
            GroupError: the first allocation did not settle within ``join_timeout``.
        """
        zk = self.zk = self.settings.zookeeper()
        try:
            await zk.start()
        except BaseException:
            # start() freed kazoo's threads; nothing is left to stop.
            self.zk = None
            raise
        try:
            await self.context.offsets.coordinator()
            await self._enter(zk)
        except BaseException:
            await zk.stop()
            raise

    async def _enter(self, zk: ZooKeeper) -> None:
        """Learn where the partition counts come from, then join as a GroupMember.

        Raises:
            LegacyGroupError: kiel 0.9 members of the group stayed live
                through ``join_timeout``.
            GroupError: the first allocation did not settle within ``join_timeout``.
            kazoo.exceptions.KazooException, ZooKeeperError: ZooKeeper failed.
        """
        settings, context = self.settings, self.context
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.join_timeout
        # Never beside kiel 0.9 members: they cannot see this one (legacy.py).
        await wait_for_legacy_members(zk, context.group, settings.join_timeout)
        from_zookeeper = settings.partitions_from == "zookeeper" or (
            settings.partitions_from == "auto" and await brokers_registered(zk)
        )
        allocator, capacities = allocator_of(settings.allocator)
        member = self.member = GroupMember(
            zk, context.group, context.topics, hooks=self.gate,
            allocator=allocator, member_id=self.member_id,
            capacity=settings.capacity, acquire_timeout=settings.acquire_timeout,
            leave_timeout=settings.leave_timeout, topics_from_zookeeper=from_zookeeper,
        )
        member.capacities = capacities  # "weighted" reads them; None otherwise
        if not from_zookeeper:
            wanted = context.topics
            counts = MetadataCounts(context.cluster, wanted if isinstance(wanted, list) else None)
            member.set_partition_counts(await counts.read())
            context.tasks.spawn(
                counts.follow(member.set_partition_counts, context.cluster.metadata_max_age),
                "partition counts",
            )
        # One join_timeout for the whole join, the wait for 0.9 members included.
        await member.join(timeout=max(0.0, deadline - loop.time()))
        # And a 0.9 member started later is not consumed beside either.
        self._watching = context.tasks.spawn(
            watch_legacy_members(zk, context.group, self.gate, self._fail), "kiel 0.9 members")

    def _fail(self, error: BaseException) -> None:
        """Keep ``error`` for the consumer's next call."""
        if self.member is not None:
            self.member.failure = error

    async def leave(self) -> None:
        """Revoke, commit and release everything, deregister: bounded by ``leave_timeout``."""
        if self._watching is not None:
            self._watching.cancel()  # the session ends next: nothing more to watch
        if self.member is not None:
            await self.member.leave()

    async def close(self) -> None:
        """Stop the ZooKeeper session (its ephemeral znodes go with it).

        Raises:
            ZooKeeperError: stopping failed (the session ends on the server anyway).
        """
        if self.zk is not None:
            await self.zk.stop()

    def may_commit(self) -> bool:
        """Connected, under the session the member registered with, and no
        kiel 0.9 member live (its commits would be overwritten with older ones)."""
        return self.member is not None and self.member.may_commit() and not self.gate.held

    def poll(self) -> None:
        """Nothing: a ZooKeeper group has no poll deadline (its session is kazoo's)."""

    async def stored_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The offsets a 0.8 broker stored for ``tps`` in ZooKeeper, where there are any.

        A v0 commit is a znode ``/consumers/<group>/offsets/<topic>/<partition>``:
        read through our own session, a missing znode is an unambiguous
        "none" (brokers that keep offsets elsewhere have no such znode).

        Raises:
            ZooKeeperError: ZooKeeper failed or did not answer within the
                request timeout.
        """
        zk = self.zk
        found: dict[TopicPartition, int] = {}
        if zk is None:
            return found
        group, timeout = self.context.group, self.context.cluster.request_timeout
        for tp in tps:
            path = f"/consumers/{group}/offsets/{tp.topic}/{tp.partition}"
            try:
                data, _ = await within(zk.get(path), timeout)
            except NoNodeError:
                continue
            except asyncio.TimeoutError as e:
                raise ZooKeeperError(f"reading {path} timed out", group=group) from e
            except KazooException as e:
                raise translate(e, f"reading {path}") from e
            try:
                found[tp] = int(data.decode())
            except (ValueError, UnicodeDecodeError) as e:
                raise ZooKeeperError(f"{path} holds no offset: {data[:40]!r}", group=group) from e
        return found

    def metrics(self) -> dict[str, Any]:
        """kazoo's connection state (``NOT_STARTED`` before the first join)."""
        return {"zookeeper_state": "NOT_STARTED" if self.zk is None else str(self.zk.client.state)}
