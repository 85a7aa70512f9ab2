"""One error tree for all of kiel.

Every error kiel raises on purpose is a :class:`KielError`. The tree splits
along who is at fault, the way h11 does:

* :class:`ConfigError` -- the caller passed a bad setting or argument.
* :class:`LocalProtocolError` -- kiel was asked to put something on the wire
  that the protocol cannot carry (a string too long for an int16 length, a
  value of the wrong type). The fault is on our side of the socket.
* :class:`ProtocolError` -- the peer sent bytes that do not parse: a bad
  frame, a truncated field, a CRC mismatch. The fault is on the other side.
* :class:`BrokerError` -- the broker understood us and answered with a Kafka
  error code. One subclass per code of the 0.8.x table, registered by code,
  each with ``retriable`` and ``invalid_metadata`` flags; codes we do not know
  become :class:`UnknownBrokerError` with the code kept in ``errno``.
* :class:`KielConnectionError`, :class:`NoBrokersError`,
  :class:`ZooKeeperError` and friends for the transport.

Errors carry structured context (``api``, ``topic``, ``partition``,
``offset``, ``broker_id``, ``host``, ``port``) as attributes, and the context
that is known shows up in ``str(error)``.
"""
from typing import Any, ClassVar, Optional

#: Context keys every error may carry, in the order ``str()`` shows them.
CONTEXT_KEYS = ("api", "topic", "partition", "offset", "broker_id", "host", "port", "group")


class KielError(Exception):
    """Base class of every error kiel raises on purpose.

    Args:
        message: what went wrong, for a human.
        **context: structured context (see :data:`CONTEXT_KEYS`); unknown keys
            are kept too. ``None`` values are dropped.
    """

    #: Whether retrying the same operation may succeed.
    retriable: ClassVar[bool] = False
    #: Whether the cluster metadata should be refreshed before a retry.
    invalid_metadata: ClassVar[bool] = False

    def __init__(self, message: str = "", **context: Any) -> None:
        self.message = message or (self.__doc__ or type(self).__name__).strip().splitlines()[0]
        self.context: dict[str, Any] = {k: v for k, v in context.items() if v is not None}
        super().__init__(self.message)

    def __getattr__(self, name: str) -> Any:
        # Context keys read as attributes (``err.topic``); unknown ones are None
        # so callers can probe without try/except.
        if name in CONTEXT_KEYS:
            return self.__dict__.get("context", {}).get(name)
        raise AttributeError(name)

    def with_context(self, **context: Any) -> "KielError":
        """Add context known higher up the stack (keeps what is already set).

        Returns:
            the same error, for ``raise err.with_context(topic=...)``.
        """
        for key, value in context.items():
            if value is not None:
                self.context.setdefault(key, value)
        return self

    def __str__(self) -> str:
        if not self.context:
            return self.message
        keys = [k for k in CONTEXT_KEYS if k in self.context]
        keys += sorted(k for k in self.context if k not in CONTEXT_KEYS)
        detail = ", ".join(f"{k}={self.context[k]!r}" for k in keys)
        return f"{self.message} ({detail})"

    def __reduce__(self) -> Any:
        # Keep context across pickling (Spark ships errors between processes).
        return (_rebuild, (type(self), self.message, self.context))


def _rebuild(cls: type[KielError], message: str, context: dict[str, Any]) -> KielError:
    err = cls.__new__(cls)
    KielError.__init__(err, message, **context)
    return err


# --------------------------------------------------------------------------
# Caller mistakes


class ConfigError(KielError, ValueError):
    """A setting or argument is invalid."""


class ArgumentError(ConfigError, TypeError):
    """An argument given by position where the call takes it only by name
    (``GroupedConsumer(brokers, group, ["t"])``); the message says how to
    write it. A :class:`TypeError` too, as Python's own for a bad call."""


class SerializationError(KielError, TypeError):
    """A key or value is not ``bytes`` and no serializer was set, or the
    serializer failed or returned something other than ``bytes``."""


class DeserializationError(KielError):
    """A consumer's deserializer failed on a message; ``topic``, ``partition``
    and ``offset`` say which one (the deserializer's exception is the cause)."""


class MissingDependencyError(KielError, ImportError):
    """An optional dependency is not installed; the message names the extra."""


# --------------------------------------------------------------------------
# Wire protocol


class LocalProtocolError(KielError):
    """kiel was asked to encode something the protocol cannot carry."""


class ProtocolError(KielError):
    """The peer sent bytes that are not valid Kafka protocol."""


class TruncatedError(ProtocolError):
    """A field ran past the end of the buffer."""


class FrameTooLargeError(ProtocolError):
    """A frame's size prefix is negative or over the configured maximum."""


class NotKafkaError(FrameTooLargeError):
    """The peer's answer is not Kafka at all: its first bytes look like another
    protocol (HTTP, a TLS record, SSH...), which the message names; a wrong
    port, or a TLS listener reached without ``ssl_context``."""


class CorrelationIdError(ProtocolError):
    """A response's correlation id matches no request in flight, or is out of order."""


class CorruptMessageError(ProtocolError):
    """A message failed its CRC32 check or its framing is inconsistent."""


class UnsupportedVersionError(ProtocolError):
    """A message or request carries a version (magic byte, API version) kiel does not know."""


class ConsumerProtocolError(ProtocolError):
    """A group member's subscription or assignment (the embedded "consumer"
    protocol carried in JoinGroup and SyncGroup) does not parse: truncated,
    a negative version, or garbage. The member that wrote it is at fault."""


class CompressionError(ProtocolError):
    """A compressed payload could not be decompressed."""


class UnsupportedCodecError(ProtocolError):
    """A message uses a compression codec kiel does not know."""


class InvalidMetadataError(ProtocolError):
    """A Metadata answer that no sane cluster sends: more brokers or
    partitions than the client's bounds allow (``max_metadata_brokers``,
    ``max_metadata_partitions``), or ids that cannot be (a negative broker
    or partition id). The metadata known before it is kept."""


class UnsupportedFeatureError(KielError):
    """The broker's protocol versions cannot do what was asked.

    Record headers or timestamps for a broker that speaks only Produce v0
    (Kafka 0.8), or an API kiel and the broker share no version of. Raised
    before anything is sent: nothing is dropped silently.
    """


class MessageTooLargeError(KielError):
    """A single message is larger than the fetch size can ever hold.

    Raised by consumers once growing the fetch size up to its cap did not help;
    ``topic``, ``partition`` and ``offset`` say which message.
    """


# --------------------------------------------------------------------------
# Transport


class _Transient:
    """Mixin for transport failures: worth a retry, after a metadata refresh."""

    retriable: ClassVar[bool] = True
    invalid_metadata: ClassVar[bool] = True


class KielConnectionError(_Transient, KielError):
    """A broker connection failed or was closed; ``reason`` says why."""


class ConnectionClosedError(KielConnectionError):
    """The connection closed while requests were in flight."""


class ConnectTimeoutError(KielConnectionError):
    """Connecting to a broker took longer than the connect timeout."""


class TlsError(KielConnectionError):
    """The TLS handshake with a broker failed: a certificate the context does not
    trust, a host name that does not match, no common protocol version, or a
    broker that does not speak TLS.

    Not retriable: the same context fails the same way again. The message
    carries the SSL library's reason (the ``ssl.SSLError`` is the cause).
    """

    retriable = False
    invalid_metadata = False


class AuthenticationError(KielError):
    """SASL authentication failed: a wrong user name or password, a mechanism
    the broker does not enable, or a server that could not prove it knows the
    password (SCRAM's server signature). Not retriable.

    The message never contains the password or a proof.
    """


class RequestTimeoutError(_Transient, KielError):
    """A broker did not answer a request within its timeout."""


class NoBrokersError(_Transient, KielError):
    """No broker of the bootstrap list (or the cluster metadata) could be reached."""


class UnknownTopicError(KielError):
    """The cluster has no such topic (and auto-creation is off or failed)."""


class UnknownPartitionError(KielError):
    """The topic has no such partition."""


class ClientClosedError(KielError):
    """The client was closed; the operation cannot proceed."""


class DeliveryUnknownError(KielError):
    """A request carrying the record was sent and never answered: the broker
    may or may not have written it.

    Whatever ended the record (its retries ran out after a timeout or a
    broken connection, a later attempt was refused, the producer closed
    while it was out) is its ``__cause__``. Not a :class:`ClientClosedError`
    nor a :class:`KielConnectionError` (which say the record was certainly
    not written, so sending it again is safe): sending this record again
    may write it twice. Check the topic (or accept a duplicate) before
    producing it again. ``topic``, ``partition`` and ``broker_id`` say where
    it went.
    """


class BufferFullError(KielError):
    """The records the producer holds are at ``max_pending_bytes``:
    ``produce()`` found no room, or ``enqueue()`` waited ``buffer_timeout``
    for it in vain."""


class TransactionStateError(KielError):
    """A transactional call that does not fit the producer's state: on a
    producer without ``transactional_id``, ``commit_transaction()`` or
    ``abort_transaction()`` without a transaction, ``begin_transaction()``
    with one open, ``produce()`` outside a transaction on a transactional
    producer. Nothing was sent."""


class TransactionAbortedError(KielError):
    """The transaction was aborted: a record of it failed, the group refused
    its offsets, or ``abort_transaction()`` ran while the record waited to
    be sent (such a record was never written). A read_committed consumer
    sees nothing of the transaction; the producer can begin the next one.
    What doomed it is the ``__cause__``."""


class TransactionTimeoutError(TransactionAbortedError):
    """The transaction stayed open past the producer's
    ``transaction_timeout``: kiel aborted it, and ``commit_transaction()``
    raises this. kiel's own bound: no broker kiel was tested with enforces
    the timeout it is told."""


# --------------------------------------------------------------------------
# ZooKeeper and groups


class ZooKeeperError(KielError):
    """ZooKeeper could not be reached or answered with an error."""

    retriable = True


class AllocationError(KielError):
    """An allocator returned an invalid assignment (overlapping, incomplete, unknown member)."""


class GroupError(KielError):
    """A grouped consumer could not join or stay in its group."""


class PollIntervalExceededError(GroupError):
    """The application did not ask for records within ``max_poll_interval``.

    The member left its broker-coordinated group on purpose (after
    committing what the application finished), so the other members took
    its partitions instead of waiting; it joins again as the application
    asks for records. Raised once, by the next ``consume()``.
    """


class LegacyGroupError(GroupError):
    """Members of kiel 0.9 are live in the group.

    kiel 0.9 registered its members under ``/kiel/groups/<group>/members``,
    where a kiel 1.x member does not look for peers: the two would each
    consume every partition. A 1.x member never consumes beside them.
    Joining, it waits for their sessions to end (up to ``join_timeout``),
    and ``connect()`` raises this if they do not: stop them, then connect
    again. Once joined, it stops fetching and committing while one is live
    and ``consume()`` raises this once; it fetches again when they are gone.
    See the migration guide.
    """


class OffsetResetError(KielError):
    """No committed or valid offset and the reset policy is ``"raise"``."""


# --------------------------------------------------------------------------
# Test harness (kiel.testing)


class HarnessError(KielError):
    """A part kiel.testing runs (ZooKeeper, the embedded broker) failed to start, stop or obey.

    The message carries what is known (for a server that did not come up: the
    tail of its log); ``host`` and ``port`` say which server.
    """


# --------------------------------------------------------------------------
# Broker error codes (the Kafka 0.8.x table, kafka.common.ErrorMapping)


class BrokerError(KielError):
    """The broker answered with a Kafka error code.

    Subclasses are registered by ``errno``; :func:`for_code` maps a code to its
    class, falling back to :class:`UnknownBrokerError`.
    """

    errno: int = -1

    def __init__(self, message: str = "", **context: Any) -> None:
        super().__init__(message, **context)
        # An instance of the fallback class knows the real code.
        self.errno = int(context.get("errno", type(self).errno))


_BY_CODE: dict[int, type[BrokerError]] = {}


def _register(
    code: int, name: str, doc: str, retriable: bool = False, invalid_metadata: bool = False,
    also: Optional[type[KielError]] = None,
) -> type[BrokerError]:
    cls = type(
        name,
        (BrokerError,) if also is None else (BrokerError, also),
        {
            "__doc__": doc,
            "__module__": __name__,
            "errno": code,
            "retriable": retriable,
            "invalid_metadata": invalid_metadata,
        },
    )
    _BY_CODE[code] = cls
    return cls


UnknownBrokerError = _register(-1, "UnknownBrokerError", "An unexpected server error (or a code kiel does not know).")
OffsetOutOfRangeError = _register(1, "OffsetOutOfRangeError", "The requested offset is outside the range the broker holds for the partition.")
InvalidMessageError = _register(2, "InvalidMessageError", "The broker found a message that failed its CRC check.", retriable=True)
UnknownTopicOrPartitionError = _register(3, "UnknownTopicOrPartitionError", "The broker does not host this topic or partition.", retriable=True, invalid_metadata=True)
InvalidFetchSizeError = _register(4, "InvalidFetchSizeError", "The fetch size is invalid (negative).")
LeaderNotAvailableError = _register(5, "LeaderNotAvailableError", "The partition has no leader right now (election or topic creation in progress).", retriable=True, invalid_metadata=True)
NotLeaderForPartitionError = _register(6, "NotLeaderForPartitionError", "This broker is not the leader of the partition.", retriable=True, invalid_metadata=True)
RequestTimedOutError = _register(7, "RequestTimedOutError", "The broker's request timed out (e.g. waiting for acks).", retriable=True)
BrokerNotAvailableError = _register(8, "BrokerNotAvailableError", "The broker is not available.")
ReplicaNotAvailableError = _register(9, "ReplicaNotAvailableError", "A replica is not available (informational in metadata).")
MessageSizeTooLargeError = _register(10, "MessageSizeTooLargeError", "A message is larger than the broker accepts.")
StaleControllerEpochError = _register(11, "StaleControllerEpochError", "Stale controller epoch (broker-to-broker).")
OffsetMetadataTooLargeError = _register(12, "OffsetMetadataTooLargeError", "The offset commit's metadata string is too large.")
StaleLeaderEpochError = _register(13, "StaleLeaderEpochError", "Stale leader epoch (broker-to-broker).")
OffsetsLoadInProgressError = _register(14, "OffsetsLoadInProgressError", "The coordinator is still loading offsets.", retriable=True)
ConsumerCoordinatorNotAvailableError = _register(15, "ConsumerCoordinatorNotAvailableError", "The offsets topic or coordinator is not available yet.", retriable=True)
NotCoordinatorForConsumerError = _register(16, "NotCoordinatorForConsumerError", "This broker is not the coordinator for the group.", retriable=True)
InvalidTopicError = _register(17, "InvalidTopicError", "The topic name is invalid or reserved.")
MessageSetSizeTooLargeError = _register(18, "MessageSetSizeTooLargeError", "The message set is larger than the broker's segment size.")
NotEnoughReplicasError = _register(19, "NotEnoughReplicasError", "Fewer in-sync replicas than required.", retriable=True)
NotEnoughReplicasAfterAppendError = _register(20, "NotEnoughReplicasAfterAppendError", "Written, but fewer in-sync replicas than required.", retriable=True)

# The group coordinator's codes (the broker-coordinated group: JoinGroup,
# SyncGroup, Heartbeat, LeaveGroup, and OffsetCommit from a member): group
# errors too (``except GroupError`` catches them). None is retriable as it
# stands: the membership reacts to each (rejoin, forget its member id, fail).
IllegalGenerationError = _register(22, "IllegalGenerationError", "The group has moved to a newer generation than the member's: it rejoins with the same member id; a commit from the old generation is refused.", also=GroupError)
InconsistentGroupProtocolError = _register(23, "InconsistentGroupProtocolError", "The member's protocol type or allocators share nothing with the group's: give every member of the group a common allocator name.", also=GroupError)
InvalidGroupIdError = _register(24, "InvalidGroupIdError", "The group id is empty or null: pass a group name.", also=GroupError)
UnknownMemberIdError = _register(25, "UnknownMemberIdError", "The coordinator does not know the member id (its session expired or it was removed): it joins again as a new member.", also=GroupError)
InvalidSessionTimeoutError = _register(26, "InvalidSessionTimeoutError", "The session timeout is outside the broker's group.min.session.timeout.ms and group.max.session.timeout.ms: choose one inside them.", also=GroupError)
RebalanceInProgressError = _register(27, "RebalanceInProgressError", "The group is rebalancing: the member rejoins, keeping its member id and generation.", also=GroupError)
TopicAuthorizationFailedError = _register(29, "TopicAuthorizationFailedError", "The client is not authorized to access the topic: ask for the topic's ACLs.")
GroupAuthorizationFailedError = _register(30, "GroupAuthorizationFailedError", "The client is not authorized to use the group: ask for the group's ACLs (READ on the group).", also=GroupError)
NonEmptyGroupError = _register(68, "NonEmptyGroupError", "The group still has members: stop them before deleting the group or resetting its offsets.", also=GroupError)
GroupIdNotFoundError = _register(69, "GroupIdNotFoundError", "The coordinator has no such group.", also=GroupError)
MemberIdRequiredError = _register(79, "MemberIdRequiredError", "The coordinator gave the member an id: it joins again with it (JoinGroup v4+, KIP-394).", also=GroupError)
GroupMaxSizeReachedError = _register(81, "GroupMaxSizeReachedError", "The group has as many members as the broker's group.max.size allows: stop a member or raise the limit.", also=GroupError)
FencedInstanceIdError = _register(82, "FencedInstanceIdError", "Another member joined with the same group_instance_id: give every static member its own.", also=GroupError)

# Codes of newer brokers, registered where kiel acts on them: SASL failures
# are authentication errors too (``except AuthenticationError`` catches them).
UnsupportedSaslMechanismError = _register(33, "UnsupportedSaslMechanismError", "The broker does not enable the SASL mechanism asked for.", also=AuthenticationError)
IllegalSaslStateError = _register(34, "IllegalSaslStateError", "A SASL request came out of order (the broker's view of the exchange differs).", also=AuthenticationError)
# UNSUPPORTED_VERSION: ApiVersions answers it with the ranges it does speak
# (KIP-511), or without any, and then connecting fails with it.
UnsupportedApiVersionError = _register(35, "UnsupportedApiVersionError", "The broker does not speak the request's API version.", also=UnsupportedVersionError)
SaslAuthenticationFailedError = _register(58, "SaslAuthenticationFailedError", "SASL authentication failed: a wrong user name or password.", also=AuthenticationError)


# The administration APIs' codes (kiel.admin.Admin: CreateTopics,
# CreatePartitions, configs, DeleteRecords, DeleteGroups, OffsetDelete). The
# broker's own message, when it sends one, is the error's message.
ClusterAuthorizationFailedError = _register(31, "ClusterAuthorizationFailedError", "The client is not authorized for this cluster operation: ask for the cluster's ACLs (ALTER or DESCRIBE on the cluster; an idempotent producer needs IDEMPOTENT_WRITE on brokers before Kafka 2.8).")
InvalidTimestampError = _register(32, "InvalidTimestampError", "The timestamp is outside the range the broker accepts.")
TopicAlreadyExistsError = _register(36, "TopicAlreadyExistsError", "A topic of that name exists already.")
InvalidPartitionsError = _register(37, "InvalidPartitionsError", "The number of partitions is invalid: zero or negative, or not more than the topic has.")
InvalidReplicationFactorError = _register(38, "InvalidReplicationFactorError", "The replication factor is invalid: zero, negative, or more than the brokers available.")
InvalidReplicaAssignmentError = _register(39, "InvalidReplicaAssignmentError", "The replica assignment is invalid (unknown brokers, uneven replica counts).")
InvalidConfigurationError = _register(40, "InvalidConfigurationError", "A config name is unknown or its value is invalid.")
NotControllerError = _register(41, "NotControllerError", "This broker is not the cluster's controller: the request goes to the controller.", retriable=True, invalid_metadata=True)
InvalidRequestError = _register(42, "InvalidRequestError", "The broker found the request invalid (its message says why).")
PolicyViolationError = _register(44, "PolicyViolationError", "The broker's create-topic or alter-config policy refused the request.")
OffsetNotAvailableError = _register(78, "OffsetNotAvailableError", "The leader cannot answer the offset yet (its high watermark is catching up after an election).", retriable=True)
GroupSubscribedToTopicError = _register(86, "GroupSubscribedToTopicError", "The group's live members consume the topic: its committed offsets cannot be deleted.", also=GroupError)

# The idempotent producer's codes (KIP-98, KIP-360, KIP-588). The producer
# acts on them itself (see kiel.producer.idempotence): 46 is a delivery, 45,
# 47, 59 and 90 renew its producer id or epoch and send again; a record
# fails with one of them only when renewing failed for good.
OutOfOrderSequenceNumberError = _register(45, "OutOfOrderSequenceNumberError", "The broker received a batch whose sequence number leaves a gap after the last one it wrote for this producer and partition: nothing was written.")
DuplicateSequenceNumberError = _register(46, "DuplicateSequenceNumberError", "The broker already wrote a batch with this sequence number (a retry of a batch whose answer was lost): nothing was written again.")
InvalidProducerEpochError = _register(47, "InvalidProducerEpochError", "The producer's epoch is older than the broker's for its producer id.")
InvalidTxnStateError = _register(48, "InvalidTxnStateError", "The transactional operation is not valid in the transaction's state.")
InvalidProducerIdMappingError = _register(49, "InvalidProducerIdMappingError", "The producer id does not belong to the transactional id.")
ConcurrentTransactionsError = _register(51, "ConcurrentTransactionsError", "The transaction coordinator is completing another transaction of this producer.", retriable=True)
InvalidTransactionTimeoutError = _register(50, "InvalidTransactionTimeoutError", "The transaction timeout is larger than the broker's transaction.max.timeout.ms (or not positive).")
TransactionCoordinatorFencedError = _register(52, "TransactionCoordinatorFencedError", "The transaction coordinator was replaced by a newer one: ask for the coordinator again.", retriable=True)
OperationNotAttemptedError = _register(55, "OperationNotAttemptedError", "The broker did not try this part of the request because another part failed.")
TransactionAbortableError = _register(120, "TransactionAbortableError", "The transaction can only be aborted (KIP-890).")
TransactionalIdAuthorizationFailedError = _register(53, "TransactionalIdAuthorizationFailedError", "The client is not authorized to use the transactional id.")
UnknownProducerIdError = _register(59, "UnknownProducerIdError", "The broker no longer knows the producer id (its state expired, or the log was truncated): nothing was written.")
ProducerFencedError = _register(90, "ProducerFencedError", "A newer producer with the same producer id or transactional id has fenced this one (KIP-588).")


def for_code(code: int) -> Optional[type[BrokerError]]:
    """Map a Kafka error code to its exception class.

    Args:
        code: the ``error_code`` field of a response.

    Returns:
        ``None`` for 0 (no error), the registered class for a known code, and
        :class:`UnknownBrokerError` for anything else.
    """
    if code == 0:
        return None
    return _BY_CODE.get(code, UnknownBrokerError)

