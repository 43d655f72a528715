"""The `__transaction_state` record formats (TransactionLogKey / TransactionLogValue):
byte layout against hand-built encodings, round trips, and robustness on bad input."""

from __future__ import annotations

import random
import struct

import pytest

from logbroker.coord.groups import offsets_topic
from logbroker.coord.groups.transaction_log import (
    TRANSACTION_STATE_TOPIC,
    TransactionLogError,
    TxnLogValue,
    TxnStatus,
    parse_txn_key,
    parse_txn_value,
    partition_for,
    txn_key,
    txn_value,
)

# -- hand encoders, written from the schema, independent of the module under test --


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def uvarint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def str16(s: str) -> bytes:
    raw = s.encode()
    return i16(len(raw)) + raw


def compact_str(s: str) -> bytes:
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def value(**kw) -> TxnLogValue:
    base: dict = dict(
        producer_id=4000,
        producer_epoch=7,
        timeout_ms=60000,
        status=TxnStatus.ONGOING,
        partitions={"orders": [0, 2], "payments": [1]},
        last_update_ms=1_700_000_000_123,
        start_ms=1_700_000_000_000,
    )
    base.update(kw)
    return TxnLogValue(**base)


# -- status codes --


def test_status_codes_and_kafka_names():
    expected = [
        ("EMPTY", 0, "Empty"),
        ("ONGOING", 1, "Ongoing"),
        ("PREPARE_COMMIT", 2, "PrepareCommit"),
        ("PREPARE_ABORT", 3, "PrepareAbort"),
        ("COMPLETE_COMMIT", 4, "CompleteCommit"),
        ("COMPLETE_ABORT", 5, "CompleteAbort"),
        ("DEAD", 6, "Dead"),
        ("PREPARE_EPOCH_FENCE", 7, "PrepareEpochFence"),
    ]
    assert [(s.name, int(s), s.kafka_name) for s in TxnStatus] == expected
    assert TRANSACTION_STATE_TOPIC == "__transaction_state"


# -- keys --


def test_key_bytes_and_round_trip():
    assert txn_key("my-txn") == i16(0) + i16(6) + b"my-txn"
    for tid in ["", "t", "my-txn", "ünïcödé-🙂", "x" * 1000]:
        assert parse_txn_key(txn_key(tid)) == tid


@pytest.mark.parametrize(
    "raw,match",
    [
        (i16(1) + str16("t"), "unknown key version 1"),
        (i16(-1) + str16("t"), "unknown key version -1"),
        (i16(0) + str16("t") + b"\x00", "trailing"),
        (i16(0) + i16(-1), "null"),
        (i16(0) + i16(-5), "negative length"),
        (i16(0) + i16(2) + b"\xff\xfe", "UTF-8"),
        (b"", "truncated"),
    ],
)
def test_bad_keys(raw, match):
    with pytest.raises(TransactionLogError, match=match):
        parse_txn_key(raw)


def test_key_truncated_at_every_length():
    key = txn_key("some-transactional-id")
    for n in range(len(key)):
        with pytest.raises(TransactionLogError, match="truncated"):
            parse_txn_key(key[:n])


# -- values: hand-built encodings --


def test_v0_hand_built_parses():
    raw = (
        i16(0)
        + i64(123456789)
        + i16(3)
        + i32(900000)
        + i8(2)
        + i32(2)
        + str16("b-topic")
        + i32(3)
        + i32(5)
        + i32(1)
        + i32(3)
        + str16("a-topic")
        + i32(1)
        + i32(0)
        + i64(1_700_000_000_999)
        + i64(1_700_000_000_500)
    )
    v = parse_txn_value(raw)
    assert v == TxnLogValue(
        producer_id=123456789,
        producer_epoch=3,
        timeout_ms=900000,
        status=TxnStatus.PREPARE_COMMIT,
        partitions={"a-topic": [0], "b-topic": [1, 3, 5]},
        last_update_ms=1_700_000_000_999,
        start_ms=1_700_000_000_500,
    )
    assert v.status.kafka_name == "PrepareCommit"
    # the writer produces the same bytes, topics and ids sorted
    expected = (
        i16(0)
        + i64(123456789)
        + i16(3)
        + i32(900000)
        + i8(2)
        + i32(2)
        + str16("a-topic")
        + i32(1)
        + i32(0)
        + str16("b-topic")
        + i32(3)
        + i32(1)
        + i32(3)
        + i32(5)
        + i64(1_700_000_000_999)
        + i64(1_700_000_000_500)
    )
    assert txn_value(v, version=0) == expected


def test_v0_hand_built_null_partitions():
    raw = i16(0) + i64(5) + i16(0) + i32(1000) + i8(0) + i32(-1) + i64(10) + i64(-1)
    v = parse_txn_value(raw)
    assert v.partitions == {} and v.status is TxnStatus.EMPTY and v.start_ms == -1
    assert txn_value(v, version=0) == raw


def test_v1_hand_built_matches_writer():
    v = value(previous_producer_id=3999, client_transaction_version=2)
    raw = (
        i16(1)
        + i64(4000)
        + i16(7)
        + i32(60000)
        + i8(1)
        + uvarint(3)
        + compact_str("orders")
        + uvarint(3)
        + i32(0)
        + i32(2)
        + uvarint(0)
        + compact_str("payments")
        + uvarint(2)
        + i32(1)
        + uvarint(0)
        + i64(1_700_000_000_123)
        + i64(1_700_000_000_000)
        + uvarint(2)
        + uvarint(0)
        + uvarint(8)
        + i64(3999)
        + uvarint(2)
        + uvarint(2)
        + i16(2)
    )
    assert txn_value(v) == raw
    assert parse_txn_value(raw) == v


def test_v1_unknown_tags_skipped():
    raw = (
        i16(1)
        + i64(77)
        + i16(1)
        + i32(30000)
        + i8(4)
        + uvarint(2)
        # a PartitionsSchema entry with an unknown tag of its own
        + compact_str("t")
        + uvarint(2)
        + i32(9)
        + uvarint(1)
        + uvarint(5)
        + uvarint(3)
        + b"xyz"
        + i64(200)
        + i64(100)
        + uvarint(3)
        + uvarint(1)
        + uvarint(8)
        + i64(78)
        + uvarint(42)
        + uvarint(4)
        + b"\x00\x01\x02\x03"  # unknown
        + uvarint(300)
        + uvarint(0)
    )  # unknown, multi-byte tag, empty
    v = parse_txn_value(raw)
    assert v == TxnLogValue(
        producer_id=77,
        producer_epoch=1,
        timeout_ms=30000,
        status=TxnStatus.COMPLETE_COMMIT,
        partitions={"t": [9]},
        last_update_ms=200,
        start_ms=100,
        next_producer_id=78,
    )


def test_v1_null_partitions_and_no_tags():
    raw = i16(1) + i64(1) + i16(0) + i32(1) + i8(0) + uvarint(0) + i64(2) + i64(3) + uvarint(0)
    v = parse_txn_value(raw)
    assert v == TxnLogValue(1, 0, 1, TxnStatus.EMPTY, {}, 2, 3)
    assert txn_value(v) == raw


# -- values: round trips --


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize(
    "v",
    [
        value(),
        value(status=TxnStatus.EMPTY, partitions={}, start_ms=-1),  # written as a null array
        value(status=TxnStatus.COMPLETE_ABORT, partitions={}),  # written as an empty array
        value(status=TxnStatus.PREPARE_EPOCH_FENCE, producer_id=-1, producer_epoch=-1),
        value(
            partitions={"ü-topic": list(range(100)), "": [0]},
            timeout_ms=2**31 - 1,
            last_update_ms=2**63 - 1,
            start_ms=-(2**63),
        ),
    ],
    ids=["ongoing", "empty-null", "abort-empty", "fence", "extremes"],
)
def test_round_trip(version, v):
    assert parse_txn_value(txn_value(v, version=version)) == v


def test_null_vs_empty_partitions_bytes():
    null_v0 = txn_value(value(status=TxnStatus.EMPTY, partitions={}), version=0)
    empty_v0 = txn_value(value(status=TxnStatus.COMPLETE_COMMIT, partitions={}), version=0)
    assert null_v0[17:21] == i32(-1) and empty_v0[17:21] == i32(0)
    null_v1 = txn_value(value(status=TxnStatus.EMPTY, partitions={}))
    empty_v1 = txn_value(value(status=TxnStatus.COMPLETE_COMMIT, partitions={}))
    assert null_v1[17:18] == uvarint(0) and empty_v1[17:18] == uvarint(1)


def test_round_trip_random():
    rnd = random.Random(20240601)
    for _ in range(300):
        status = rnd.choice(list(TxnStatus))
        parts = {
            f"topic-{rnd.randrange(50)}": sorted(rnd.sample(range(1000), rnd.randrange(1, 8)))
            for _ in range(rnd.randrange(0, 5))
        }
        v = TxnLogValue(
            rnd.randrange(-1, 2**63),
            rnd.randrange(-1, 2**15),
            rnd.randrange(0, 2**31),
            status,
            parts,
            rnd.randrange(-1, 2**62),
            rnd.randrange(-1, 2**62),
        )
        assert parse_txn_value(txn_value(v, version=0)) == v
        v.previous_producer_id = rnd.choice([-1, rnd.randrange(2**63)])
        v.next_producer_id = rnd.choice([-1, rnd.randrange(2**63)])
        v.client_transaction_version = rnd.choice([0, 1, 2, 2**15 - 1])
        assert parse_txn_value(txn_value(v)) == v


def test_parse_sorts_and_merges_partitions():
    raw = (
        i16(0)
        + i64(1)
        + i16(0)
        + i32(1)
        + i8(1)
        + i32(3)
        + str16("z")
        + i32(2)
        + i32(4)
        + i32(2)
        + str16("a")
        + i32(1)
        + i32(1)
        + str16("z")
        + i32(2)
        + i32(2)
        + i32(0)
        + i64(0)
        + i64(0)
    )
    v = parse_txn_value(raw)
    assert v.partitions == {"a": [1], "z": [0, 2, 4]} and list(v.partitions) == ["a", "z"]


# -- tagged fields: defaults are omitted --


def test_tagged_defaults_omitted():
    base = len(txn_value(value()))
    # v0 and v1 differ by: compact lengths (1 byte each instead of 2 or 4), one empty tag
    # section per partition entry and one for the value
    v0 = txn_value(value(), version=0)
    assert len(v0) == 2 + 8 + 2 + 4 + 1 + 4 + (2 + 6 + 4 + 8) + (2 + 8 + 4 + 4) + 8 + 8
    assert base == 2 + 8 + 2 + 4 + 1 + 1 + (1 + 6 + 1 + 8 + 1) + (1 + 8 + 1 + 4 + 1) + 8 + 8 + 1
    assert txn_value(value())[-1:] == uvarint(0)
    assert len(txn_value(value(previous_producer_id=5))) == base + 1 + 1 + 8
    assert len(txn_value(value(next_producer_id=5))) == base + 1 + 1 + 8
    assert len(txn_value(value(client_transaction_version=2))) == base + 1 + 1 + 2
    assert (
        len(txn_value(value(previous_producer_id=5, next_producer_id=6, client_transaction_version=2)))
        == base + 10 + 10 + 4
    )
    # explicitly passing the defaults changes nothing
    assert txn_value(value(previous_producer_id=-1, next_producer_id=-1, client_transaction_version=0)) == txn_value(
        value()
    )


def test_v0_refuses_non_default_tagged_fields():
    for kw in [dict(previous_producer_id=1), dict(next_producer_id=1), dict(client_transaction_version=2)]:
        with pytest.raises(TransactionLogError, match="tagged"):
            txn_value(value(**kw), version=0)


def test_write_errors():
    with pytest.raises(TransactionLogError, match="unknown version 2"):
        txn_value(value(), version=2)
    with pytest.raises(TransactionLogError, match="ProducerEpoch"):
        txn_value(value(producer_epoch=2**15))
    with pytest.raises(TransactionLogError, match="TransactionStatus"):
        txn_value(value(status=9))


# -- values: bad input --


@pytest.mark.parametrize(
    "raw,match",
    [
        (i16(2) + i64(0), "unknown version 2"),
        (i16(-1), "unknown version -1"),
        (b"\x00", "truncated at value version"),
        (i16(0) + i64(1) + i16(0), "truncated at TransactionTimeoutMs"),
        (i16(0) + i64(1) + i16(0) + i32(0) + i8(8) + i32(-1) + i64(0) + i64(0), "bad TransactionStatus code 8"),
        (i16(0) + i64(1) + i16(0) + i32(0) + i8(-1) + i32(-1) + i64(0) + i64(0), "bad TransactionStatus code -1"),
        (i16(0) + i64(1) + i16(0) + i32(0) + i8(0) + i32(-1) + i64(0) + i64(0) + b"\x00", "trailing"),
        (i16(1) + i64(1) + i16(0) + i32(0) + i8(0) + uvarint(0) + i64(0) + i64(0) + uvarint(0) + b"\x00", "trailing"),
        (i16(0) + i64(1) + i16(0) + i32(0) + i8(1) + i32(-2), "negative length"),
        (i16(0) + i64(1) + i16(0) + i32(0) + i8(1) + i32(1) + str16("t") + i32(-1), "PartitionIds .* null"),
        (i16(0) + i64(1) + i16(0) + i32(0) + i8(1) + i32(1) + i16(-1), "Topic is null"),
        (i16(1) + i64(1) + i16(0) + i32(0) + i8(1) + uvarint(2) + uvarint(0), "Topic is null"),
        (i16(0) + i64(1) + i16(0) + i32(0) + i8(1) + i32(1) + i16(1) + b"\xff", "UTF-8"),
        (i16(0) + i64(1) + i16(0) + i32(0) + i8(1) + i32(1) + str16("t") + i32(1000), "truncated at PartitionIds"),
        (
            i16(1)
            + i64(1)
            + i16(0)
            + i32(0)
            + i8(0)
            + uvarint(0)
            + i64(0)
            + i64(0)
            + uvarint(1)
            + uvarint(0)
            + uvarint(4)
            + i32(0),
            "PreviousProducerId has 4 bytes",
        ),
        (
            i16(1)
            + i64(1)
            + i16(0)
            + i32(0)
            + i8(0)
            + uvarint(0)
            + i64(0)
            + i64(0)
            + uvarint(1)
            + uvarint(9)
            + uvarint(10)
            + b"abc",
            "truncated at TransactionLogValue tag 9 data",
        ),
        (i16(1) + i64(1) + i16(0) + i32(0) + i8(0) + b"\xff\xff\xff\xff\xff\x01", "longer than 5 bytes"),
        (i16(1) + i64(1) + i16(0) + i32(0) + i8(0) + b"\xff\xff\xff\xff\x7f", "32 bits"),
    ],
)
def test_bad_values(raw, match):
    with pytest.raises(TransactionLogError, match=match):
        parse_txn_value(raw)


@pytest.mark.parametrize("version", [0, 1])
def test_value_truncated_at_every_length(version):
    full = txn_value(
        value(next_producer_id=4001, client_transaction_version=2) if version else value(), version=version
    )
    parse_txn_value(full)
    for n in range(len(full)):
        with pytest.raises(TransactionLogError, match="truncated") as e:
            parse_txn_value(full[:n])
        assert str(e.value).startswith("TransactionLogValue")


def test_random_garbage_only_transaction_log_error():
    rnd = random.Random(1234)
    valid = [
        txn_value(value(), version=0),
        txn_value(value()),
        txn_value(value(previous_producer_id=1, next_producer_id=2, client_transaction_version=2)),
        txn_value(value(status=TxnStatus.EMPTY, partitions={})),
    ]
    parsed = 0
    for i in range(4000):
        kind = i % 4
        if kind == 0:  # pure noise
            raw = rnd.randbytes(rnd.randrange(0, 80))
        elif kind == 1:  # noise behind a valid version header, to get past the first check
            raw = rnd.choice([i16(0), i16(1)]) + rnd.randbytes(rnd.randrange(0, 80))
        else:  # a valid encoding with a few bytes changed, inserted or removed
            b = bytearray(rnd.choice(valid))
            for _ in range(rnd.randrange(1, 4)):
                op, at = rnd.randrange(3), rnd.randrange(len(b) + 1)
                if op == 0 and at < len(b):
                    b[at] = rnd.randrange(256)
                elif op == 1:
                    b[at:at] = rnd.randbytes(rnd.randrange(1, 4))
                else:
                    del b[at : at + rnd.randrange(1, 4)]
            raw = bytes(b)
        try:
            v = parse_txn_value(raw)
        except TransactionLogError:
            pass
        else:
            parsed += 1
            assert isinstance(v.status, TxnStatus)
        try:
            parse_txn_key(raw)
        except TransactionLogError:
            pass
    assert parsed > 0


# -- placement --


def java_hash(s: str) -> int:
    """String.hashCode from its definition: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code
    units, in 32-bit two's complement."""
    units = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    n = len(units)
    h = sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units)) % 2**32
    return h - 2**32 if h >= 2**31 else h


def test_java_hash_reference_values():
    # known String.hashCode() values, to validate the test's own reference implementation
    assert java_hash("hello") == 99162322
    assert java_hash("") == 0
    assert java_hash("Aa") == java_hash("BB") == 2112
    assert java_hash("polygenelubricants") == -(2**31)


@pytest.mark.parametrize(
    "tid",
    [
        "hello",
        "",
        "a",
        "Aa",
        "my-transactional-id",
        "txn-0",
        "txn-17",
        "ünïcödé",
        "emoji-🙂-id",
        "polygenelubricants",
        "x" * 200,
    ],
)
@pytest.mark.parametrize("num_partitions", [1, 3, 50, 1000])
def test_partition_for(tid, num_partitions):
    h = java_hash(tid)
    expected = (0 if h == -(2**31) else abs(h)) % num_partitions
    assert partition_for(tid, num_partitions) == expected
    assert 0 <= expected < num_partitions


def test_partition_for_special_hashes():
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 7) == 0  # hashCode is Integer.MIN_VALUE
    negatives = [t for t in (f"txn-{i}" for i in range(200)) if java_hash(t) < 0]
    assert negatives
    for t in negatives:
        assert partition_for(t, 50) == (-java_hash(t)) % 50
    # same placement rule as consumer groups in __consumer_offsets
    for t in ["hello", "txn-5", "polygenelubricants", *negatives[:5]]:
        assert partition_for(t, 50) == offsets_topic.partition_for(t, 50)
    with pytest.raises(ValueError):
        partition_for("hello", 0)
