"""A group kept in ZooKeeper (Kafka 0.8's way) as a grouped consumer's coordinator object.

:class:`ZooKeeperGroup` is what an application passes as
``GroupedConsumer(..., coordinator=ZooKeeperGroup(hosts="zk1:2181"))``: the
group's settings, checked once when built;
:class:`~kiel.zookeeper.membership.ZooKeeperMembership` joins with them.
:class:`ZooKeeperGroupMetrics` is its typed part of the consumer's metrics.

Strategy: this module does not import kazoo (nor :mod:`kiel.zookeeper.client`,
which does) at import, so naming the class (``from kiel import
ZooKeeperGroup``, :mod:`kiel.admin`) stays light; a ZooKeeper session is made
only when a member joins.
"""

from collections.abc import Callable, Iterator, Mapping
from dataclasses import InitVar, dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Optional, Union

from kiel._options import real, text
from kiel.allocators import Allocator, get_allocator, weighted
from kiel.consumer.membership import SHARED_KEYWORDS, GroupCoordinator, Membership
from kiel.exc import ConfigError
from kiel.metrics import GroupMetrics, Sample

if TYPE_CHECKING:  # pragma: no cover - for type checkers only
    from kiel.zookeeper.client import ZooKeeper

__all__ = ["SOURCES", "ZooKeeperGroup", "ZooKeeperGroupMetrics", "allocator_of"]

#: The values of ``partitions_from``.
SOURCES = ("auto", "zookeeper", "metadata")

#: kiel 1.x's consumer keywords for a ZooKeeper group's own settings -> field.
_KEYWORDS: Mapping[str, str] = {
    "zk_hosts": "hosts", "zk_session_timeout": "session_timeout", "zk_chroot": "chroot",
    "zk_max_retry_delay": "max_retry_delay", "zk_connect_timeout": "connect_timeout",
    "zk_auth": "auth", "partitions_from": "partitions_from",
    "acquire_timeout": "acquire_timeout",
}


@dataclass(frozen=True, kw_only=True)
class ZooKeeperGroup(GroupCoordinator):
    """A group kept in ZooKeeper in Kafka 0.8's layout, every member running the allocator.

    The shared settings (``allocator``, ``member_id``, ``capacity``,
    ``join_timeout``, ``leave_timeout``) are
    :class:`~kiel.consumer.membership.GroupCoordinator`'s. kiel 1.x's
    consumer keywords are in brackets.

    Args:
        hosts: (``zk_hosts``) ``"host:port,...[/chroot]"`` of the ensemble
            the brokers register in (the broker stores v0 offsets there too).
        allocator: ``"round_robin"`` (default), ``"roundrobin"``,
            ``"range"``, ``"sticky"``, ``"weighted"``, a registered name or a
            callable (every member must use the same one).
        member_id: this member's id (default ``<host>-<pid>-<random>``).
        session_timeout: (``zk_session_timeout``) the ZooKeeper session
            timeout, seconds.
        chroot: (``zk_chroot``) a chroot added to ``hosts``.
        max_retry_delay: (``zk_max_retry_delay``) the longest pause, seconds,
            between attempts to reconnect to ZooKeeper.
        connect_timeout: (``zk_connect_timeout``) seconds ``connect()`` waits
            for the first ZooKeeper connection before it raises
            :class:`~kiel.exc.ZooKeeperError`.
        partitions_from: where members learn the partition counts:
            ``"zookeeper"`` (``/brokers/topics``), ``"metadata"`` (the
            brokers' metadata, read again every ``metadata_max_age``) or
            ``"auto"`` (default: ZooKeeper when brokers register there).
        auth: (``zk_auth``) ``"user:password"``: digest-authenticate, and
            create the group's znodes with ACLs only that identity may change.
        acquire_timeout: seconds to wait for a previous owner to release a
            partition before the allocation is recomputed.

    Raises:
        ConfigError: a bad setting.
    """

    hosts: str = ""
    session_timeout: float = 10.0
    chroot: Optional[str] = None
    max_retry_delay: float = 5.0
    connect_timeout: float = 15.0
    partitions_from: str = "auto"
    auth: Optional[str] = None
    acquire_timeout: float = 30.0
    #: Built by the shim: say each setting with the consumer keyword given.
    _keywords: InitVar[bool] = False

    kind: ClassVar[str] = "zookeeper"
    KEYWORDS: ClassVar[Mapping[str, str]] = _KEYWORDS
    FOREIGN: ClassVar[str] = (
        "only for a group coordinated by the brokers (leave zk_hosts out to use one, "
        "or pass coordinator=BrokerGroup(...))")

    def __post_init__(self, _keywords: bool) -> None:
        names = {field: keyword for keyword, field in _KEYWORDS.items()} if _keywords else {}
        self.check(names)

    @classmethod
    def from_keywords(cls, options: Mapping[str, Any]) -> "ZooKeeperGroup":
        """The group kiel 1.x's keywords describe, its errors naming those keywords.

        Raises:
            ConfigError: a bad setting, or a broker group's keyword.
        """
        foreign = sorted(set(options) - set(_KEYWORDS) - set(SHARED_KEYWORDS))
        if foreign:
            raise ConfigError(f"{', '.join(foreign)}: {cls.FOREIGN}")
        return cls(**{_KEYWORDS.get(name, name): value for name, value in options.items()},
                   _keywords=True)

    def __repr__(self) -> str:
        # The digest password stays out of logs and tracebacks.
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.auth:
            shown["auth"] = self.auth.split(":", 1)[0] + ":***"
        return "ZooKeeperGroup(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    def check(self, names: Optional[Mapping[str, str]] = None) -> None:
        """Refuse a bad setting.

        Args:
            names: field -> the keyword to name it by (the shim's); default its own.

        Raises:
            ConfigError: a bad setting.
        """
        names = names or {}

        def name(field: str) -> str:
            return names.get(field, field)

        _check_hosts(self.hosts, name("hosts"))
        for field in ("session_timeout", "acquire_timeout", "leave_timeout", "max_retry_delay"):
            real(name(field), getattr(self, field), at_least=0)
        for field in ("connect_timeout", "join_timeout"):
            real(name(field), getattr(self, field), above=0)
        if self.session_timeout > 3600:
            value = self.session_timeout
            raise ConfigError(f"{name('session_timeout')} is in seconds: {value!r} is over an "
                              f"hour ({value!r} ms would be {value / 1000:g} s)")
        if not 0 < self.max_retry_delay < 3600:
            raise ConfigError(f"{name('max_retry_delay')} must be seconds in (0, 3600), "
                              f"got {self.max_retry_delay!r}")
        if self.chroot is not None and not text(name("chroot"), self.chroot).startswith("/"):
            raise ConfigError(f"{name('chroot')} must start with '/', got {self.chroot!r}")
        if not isinstance(self.partitions_from, str) or self.partitions_from not in SOURCES:
            raise ConfigError(f"partitions_from must be one of {', '.join(SOURCES)}, "
                              f"got {self.partitions_from!r}")
        if self.auth is not None:
            if not isinstance(self.auth, str):
                raise ConfigError(f"{name('auth')} must be 'user:password', got a "
                                  f"{type(self.auth).__name__}")
            _check_auth(self.auth, name("auth"))
        self.check_shared()
        if self.member_id is not None:
            text("member_id", self.member_id)
        allocator_of(self.allocator)  # raises ConfigError for an unknown name

    def zookeeper(self) -> "ZooKeeper":
        """A ZooKeeper session with these settings, not started yet (loads kazoo)."""
        from kiel.zookeeper.client import ZooKeeper

        return ZooKeeper(
            self.hosts, session_timeout=self.session_timeout, chroot=self.chroot,
            auth=self.auth, max_retry_delay=self.max_retry_delay,
            connect_timeout=self.connect_timeout,
        )

    def metrics(self, membership: Optional[Membership]) -> "ZooKeeperGroupMetrics":
        """The ZooKeeper group's part of the consumer's metrics: kazoo's
        connection state (``NOT_STARTED`` before the first join)."""
        state = "NOT_STARTED" if membership is None else membership.metrics()["zookeeper_state"]
        return ZooKeeperGroupMetrics(coordinator=self.kind, state=state, zookeeper_state=state)


@dataclass(frozen=True, kw_only=True)
class ZooKeeperGroupMetrics(GroupMetrics):
    """A ZooKeeper group member's part of the consumer's metrics; its
    ``state`` is its ZooKeeper connection's."""

    #: kazoo's connection state (``CONNECTED``, ``SUSPENDED``, ``LOST``), or
    #: ``NOT_STARTED`` before connect.
    zookeeper_state: str = "NOT_STARTED"

    @property
    def connected(self) -> bool:
        return self.zookeeper_state == "CONNECTED"

    def samples(self) -> Iterator[Sample]:
        yield Sample("kiel_group_zookeeper_connected", (self.zookeeper_state,), 1)
        yield from super().samples()

    def flat(self) -> dict[str, Any]:
        return {**super().flat(), "zookeeper_state": self.zookeeper_state}


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


def _check_hosts(hosts: Any, name: str) -> None:
    """Refuse hosts that are not ``"host:port[,host:port...][/chroot]"``.

    Raises:
        ConfigError: they are not (kiel 0.9 took a list: join it with commas).
    """
    if isinstance(hosts, (list, tuple)):
        raise ConfigError(f"{name} is one string 'host:port,host:port[/chroot]' "
                          f"(kiel 0.9 took a list): write {','.join(map(str, hosts))!r}")
    if not isinstance(hosts, str) or not hosts:
        raise ConfigError(f"{name} must be 'host:port[,...][/chroot]', got {hosts!r}")
    servers, _, _ = hosts.partition("/")
    for server in servers.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not server.strip() or (sep and (not host or not port.isdigit()
                                           or not 0 < int(port) < 65536)):
            raise ConfigError(f"{name}: {server!r} in {hosts!r} is not 'host:port'")


def _check_auth(auth: str, name: str) -> None:
    """Refuse a digest identity that is not ``"user:password"`` (checked as
    :func:`kiel.zookeeper.client.digest_acls` reads it, without kazoo).

    Raises:
        ConfigError: it is not.
    """
    user, sep, _ = auth.partition(":")
    if not sep or not user:
        raise ConfigError(f"ZooKeeper digest auth ({name}) must be 'user:password'")
