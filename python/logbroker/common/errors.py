"""The one place where storage errors become Kafka error codes.

The Rust engine raises one exception class per way an append, read or open can fail
(`logbroker._core.*Error`, all subclasses of `LogBrokerError`); handlers turn them into
the protocol's error code here and put the exception text (which names the topic,
partition, offset, file and values) in the response's error message and the log.
"""

from __future__ import annotations

from logbroker import _core
from logbroker.protocol import ErrorCode

_CODES: list[tuple[type, ErrorCode]] = [
    (_core.CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
    (_core.RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (_core.InvalidRecordError, ErrorCode.INVALID_RECORD),
    (_core.OffsetOutOfRangeError, ErrorCode.OFFSET_OUT_OF_RANGE),
    (_core.OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (_core.InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (_core.InvalidTxnStateError, ErrorCode.INVALID_TXN_STATE),
    (_core.CoordinatorFencedError, ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    (_core.KafkaStorageError, ErrorCode.KAFKA_STORAGE_ERROR),
    (_core.InvalidConfigError, ErrorCode.INVALID_CONFIG),
]


def error_code_for(exc: BaseException) -> ErrorCode:
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    if isinstance(exc, OSError):
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.UNKNOWN_SERVER_ERROR
