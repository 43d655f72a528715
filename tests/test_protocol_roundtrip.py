"""Property tests: every generated message round-trips at every valid version.

Instances are built by hypothesis from each class's `_fields` metadata (spec facts the
generator records): only fields the version carries get random values, nullable fields
may be None where the version allows it, tagged fields may hold non-default values, and
flexible versions get random unknown tagged fields. For each instance:
encode -> decode gives an equal object that consumed every byte, and re-encoding the
decoded object gives the same bytes.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbroker.protocol import REQUESTS, RESPONSES, ProtocolError, RequestHeader, ResponseHeader

MESSAGES = [*REQUESTS.values(), *RESPONSES.values(), RequestHeader, ResponseHeader]
CASES = [
    pytest.param(cls, v, id=f"{cls.name}-v{v}")
    for cls in MESSAGES
    for v in range(cls.valid_versions[0], cls.valid_versions[1] + 1)
]

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
UUIDS = st.one_of(st.just(uuid.UUID(int=0)), st.uuids())


def _in(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


def value_strategy(kind, elem, version, fmin, depth):
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]
        return st.one_of(st.integers(max(lo, -2), 2), st.integers(lo, hi))
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return TEXT
    if kind == "bytes":
        return st.binary(max_size=8)
    if kind == "records":
        return st.binary(max_size=24)
    if kind == "uuid":
        return UUIDS
    if kind == "array":
        if isinstance(elem, str):
            inner = value_strategy(elem, None, version, fmin, depth + 1)
        else:
            inner = struct_strategy(elem, version, fmin, depth + 1)
        return st.lists(inner, max_size=3 if depth < 2 else 1)
    if kind == "struct":
        return struct_strategy(elem, version, fmin, depth + 1)
    raise AssertionError(kind)


def struct_strategy(cls, version, fmin, depth=0):
    kwargs = {}
    for f in cls._fields:
        if not _in(f.versions, version):
            continue
        s = value_strategy(f.kind, f.elem, version, fmin, depth)
        if _in(f.nullable, version):
            s = st.one_of(st.none(), s)
        kwargs[f.attr] = s
    if fmin is not None and version >= fmin:
        # unknown tags well away from the small numbers the specs use
        kwargs["unknown_tagged_fields"] = st.dictionaries(st.integers(90, 300), st.binary(max_size=5), max_size=2)
    return st.builds(lambda **kw: cls(**kw), **kwargs)


def _flexible_min(cls):
    return cls.flexible_versions_min


def encode(obj, version) -> bytes:
    return obj.to_bytes(version)


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_default_instance_roundtrips(cls, version):
    obj = cls()
    data = encode(obj, version)
    back, end = cls.decode(data, 0, version)
    assert end == len(data)
    assert back == obj


@pytest.mark.parametrize(("cls", "version"), CASES)
@settings(
    # 8 per message version (about 6,000 instances a run; 12 made this module 124 of the CI
    # run's test-seconds); a run finds what it finds, the next run draws others
    max_examples=8,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_roundtrip(cls, version, data):
    obj = data.draw(struct_strategy(cls, version, _flexible_min(cls)))
    raw = encode(obj, version)
    back, end = cls.decode(raw, 0, version)
    assert end == len(raw)
    assert back == obj, f"{obj!r}\n!=\n{back!r}"
    assert encode(back, version) == raw
    # decoding at an offset inside a larger buffer works the same
    back2, end2 = cls.decode(b"\x99" * 3 + raw + b"\x77", 3, version)
    assert back2 == obj and end2 == 3 + len(raw)


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_every_truncation_is_a_protocol_error(cls, version):
    """A populated instance cut short anywhere raises ProtocolError (never IndexError etc.)."""
    raw = encode(_populated(cls, version), version)
    for cut in range(len(raw)):
        with pytest.raises(ProtocolError) as info:
            cls.decode(raw[:cut], 0, version)
        e = info.value
        assert e.api == cls.name and e.version == version
        assert e.field is not None and e.field.split(".")[0], str(e)


def _populated(cls, version, depth=0):
    """A deterministic instance with one element in every array and non-empty strings."""
    kw = {}
    for f in cls._fields:
        if not _in(f.versions, version):
            continue
        kw[f.attr] = _sample(f.kind, f.elem, version, depth)
    return cls(**kw)


def _sample(kind, elem, version, depth):
    if kind in INT_RANGES:
        return 7
    if kind == "bool":
        return True
    if kind == "float64":
        return 1.5
    if kind == "string":
        return "sé"
    if kind in ("bytes", "records"):
        return b"\x01\x02\x03"
    if kind == "uuid":
        return uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF)
    if kind == "array":
        if isinstance(elem, str):
            return [_sample(elem, None, version, depth + 1)]
        return [_populated(elem, version, depth + 1)] if depth < 4 else []
    if kind == "struct":
        return _populated(elem, version, depth + 1)
    raise AssertionError(kind)


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_populated_roundtrip(cls, version):
    obj = _populated(cls, version)
    raw = encode(obj, version)
    back, end = cls.decode(raw, 0, version)
    assert end == len(raw)
    assert back == obj
    assert encode(back, version) == raw


def test_case_count():
    # 82 APIs x 2 plus the two headers, every version in their ranges
    assert len(MESSAGES) == 166
    assert len(
        CASES
    ) == 402 + 2 * 3 + 2 * 2 + 2 * 4 + 2 * 3 + 2 * 2 + 2 * 1 + 2 * 5 + 2 * 1 + 2 * 2 + 2 * 10 + 2 * 7 + (
        2 * 3 * 3 + 2 * 2 * 2 + 2 * 2 * 1
    ) + 2 * (3 + 2 + 1 + 1) + 2 * 1 + 2 * 1 + 2 * (2 + 1 + 1) + 2 * 2 + 2 * (3 + 2 + 2 + 3) + 2 * (
        2 + 2 + 1 + 1 + 1
    ) + 2 * (
        1 + 1 + 1 + 1 - 1 + 1 + 1 + 1 - 2 + 1
    )  # Kafka 4.4's definitions: the streams-group APIs 88 v0-1, 89 v0-1, 93 v0, UnregisterBroker and
    # UnregisterController v0; ApiVersions v5, DeleteGroups v3, ListOffsets v11, TxnOffsetCommit v6, DescribeLogDirs
    # v0 gone and v5 new, ListTransactions v2, WriteTxnMarkers v2, AlterPartition v0-1 gone, BrokerHeartbeat v2
    # + the delegation-token APIs: Create v1-3, Renew v1-2, Expire v1-2, Describe v1-3
    # + DescribeQuorum v0-2, BrokerHeartbeat v0-1, AlterPartition v0-3, ElectLeaders v0-2,
    # AlterPartitionReassignments v0-1, ListPartitionReassignments v0, DescribeLogDirs v0-4,
    # DescribeTransactions v0, ListTransactions v0-1, and the share-group APIs: ShareGroupHeartbeat v1,
    # ShareGroupDescribe v1, ShareFetch v1-2, ShareAcknowledge v1-2, DescribeShareGroupOffsets v0-1,
    # AlterShareGroupOffsets v0, DeleteShareGroupOffsets v0, and the share-state APIs: InitializeShareGroupState v0,
    # ReadShareGroupState v0, WriteShareGroupState v0-1, DeleteShareGroupState v0, ReadShareGroupStateSummary v0-1,
    # and the security APIs: Describe/Create/DeleteAcls v1-3, Describe/AlterClientQuotas v0-1,
    # Describe/AlterUserScramCredentials v0, and UpdateFeatures v0-2, AddRaftVoter v0-1, RemoveRaftVoter v0,
    # UpdateRaftVoter v0, OffsetDelete v0, DescribeTopicPartitions v0, ListConfigResources v0-1,
    # GetTelemetrySubscriptions v0, PushTelemetry v0, AlterReplicaLogDirs v1-2
