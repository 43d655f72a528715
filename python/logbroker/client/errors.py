"""The client's exception hierarchy: one class per way a request can fail.

    KafkaError
    ├── KafkaTimeoutError (also TimeoutError)   what timed out is in the message
    ├── KafkaConnectionError                    socket trouble; retriable
    ├── ClientClosedError                       the client was closed
    ├── ConfigError (also ValueError)           a bad or unknown configuration key
    ├── SerializationError                      a value the codec cannot carry
    ├── SaslAuthenticationError                 a broker refused our SASL credentials (or we
    │                                           refused it); not retriable
    └── BrokerResponseError                     a Kafka error code in a response
        ├── UnknownTopicOrPartitionError, NotLeaderOrFollowerError, ...
        └── one class per `ErrorCode` (named after it: OFFSET_OUT_OF_RANGE ->
            OffsetOutOfRangeError), with `code`, `retriable` and `default_message` class
            attributes

A code's `retriable` and `default_message` are the `ErrorCode`'s (`ErrorCode.X.retriable`,
`.message`: Kafka's table, vendored in protocol/specs/errors/errors.json), never restated
here: `retriable` is true when Kafka's exception for the code is a `RetriableException`,
i.e. the same request may succeed if sent again (after a metadata refresh or a backoff).
`error_for(code, message)` is the one place that turns a response's error code into an
exception; without a message from the broker it uses the code's default message, as
Kafka's clients do.

Invariant: every exception the public API raises is a `KafkaError`, except `TypeError` /
`ValueError` for wrong argument types and values, which `ConfigError` also is.
"""

from __future__ import annotations

from typing import ClassVar

from logbroker.protocol import ErrorCode

__all__ = [
    "BrokerResponseError",
    "ClientClosedError",
    "ConfigError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "SaslAuthenticationError",
    "SerializationError",
    "error_for",
    "error_class",
]


class KafkaError(Exception):
    """Base of every client error. `retriable` is True when retrying may succeed."""

    retriable: ClassVar[bool] = False
    code: ClassVar[ErrorCode | None] = None


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An operation did not finish in time; the message names the operation and the limit."""

    retriable = ErrorCode.REQUEST_TIMED_OUT.retriable  # Kafka's TimeoutException


class KafkaConnectionError(KafkaError, ConnectionError):
    """A connection to a broker failed or was closed with requests outstanding (a
    ConnectionError too, as the drivers' socket failures are)."""

    code = ErrorCode.NETWORK_EXCEPTION
    retriable = ErrorCode.NETWORK_EXCEPTION.retriable


class ClientClosedError(KafkaError):
    """The producer, consumer or admin client was closed."""


class ConfigError(KafkaError, ValueError):
    """A configuration key is unknown or its value is invalid."""


class SerializationError(KafkaError, TypeError):
    """A key, value or header that cannot be sent as bytes."""


class SaslAuthenticationError(KafkaError):
    """SASL authentication with a broker failed (client/sasl.py): wrong credentials
    (SASL_AUTHENTICATION_FAILED), a mechanism the broker does not enable
    (UNSUPPORTED_SASL_MECHANISM), or a server whose SCRAM signature does not match. Not
    retriable: sending again would only fail again. `broker`, `mechanism`, `user` and
    `error_code` (the broker's, None when the client refused) say which; the message holds the
    broker's error_message, never the password."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED

    def __init__(self, broker: str, mechanism: str, user: str, reason: str, error_code: int | None = None) -> None:
        self.broker = broker
        self.mechanism = mechanism
        self.user = user
        self.reason = reason
        self.error_code = error_code
        what = ""
        if error_code is not None:
            try:
                what = f"{ErrorCode(error_code).name} ({error_code}): "
            except ValueError:
                what = f"error {error_code}: "
        super().__init__(
            f"SASL authentication of user {user!r} with {mechanism} at broker {broker} failed: {what}{reason}"
        )

    def __reduce__(self) -> tuple[type[SaslAuthenticationError], tuple[str, str, str, str, int | None]]:
        # picklable despite the keyword-less __init__
        return (type(self), (self.broker, self.mechanism, self.user, self.reason, self.error_code))


class BrokerResponseError(KafkaError):
    """A broker answered with an error code (`code`); the message says for what.
    `default_message` is Kafka's message for the code (set per class from `ErrorCode`)."""

    code: ClassVar[ErrorCode | None] = ErrorCode.UNKNOWN_SERVER_ERROR
    default_message: ClassVar[str | None] = None


def _class_name(code: ErrorCode) -> str:
    name = "".join(part.capitalize() for part in code.name.split("_"))
    name = name.removesuffix("Exception")
    return name if name.endswith("Error") else name + "Error"


# The common ones, spelled out so that type checkers and readers see them.
class UnknownServerError(BrokerResponseError):
    code = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(BrokerResponseError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptMessageError(BrokerResponseError):
    code = ErrorCode.CORRUPT_MESSAGE


class UnknownTopicOrPartitionError(BrokerResponseError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class LeaderNotAvailableError(BrokerResponseError):
    code = ErrorCode.LEADER_NOT_AVAILABLE


class NotLeaderOrFollowerError(BrokerResponseError):
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class RequestTimedOutError(BrokerResponseError):
    code = ErrorCode.REQUEST_TIMED_OUT


class MessageTooLargeError(BrokerResponseError):
    code = ErrorCode.MESSAGE_TOO_LARGE


class NotCoordinatorError(BrokerResponseError):
    code = ErrorCode.NOT_COORDINATOR


class CoordinatorNotAvailableError(BrokerResponseError):
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE


class RebalanceInProgressError(BrokerResponseError):
    code = ErrorCode.REBALANCE_IN_PROGRESS


class IllegalGenerationError(BrokerResponseError):
    code = ErrorCode.ILLEGAL_GENERATION


class UnknownMemberIdError(BrokerResponseError):
    code = ErrorCode.UNKNOWN_MEMBER_ID


class TopicAlreadyExistsError(BrokerResponseError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(BrokerResponseError):
    code = ErrorCode.INVALID_PARTITIONS


class InvalidConfigError(BrokerResponseError):
    code = ErrorCode.INVALID_CONFIG


class OutOfOrderSequenceNumberError(BrokerResponseError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceNumberError(BrokerResponseError):
    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(BrokerResponseError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


class UnsupportedVersionError(BrokerResponseError):
    code = ErrorCode.UNSUPPORTED_VERSION


class GroupIdNotFoundError(BrokerResponseError):
    code = ErrorCode.GROUP_ID_NOT_FOUND


class NonEmptyGroupError(BrokerResponseError):
    code = ErrorCode.NON_EMPTY_GROUP


class InvalidRecordError(BrokerResponseError):
    code = ErrorCode.INVALID_RECORD


_BY_CODE: dict[int, type[BrokerResponseError]] = {}


def _register() -> None:
    explicit = {cls.code: cls for cls in BrokerResponseError.__subclasses__()}
    for code in ErrorCode:
        if code == ErrorCode.NONE:
            continue
        cls = explicit.get(code)
        if cls is None:
            name = _class_name(code)
            cls = type(name, (BrokerResponseError,), {"code": code, "__module__": __name__})
            globals()[name] = cls
        cls.retriable = code.retriable
        cls.default_message = code.message
        if cls.__doc__ is None:
            cls.__doc__ = f"Kafka error {code.name} ({int(code)}): {code.message}"
        __all__.append(cls.__name__)
        _BY_CODE[int(code)] = cls


_register()


def error_class(code: int) -> type[BrokerResponseError]:
    """The exception class of a Kafka error code (BrokerResponseError for unknown codes)."""
    return _BY_CODE.get(code, BrokerResponseError)


def error_for(code: int, message: str | None = None, context: str = "") -> BrokerResponseError:
    """An exception for `code`: 'context: CODE_NAME (n): message', Kafka's default message for
    the code when `message` is None or empty."""
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = "UNKNOWN_ERROR_CODE"
    text = f"{name} ({code})"
    if context:
        text = f"{context}: {text}"
    cls = error_class(code)
    message = message or cls.default_message
    if message:
        text = f"{text}: {message}"
    return cls(text)
