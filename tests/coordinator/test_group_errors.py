"""The group coordinator's error codes in kiel.exc: registered by code, group
errors too (except the topic one), none retried blindly, each saying what to do."""
import pickle

import pytest

from kiel import exc
from kiel.exc import BrokerError, GroupError, for_code

GROUP_CODES = {
    22: "IllegalGenerationError",
    23: "InconsistentGroupProtocolError",
    24: "InvalidGroupIdError",
    25: "UnknownMemberIdError",
    26: "InvalidSessionTimeoutError",
    27: "RebalanceInProgressError",
    30: "GroupAuthorizationFailedError",
    68: "NonEmptyGroupError",
    69: "GroupIdNotFoundError",
    79: "MemberIdRequiredError",
    81: "GroupMaxSizeReachedError",
    82: "FencedInstanceIdError",
}


@pytest.mark.parametrize("code,name", sorted(GROUP_CODES.items()))
def test_group_codes_are_group_errors(code: int, name: str) -> None:
    cls = for_code(code)
    assert cls is getattr(exc, name) and cls.errno == code
    assert issubclass(cls, BrokerError) and issubclass(cls, GroupError)
    # The membership reacts to each (rejoin, new id, fail): no blind retry.
    assert not cls.retriable and not cls.invalid_metadata
    error = cls(group="g", errno=code)
    assert error.message == cls.__doc__ and "\n" not in error.message
    assert str(error).startswith(cls.__doc__) and "group='g'" in str(error)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is cls and again.group == "g" and again.errno == code


def test_topic_authorization_is_not_a_group_error() -> None:
    cls = for_code(29)
    assert cls is exc.TopicAuthorizationFailedError
    assert issubclass(cls, BrokerError) and not issubclass(cls, GroupError)


@pytest.mark.parametrize("name,words", [
    ("InconsistentGroupProtocolError", "common allocator"),
    ("FencedInstanceIdError", "group_instance_id"),
    ("GroupAuthorizationFailedError", "ACLs"),
    ("InvalidSessionTimeoutError", "group.min.session.timeout.ms"),
])
def test_fatal_ones_say_what_to_do(name: str, words: str) -> None:
    assert words in getattr(exc, name).__doc__
