"""Seeded schedules of faults for a group of members.

``generate(seed)`` (a group in ZooKeeper) and ``generate_brokers(seed)`` (a
group the brokers coordinate, on Tansu) are pure functions of the seed: the same seed gives the
same group (members, partitions, session timeout, allocator, ZooKeeper
standalone or a 3-node ensemble) and the same faults at the same offsets.
Which member a fault hits is drawn as an index into the members alive at
that moment, and membership changes only through the schedule itself, so a
replay hits the same members.

One exception, so that no schedule models what ZooKeeper never does: a
forced ``expire`` skips members whose network is blacked out and waits for
a stopped standalone server. The server expires a session only after its
timeout without a heartbeat, by which time the client has suspended; a
forced expiry inside a partition would end the session while the member
still believes, rightly by its own clock, that it holds it.
"""

import random
from typing import List, NamedTuple, Optional

#: The ZooKeeper mode's fault kinds.
ZK_KINDS = (
    "cut",             # reset the member's ZooKeeper connections (same session)
    "blackout",        # a partition shorter than the session
    "long_blackout",   # a partition past the session timeout: the server expires it
    "expire",          # the server expires the member's session (launcher helper)
    "zk_restart",      # standalone ZooKeeper stopped for longer than the session
    "leader_kill",     # SIGKILL of the ensemble's leader, restarted a little later
    "broker_restart",  # one embedded broker stopped, then started
    "kill",            # SIGKILL of a member; a replacement joins
    "leave",           # a member closes gracefully
    "join",            # a new member joins
    "slow_revoke",     # a member's on_partitions_revoked sleeps; a join/leave moves partitions
)
#: Every fault kind, in the order the totals list them.
KINDS = ZK_KINDS + (
    "tansu_restart",   # brokers mode: Tansu (broker and coordinator) restarted, forgetting all
    "poll_expiry",     # brokers mode: a member's application stops asking past max_poll_interval
)

#: The kinds of the brokers mode (no ZooKeeper, one Tansu broker).
BROKER_KINDS = ("cut", "blackout", "long_blackout", "tansu_restart", "kill", "leave", "join",
                "slow_revoke", "poll_expiry")
#: The assignors a brokers-mode schedule draws from when none is forced: the
#: eager ones (Java's two, and kiel's own sticky under its wire name).
BROKER_ALLOCATORS = ("range", "roundrobin", "sticky")

#: Kinds that hit one member (``target`` is an index among the live members).
MEMBER_KINDS = {"cut", "blackout", "long_blackout", "expire", "kill", "leave", "slow_revoke",
                "poll_expiry"}

MIN_MEMBERS, MAX_MEMBERS = 3, 5


class Fault(NamedTuple):
    """One fault: when (seconds after the group settled), what, and how long."""

    at: float
    kind: str
    #: Index into the live members (modulo their count) for MEMBER_KINDS.
    target: int = 0
    #: Seconds: blackout length, outage length, slow revoke, delay of a replacement.
    duration: float = 0.0
    #: Broker id for broker_restart.
    broker: int = 1


class Schedule(NamedTuple):
    """A group and the faults it goes through."""

    seed: int
    ensemble: bool
    members: int
    partitions: int
    session_timeout: float
    allocator: str
    faults: List[Fault]
    #: Black out this many members' ZooKeeper (0: none) just before close().
    close_blackout: int
    #: Seconds between that blackout and close(): 0, or long enough for the
    #: members to have suspended (kazoo then reconnects into the void).
    close_wait: float = 0.0
    #: ``"zookeeper"`` or ``"brokers"`` (a group the brokers coordinate, on Tansu).
    coordinator: str = "zookeeper"
    #: Brokers mode: the members' max_poll_interval, seconds.
    max_poll_interval: float = 0.0

    def describe(self) -> str:
        """One line: the seed, the group and the fault kinds in order."""
        backend = "ensemble" if self.ensemble else "standalone"
        if self.coordinator == "brokers":
            backend = f"brokers(tansu) max_poll={self.max_poll_interval:.0f}s"
        kinds = " ".join(f"{f.kind}@{f.at:.1f}" for f in self.faults)
        tail = ""
        if self.close_blackout:
            tail = f", close under blackout x{self.close_blackout} after {self.close_wait:.1f}s"
        return (f"seed={self.seed} {backend} members={self.members} "
                f"partitions={self.partitions} session={self.session_timeout:.1f}s "
                f"allocator={self.allocator} faults: {kinds}{tail}")


def generate(seed: int, ensemble: Optional[bool] = None) -> Schedule:
    """The schedule of ``seed``.

    Args:
        seed: any integer.
        ensemble: force the ZooKeeper backend (default: drawn, one in four
            schedules runs on the 3-node ensemble).

    Returns:
        the schedule.
    """
    rng = random.Random(seed)
    use_ensemble = rng.random() < 0.25
    if ensemble is not None:
        use_ensemble = ensemble
    members = rng.randint(MIN_MEMBERS, MAX_MEMBERS)
    partitions = rng.randint(12, 48)
    session = round(rng.uniform(4.0, 6.0), 1)
    allocator = rng.choice(["round_robin", "range", "sticky"])
    server_kind = "leader_kill" if use_ensemble else "zk_restart"
    kinds = [k for k in ZK_KINDS if k not in ("zk_restart", "leader_kill")] + [server_kind]
    faults: List[Fault] = []
    at = 0.0
    for _ in range(rng.randint(2, 4)):
        at += rng.uniform(0.3, 2.5)
        kind = rng.choice(kinds)
        faults.append(Fault(
            at=round(at, 2),
            kind=kind,
            target=rng.randrange(MAX_MEMBERS),
            duration=round(_duration(rng, kind, session), 2),
            broker=rng.randint(1, 3),
        ))
    close_blackout = rng.choice([0, 0, 0, 1, members])
    close_wait = rng.choice([0.0, round(session * 0.8, 1)]) if close_blackout else 0.0
    return Schedule(seed, use_ensemble, members, partitions, session, allocator, faults,
                    close_blackout, close_wait)


#: Brokers mode: fewer members and partitions than the ZooKeeper mode, since
#: every change costs a Tansu rebalance of 4-6 s.
BROKER_MEMBERS = (3, 4)
#: Brokers mode: the members' max_poll_interval (a poll_expiry stalls past it).
#: Above the longest session + a heartbeat: Apache Kafka drops a member that
#: has not joined a rebalance again after this (its rebalance timeout), and a
#: member cut off from the coordinator can only count its session.
BROKER_MAX_POLL = 10.0


def generate_brokers(seed: int, allocator: Optional[str] = None) -> Schedule:
    """The brokers-mode schedule of ``seed``.

    Args:
        seed: any integer.
        allocator: force the assignor (default: drawn from
            :data:`BROKER_ALLOCATORS`); a cooperative one runs the same faults.

    Returns:
        the schedule (``ensemble`` is False: there is no ZooKeeper).
    """
    rng = random.Random(seed)
    members = rng.randint(*BROKER_MEMBERS)
    partitions = rng.randint(8, 24)
    session = round(rng.uniform(6.0, 8.0), 1)
    drawn = rng.choice(BROKER_ALLOCATORS)
    faults: List[Fault] = []
    at = 0.0
    for _ in range(rng.randint(2, 3)):
        at += rng.uniform(0.3, 3.0)
        kind = rng.choice(BROKER_KINDS)
        faults.append(Fault(
            at=round(at, 2),
            kind=kind,
            target=rng.randrange(MAX_MEMBERS),
            duration=round(_duration(rng, kind, session), 2),
        ))
    close_blackout = rng.choice([0, 0, 0, 1, members])
    close_wait = rng.choice([0.0, round(session * 0.8, 1)]) if close_blackout else 0.0
    return Schedule(seed, False, members, partitions, session, allocator or drawn, faults,
                    close_blackout, close_wait, coordinator="brokers",
                    max_poll_interval=BROKER_MAX_POLL)


def _duration(rng: random.Random, kind: str, session: float) -> float:
    if kind == "blackout":
        return rng.uniform(0.3, 0.75) * session
    if kind == "long_blackout":
        return session + rng.uniform(1.0, 3.0)
    if kind == "zk_restart":
        return session + rng.uniform(0.5, 2.0)
    if kind == "leader_kill":
        return rng.uniform(1.0, 3.0)
    if kind == "broker_restart":
        return rng.uniform(0.3, 2.0)
    if kind == "kill":
        return rng.uniform(0.0, 1.0)
    if kind == "slow_revoke":
        return rng.uniform(1.5, 3.0)
    if kind == "tansu_restart":
        return rng.uniform(0.3, 2.0)
    if kind == "poll_expiry":
        return BROKER_MAX_POLL + rng.uniform(1.0, 3.0)
    return 0.0
