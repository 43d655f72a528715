"""The codec against golden encodings: tests/corpus/protocol/golden.txt holds, for every
message and version, the bytes of a default instance and of a populated one (every field
the version carries set, one element in every array) as the independent Python codec
encoded them before the Rust codec replaced it. The Rust codec must encode the same
instances to the same bytes, decode those bytes back to equal objects consuming every
byte, and re-encode them unchanged without Python (the broker's data path).
Cut short anywhere, a message is a ProtocolError naming its field."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_protocol_roundtrip import CASES, MESSAGES, _populated

from logbroker import _core
from logbroker.protocol import REQUESTS, ProtocolError, RequestHeader, ResponseHeader

GOLDEN = Path(__file__).parent / "corpus" / "protocol" / "golden.txt"
BY_NAME = {cls.name: cls for cls in MESSAGES}


def _golden() -> list:
    out = []
    for line in GOLDEN.read_text().splitlines():
        if line.startswith("#"):
            continue
        name, version, which, hexed = line.split(" ")
        out.append(
            pytest.param(BY_NAME[name], int(version), which, bytes.fromhex(hexed), id=f"{name}-v{version}-{which}")
        )
    return out


GOLDEN_CASES = _golden()


def api_of(cls) -> tuple[int, bool]:
    """(api key, is request) as protocol_reencode takes them; headers are api key -1."""
    if cls is RequestHeader:
        return -1, True
    if cls is ResponseHeader:
        return -1, False
    request = any(c is cls for c in REQUESTS.values())
    return cls.api_key, request


# Messages added after the Python codec was retired (the cluster's own APIs): no independent
# encoding exists for them, so the round-trip and fuzz tests are what checks them.
LATER = {
    "DescribeTransactionsRequest",
    "DescribeTransactionsResponse",
    "ListTransactionsRequest",
    "ListTransactionsResponse",
    "DescribeQuorumRequest",
    "DescribeQuorumResponse",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
    "DescribeLogDirsRequest",
    "DescribeLogDirsResponse",
    *(
        f"{api}{kind}"
        for api in (
            "ShareGroupHeartbeat",
            "ShareGroupDescribe",
            "ShareFetch",
            "ShareAcknowledge",
            "DescribeShareGroupOffsets",
            "AlterShareGroupOffsets",
            "DeleteShareGroupOffsets",
            "InitializeShareGroupState",
            "ReadShareGroupState",
            "WriteShareGroupState",
            "DeleteShareGroupState",
            "ReadShareGroupStateSummary",
            "DescribeAcls",
            "CreateAcls",
            "DeleteAcls",
            "DescribeClientQuotas",
            "AlterClientQuotas",
            "DescribeUserScramCredentials",
            "AlterUserScramCredentials",
            "UpdateFeatures",
            "AddRaftVoter",
            "RemoveRaftVoter",
            "UpdateRaftVoter",
            "OffsetDelete",
            "DescribeTopicPartitions",
            "ListConfigResources",
            "GetTelemetrySubscriptions",
            "PushTelemetry",
            "AlterReplicaLogDirs",
            "StreamsGroupHeartbeat",
            "StreamsGroupDescribe",
            "StreamsGroupTopologyDescriptionUpdate",
            "UnregisterBroker",
            "UnregisterController",
            "CreateDelegationToken",
            "RenewDelegationToken",
            "ExpireDelegationToken",
            "DescribeDelegationToken",
        )
        for kind in ("Request", "Response")
    ),
}
# (the security APIs are checked on the wire by Kafka's own tools and librdkafka: tests/test_acls.py,
# tests/test_scram_credentials.py)


# Versions the Kafka 4.4.0 definitions added to messages the golden file covers (issue 47):
# the first such version of each; round trips and fuzzing check them.
NEWER_FROM = {
    f"{api}{kind}": first
    for api, first in (
        ("ApiVersions", 5),
        ("DeleteGroups", 3),
        ("ListOffsets", 11),
        ("TxnOffsetCommit", 6),
        ("WriteTxnMarkers", 2),
    )
    for kind in ("Request", "Response")
}


def _newer(case) -> bool:
    cls, version = case.values[0], case.values[1]
    return cls.name in NEWER_FROM and version >= NEWER_FROM[cls.name]


def test_golden_file_covers_every_case():
    older = [c for c in CASES if c.values[0].name not in LATER and not _newer(c)]
    assert len(GOLDEN_CASES) == 2 * len(older) == 804
    assert sum(map(_newer, CASES)) == 10
    assert len(CASES) - len(
        older
    ) - 10 == 3 + 3 + 2 + 2 + 4 + 4 + 3 + 3 + 2 + 2 + 1 + 1 + 5 + 5 + 1 + 1 + 2 + 2 + 2 * 10 + 2 * 7 + (
        2 * 3 * 3 + 2 * 2 * 2 + 2 * 2 * 1
    ) + 2 * (3 + 2 + 1 + 1) + 2 * (1 + 1) + 2 * (2 + 1 + 1) + 2 * 2 + 2 * (3 + 2 + 2 + 3) + 2 * (
        2 + 2 + 1 + 1 + 1
    ) + 2 * (
        -1 + 1 + 1 - 2 + 1
    )  # the streams-group APIs 88 v0-1, 89 v0-1, 93 v0, UnregisterBroker v0, UnregisterController v0; Kafka 4.4's
    # definitions drop DescribeLogDirs v0 and AlterPartition v0-1, add DescribeLogDirs v5, ListTransactions v2 and
    # BrokerHeartbeat v2; the security APIs: Acls v1-3, ClientQuotas v0-1,
    # UserScramCredentials v0; UpdateFeatures v0-2, AddRaftVoter v0-1, RemoveRaftVoter v0, UpdateRaftVoter v0
    # ... + the share-group APIs: 76 v1, 77 v1, 78 v1-2, 79 v1-2, 90 v0-1, 91 v0, 92 v0, and the share-state
    # APIs: 83 v0, 84 v0, 85 v0-1, 86 v0, 87 v0-1, request and response; OffsetDelete (47) v0 and
    # DescribeTopicPartitions (75) v0; ListConfigResources (74) v0-1, GetTelemetrySubscriptions (71) v0 and
    # PushTelemetry (72) v0; AlterReplicaLogDirs (34) v1-2; the delegation-token APIs (38-41)


@pytest.mark.parametrize(("cls", "version", "which", "raw"), GOLDEN_CASES)
def test_golden_encoding(cls, version, which, raw):
    obj = cls() if which == "default" else _populated(cls, version)
    assert obj.to_bytes(version).hex() == raw.hex()
    back, end = cls.decode(raw, 0, version)
    assert end == len(raw)
    assert back == obj
    key, request = api_of(cls)
    out, used = _core.protocol_reencode(key, version, request, raw)
    assert (out, used) == (raw, len(raw))


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_every_truncation_is_a_protocol_error_from_rust(cls, version):
    raw = _populated(cls, version).to_bytes(version)
    key, request = api_of(cls)
    for cut in range(len(raw)):
        with pytest.raises(_core.KafkaProtocolError) as info:
            _core.protocol_reencode(key, version, request, raw[:cut])
        assert ": " in str(info.value)  # names the field


def test_unknown_api_and_version_are_errors():
    with pytest.raises(_core.KafkaProtocolError, match="unknown API key 999"):
        _core.protocol_reencode(999, 0, True, b"")
    with pytest.raises(_core.KafkaProtocolError, match="ProduceRequest: version 99 is outside"):
        _core.protocol_reencode(0, 99, True, b"")
    with pytest.raises(ProtocolError, match="outside"):
        REQUESTS[0]().to_bytes(99)
