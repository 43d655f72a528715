"""Record formats of the internal `__transaction_state` topic, as Kafka writes them.

A key is a big-endian int16 key version (0), then TransactionLogKey v0:

    TransactionalId: str                  int16 length + UTF-8 bytes (non-flexible)

A value is a big-endian int16 value version (0 or 1; Kafka 4 writes 1), then
TransactionLogValue, whose fields in order are:

    ProducerId                        int64
    PreviousProducerId                int64  tagged (v1+, tag 0, default -1)
    NextProducerId                    int64  tagged (v1+, tag 1, default -1)
    ProducerEpoch                     int16
    TransactionTimeoutMs              int32
    TransactionStatus                 int8   (TxnStatus: EMPTY=0 ... PREPARE_EPOCH_FENCE=7)
    TransactionPartitions             nullable array of PartitionsSchema
                                          Topic: str, PartitionIds: array of int32
    TransactionLastUpdateTimestampMs  int64
    TransactionStartTimestampMs       int64
    ClientTransactionVersion          int16  tagged (v1+, tag 2, default 0)

Version 0 is non-flexible: strings int16-length-prefixed, arrays int32-count-prefixed
(-1 = null). Version 1 is flexible: strings are COMPACT (unsigned varint length+1),
arrays COMPACT (unsigned varint count+1, 0 = null), and every struct (each
PartitionsSchema entry and the value itself) ends with a tagged-field section: an
unsigned varint count, then per field an unsigned varint tag, an unsigned varint size
and the data. Tagged fields holding their default are not written; unknown tags are
skipped on read. Tagged fields only exist from v1 on, so writing v0 with a
non-default tagged field is refused (as Kafka does).

Like Kafka, an EMPTY transaction with no partitions is written with a null
TransactionPartitions; a null array reads back as no partitions.

A null value is a tombstone: the transactional id was removed (expired). The topic is
compacted, so only the newest value per key survives. Transactional-id placement
follows Kafka: partition = abs(java_string_hash(transactional_id)) %
transaction.state.log.num.partitions.
"""

from __future__ import annotations

import dataclasses
import enum
import struct

from logbroker.coord.groups import offsets_topic
from logbroker.coord.groups.record_fields import FieldReader, FieldWriter

TRANSACTION_STATE_TOPIC = "__transaction_state"

partition_for = offsets_topic.partition_for  # placement: as consumer groups

_KEY_VERSION = 0
_VALUE_VERSIONS = (0, 1)

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TransactionLogError(ValueError):
    pass


class TxnStatus(enum.IntEnum):
    """Kafka's TransactionState, by the id stored as TransactionStatus."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The state name DescribeTransactions / ListTransactions report."""
        return _KAFKA_NAMES[self]


_KAFKA_NAMES = {
    TxnStatus.EMPTY: "Empty",
    TxnStatus.ONGOING: "Ongoing",
    TxnStatus.PREPARE_COMMIT: "PrepareCommit",
    TxnStatus.PREPARE_ABORT: "PrepareAbort",
    TxnStatus.COMPLETE_COMMIT: "CompleteCommit",
    TxnStatus.COMPLETE_ABORT: "CompleteAbort",
    TxnStatus.DEAD: "Dead",
    TxnStatus.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}


@dataclasses.dataclass
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: TxnStatus
    partitions: dict[str, list[int]]  # topic -> sorted partition ids; {} when none
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def txn_key(transactional_id: str) -> bytes:
    w = FieldWriter("TransactionLogKey", TransactionLogError)
    return bytes(w.i16(_KEY_VERSION, "key version").string(transactional_id, "TransactionalId", False).b)


def parse_txn_key(key: bytes) -> str:
    r = FieldReader(key, "TransactionLogKey", TransactionLogError)
    version = r.i16("key version")
    if version != _KEY_VERSION:
        raise TransactionLogError(f"TransactionLogKey: unknown key version {version}")
    transactional_id = r.string("TransactionalId", False)
    r.end()
    return transactional_id


def txn_value(v: TxnLogValue, version: int = 1) -> bytes:
    """Encode `v` as TransactionLogValue `version` (1, flexible, by default; or 0)."""
    what = f"TransactionLogValue v{version}"
    if version not in _VALUE_VERSIONS:
        raise TransactionLogError(f"TransactionLogValue: cannot write unknown version {version}")
    flexible = version >= 1
    tags: list[tuple[int, bytes]] = []
    for tag, s, field, value, default in (
        (_TAG_PREVIOUS_PRODUCER_ID, _I64, "PreviousProducerId", v.previous_producer_id, -1),
        (_TAG_NEXT_PRODUCER_ID, _I64, "NextProducerId", v.next_producer_id, -1),
        (_TAG_CLIENT_TRANSACTION_VERSION, _I16, "ClientTransactionVersion", v.client_transaction_version, 0),
    ):
        if value == default:
            continue
        if not flexible:
            raise TransactionLogError(f"{what}: cannot write non-default {field} {value!r} (tagged, v1+)")
        tags.append((tag, bytes(FieldWriter(what, TransactionLogError).pack(s, value, field).b)))
    try:
        status = TxnStatus(v.status)
    except ValueError:
        raise TransactionLogError(f"{what}: bad TransactionStatus {v.status!r}") from None

    w = FieldWriter(what, TransactionLogError).i16(version, "value version").i64(v.producer_id, "ProducerId")
    w.i16(v.producer_epoch, "ProducerEpoch").i32(v.timeout_ms, "TransactionTimeoutMs")
    w.i8(status, "TransactionStatus")
    if status == TxnStatus.EMPTY and not v.partitions:
        w.array_len(None, "TransactionPartitions", flexible)
    else:
        w.array_len(len(v.partitions), "TransactionPartitions", flexible)
        for topic in sorted(v.partitions):
            ids = sorted(set(v.partitions[topic]))
            w.string(topic, "Topic", flexible).array_len(len(ids), "PartitionIds", flexible)
            for p in ids:
                w.i32(p, "PartitionIds")
            if flexible:
                w.uvarint(0)  # PartitionsSchema: no tagged fields
    w.i64(v.last_update_ms, "TransactionLastUpdateTimestampMs").i64(v.start_ms, "TransactionStartTimestampMs")
    if flexible:
        w.uvarint(len(tags))
        for tag, data in tags:
            w.uvarint(tag).uvarint(len(data)).raw(data)
    return bytes(w.b)


def parse_txn_value(value: bytes) -> TxnLogValue:
    """Decode a TransactionLogValue of version 0 or 1 (not a tombstone: check for None first)."""
    r = FieldReader(value, "TransactionLogValue", TransactionLogError)
    version = r.i16("value version")
    if version not in _VALUE_VERSIONS:
        raise TransactionLogError(f"TransactionLogValue: unknown version {version}")
    r.what = f"TransactionLogValue v{version}"
    flexible = version >= 1
    producer_id = r.i64("ProducerId")
    producer_epoch = r.i16("ProducerEpoch")
    timeout_ms = r.i32("TransactionTimeoutMs")
    code = r.i8("TransactionStatus")
    try:
        status = TxnStatus(code)
    except ValueError:
        raise TransactionLogError(f"{r.what}: bad TransactionStatus code {code}") from None
    partitions: dict[str, set[int]] = {}
    n_topics = r.array_len("TransactionPartitions", flexible)
    for _ in range(n_topics or 0):
        topic = r.string("Topic", flexible)
        n_ids = r.array_len("PartitionIds", flexible)
        if n_ids is None:
            raise TransactionLogError(f"{r.what}: PartitionIds of topic {topic!r} is null")
        raw = r.take(4 * n_ids, "PartitionIds")
        partitions.setdefault(topic, set()).update(x for (x,) in _I32.iter_unpack(raw))
        if flexible:
            r.tagged_fields("PartitionsSchema")  # none known: skip them all
    last_update_ms = r.i64("TransactionLastUpdateTimestampMs")
    start_ms = r.i64("TransactionStartTimestampMs")
    out = TxnLogValue(
        producer_id,
        producer_epoch,
        timeout_ms,
        status,
        {t: sorted(partitions[t]) for t in sorted(partitions)},
        last_update_ms,
        start_ms,
    )
    if flexible:
        for tag, data in r.tagged_fields("TransactionLogValue").items():
            if tag == _TAG_PREVIOUS_PRODUCER_ID:
                out.previous_producer_id = _tagged(r.what, "PreviousProducerId", _I64, data)
            elif tag == _TAG_NEXT_PRODUCER_ID:
                out.next_producer_id = _tagged(r.what, "NextProducerId", _I64, data)
            elif tag == _TAG_CLIENT_TRANSACTION_VERSION:
                out.client_transaction_version = _tagged(r.what, "ClientTransactionVersion", _I16, data)
            # unknown tags: skipped
    r.end()
    return out


def _tagged(what: str, field: str, s: struct.Struct, data: bytes) -> int:
    if len(data) != s.size:
        raise TransactionLogError(f"{what}: tagged {field} has {len(data)} bytes, expected {s.size}")
    return int(s.unpack(data)[0])
