"""The streams-group record formats of __consumer_offsets (KIP-1071, Kafka 4.4's record types 17
and 19 to 23; python/logbroker/coord/groups/offsets_topic.py): every writer and its parser
round-trip; bytes laid out by hand from Kafka 4.4.0's generated classes decode; and Kafka's own
kafka-dump-log --offsets-decoder (Kafka 4.4.0's GroupCoordinatorRecordSerde) decodes every
record type written here, values and tombstones, to the same values."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_java

from logbroker.coord.groups import offsets_topic as ot
from logbroker.coord.groups.offsets_topic import (
    SG_CURRENT_ASSIGNMENT,
    SG_MEMBER_METADATA,
    SG_METADATA,
    SG_TARGET_MEMBER,
    SG_TARGET_METADATA,
    SG_TOPOLOGY,
    OffsetsRecordError,
    StreamsCurrentAssignmentRecord,
    StreamsGroupMetadataRecord,
    StreamsMemberRecord,
    StreamsTargetRecord,
)
from logbroker.coord.groups.streams_topology import Subtopology, TopicInfo, Topology

HERE = Path(__file__).resolve().parent

TOPOLOGY = Topology(
    epoch=3,
    subtopologies=(
        Subtopology(
            subtopology_id="0",
            source_topics=("words-in", "more"),
            source_topic_regex=(),
            state_changelog_topics=(),
            repartition_sink_topics=("app-rep",),
            repartition_source_topics=(),
            copartition_groups=(((0, 1), (), ()),),
        ),
        Subtopology(
            subtopology_id="1",
            source_topics=("app-rep",),
            source_topic_regex=("x-.*",),
            state_changelog_topics=(TopicInfo("app-store-changelog", 0, 0, {"cleanup.policy": "compact"}),),
            repartition_sink_topics=(),
            repartition_source_topics=(TopicInfo("app-rep", 4, 3, {"retention.ms": "-1", "é": "ü"}),),
            copartition_groups=(),
        ),
    ),
)
MEMBERS = [
    StreamsMemberRecord(
        "inst-1", "rack-a", "client", "/10.0.0.1", 45000, 3, "proc-1", ("host-a", 65535), [("zone", "z1"), ("k", "v")]
    ),
    StreamsMemberRecord(None, None, "", "", 300000, -1, "p", None, []),
]
CURRENT = StreamsCurrentAssignmentRecord(
    member_epoch=7,
    previous_member_epoch=6,
    state=ot.SG_MEMBER_UNREVOKED_TASKS,
    active=[("0", [0, 2], [5, 7]), ("1", list(range(200)), [])],  # 200: a count past one varint byte
    standby=[("1", [1])],
    warmup=[],
    active_pending_revocation=[("0", [1], [4])],
    standby_pending_revocation=[],
    warmup_pending_revocation=[("1", [3, 4])],
)


def test_streams_group_records_round_trip():
    for kind, member in [
        (SG_METADATA, None),
        (SG_MEMBER_METADATA, "m-1"),
        (SG_TARGET_METADATA, None),
        (SG_TARGET_MEMBER, "m-1"),
        (SG_CURRENT_ASSIGNMENT, "m-1"),
        (SG_TOPOLOGY, None),
    ]:
        assert ot.parse_key(ot.streams_group_key(kind, "grp", member)) == (kind, "grp", member, None)
    with pytest.raises(ValueError):
        ot.streams_group_key(SG_MEMBER_METADATA, "grp")
    for meta in [
        StreamsGroupMetadataRecord(42, -1234567890123),
        StreamsGroupMetadataRecord(1, 0, 3, [("num.standby.replicas", "2")], 2, 1),
    ]:
        assert ot.parse_streams_group_metadata_value(ot.streams_group_metadata_value(meta)) == meta
    assert ot.parse_streams_group_topology_value(ot.streams_group_topology_value(TOPOLOGY)) == TOPOLOGY
    for m in MEMBERS:
        assert ot.parse_streams_member_metadata_value(ot.streams_member_metadata_value(m)) == m
    assert ot.parse_streams_target_metadata_value(ot.streams_target_metadata_value(9)) == (9, 0)
    assert ot.parse_streams_target_metadata_value(ot.streams_target_metadata_value(9, 1_700_000_000_000)) == (
        9,
        1_700_000_000_000,
    )
    target = StreamsTargetRecord([("0", [0, 1]), ("1", [2])], [("1", [0])], [])
    assert ot.parse_streams_target_member_value(ot.streams_target_member_value(target)) == target
    assert ot.parse_streams_current_assignment_value(ot.streams_current_assignment_value(CURRENT)) == CURRENT


def test_decodes_bytes_laid_out_as_kafka_4_4_generated_classes_write_them():
    # StreamsGroupMetadataValue: version 0, epoch 5, metadata hash 1, then tags 0 (validated
    # topology epoch 2) and 1 (last assignment configs [("a", "b")]); a value without tags
    meta = (
        bytes.fromhex("0000" "00000005" "0000000000000001")
        + bytes([2])  # two tagged fields
        + bytes([0, 4]) + bytes.fromhex("00000002")
        + bytes([1, 6, 2, 2]) + b"a" + bytes([2]) + b"b" + bytes([0])
    )  # fmt: skip
    assert ot.parse_streams_group_metadata_value(meta) == StreamsGroupMetadataRecord(5, 1, 2, [("a", "b")])
    assert ot.streams_group_metadata_value(StreamsGroupMetadataRecord(5, 1, 2, [("a", "b")])) == meta
    assert ot.streams_group_metadata_value(StreamsGroupMetadataRecord(5, 1)) == bytes.fromhex(
        "000000000005000000000000000100"
    )
    # StreamsGroupMemberMetadataValue: null instance, rack "r", client "c", host "h", 1000 ms,
    # topology epoch 1, process "p", endpoint ("e", 8080), no client tags
    member = (
        bytes.fromhex("0000") + bytes([0, 2]) + b"r" + bytes([2]) + b"c" + bytes([2]) + b"h"
        + bytes.fromhex("000003e8" "00000001") + bytes([2]) + b"p"
        + bytes([1, 2]) + b"e" + bytes.fromhex("1f90") + bytes([0])
        + bytes([1, 0])
    )  # fmt: skip
    want = StreamsMemberRecord(None, "r", "c", "h", 1000, 1, "p", ("e", 8080), [])
    assert ot.parse_streams_member_metadata_value(member) == want
    assert ot.streams_member_metadata_value(want) == member
    # StreamsGroupCurrentMemberAssignmentValue: epochs 2/1, state 1, active [("0", [1], epochs [2])]
    current = (
        bytes.fromhex("0000" "00000002" "00000001" "01")
        + bytes([2, 2]) + b"0" + bytes([2]) + bytes.fromhex("00000001")
        + bytes([1, 0, 5, 2]) + bytes.fromhex("00000002")
        + bytes([1, 1, 1, 1, 1, 0])
    )  # fmt: skip
    rec = ot.parse_streams_current_assignment_value(current)
    assert rec == StreamsCurrentAssignmentRecord(2, 1, 1, [("0", [1], [2])], [], [], [], [], [])
    assert ot.streams_current_assignment_value(rec) == current
    for bad in [meta[:-1], meta + b"\0", bytes.fromhex("0001") + meta[2:]]:
        with pytest.raises(OffsetsRecordError):
            ot.parse_streams_group_metadata_value(bad)


def test_kafka_dump_log_decodes_the_streams_group_records(tmp_path):
    """Every streams-group record type, values and tombstones, produced as they are written to
    __consumer_offsets into a topic of a broker; kafka-dump-log --offsets-decoder on its segment
    shows the same values."""
    require_java()
    sys.path.insert(0, str(HERE.parent))
    from confluent_kafka import Producer
    from replication_helpers import create

    from benches.peers.kafka import install
    from logbroker import Broker

    g = "dumped-app"
    records = [
        (ot.streams_group_key(SG_TOPOLOGY, g), ot.streams_group_topology_value(TOPOLOGY)),
        (
            ot.streams_group_key(SG_METADATA, g),
            ot.streams_group_metadata_value(StreamsGroupMetadataRecord(4, 77, 3, [("num.standby.replicas", "1")])),
        ),
        (ot.streams_group_key(SG_MEMBER_METADATA, g, "m-1"), ot.streams_member_metadata_value(MEMBERS[0])),
        (ot.streams_group_key(SG_MEMBER_METADATA, g, "m-2"), ot.streams_member_metadata_value(MEMBERS[1])),
        (
            ot.streams_group_key(SG_TARGET_MEMBER, g, "m-1"),
            ot.streams_target_member_value(StreamsTargetRecord([("0", [0, 1])], [("1", [2])], [])),
        ),
        (ot.streams_group_key(SG_TARGET_METADATA, g), ot.streams_target_metadata_value(4)),
        (ot.streams_group_key(SG_CURRENT_ASSIGNMENT, g, "m-1"), ot.streams_current_assignment_value(CURRENT)),
        (ot.streams_group_key(SG_CURRENT_ASSIGNMENT, g, "m-2"), None),
        (ot.streams_group_key(SG_TARGET_MEMBER, g, "m-2"), None),
        (ot.streams_group_key(SG_MEMBER_METADATA, g, "m-2"), None),
    ]
    with Broker(data_dir=tmp_path / "d") as b:
        create(b, "dump", 1, 1)
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
        for k, v in records:
            p.produce("dump", key=k, value=v, partition=0)
        assert p.flush(30) == 0
        segs = sorted((tmp_path / "d" / "dump-0").glob("*.log"))
        r = subprocess.run(
            install().tools_java(
                "org.apache.kafka.tools.DumpLogSegments", ["--files", ",".join(map(str, segs)), "--offsets-decoder"]
            ),
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    decoded = [(json.loads(k), p) for k, p in re.findall(r"key: (\{.*?\}) payload: (.*)$", r.stdout, re.M)]
    assert len(decoded) == len(records), r.stdout[-3000:]
    got = [(k["type"], k["data"], None if not p.startswith("{") else json.loads(p)) for k, p in decoded]
    for _t, key, payload in got:
        assert key["groupId"] == g
        assert payload is None or payload["version"] == "0"
    types = [t for t, _k, _p in got]
    assert types == ["23", "17", "19", "19", "21", "20", "22", "22", "21", "19"], types
    topology = got[0][2]["data"]
    assert topology["epoch"] == 3
    s0, s1 = topology["subtopologies"]
    assert s0["subtopologyId"] == "0" and s0["sourceTopics"] == ["words-in", "more"]
    assert s0["repartitionSinkTopics"] == ["app-rep"]
    assert s0["copartitionGroups"] == [{"sourceTopics": [0, 1], "sourceTopicRegex": [], "repartitionSourceTopics": []}]
    assert s1["sourceTopicRegex"] == ["x-.*"]
    assert s1["stateChangelogTopics"] == [
        {
            "name": "app-store-changelog",
            "partitions": 0,
            "replicationFactor": 0,
            "topicConfigs": [{"key": "cleanup.policy", "value": "compact"}],
        }
    ]
    assert s1["repartitionSourceTopics"][0]["partitions"] == 4
    assert s1["repartitionSourceTopics"][0]["replicationFactor"] == 3
    assert s1["repartitionSourceTopics"][0]["topicConfigs"][1] == {"key": "é", "value": "ü"}
    meta = got[1][2]["data"]
    assert meta["epoch"] == 4 and meta["metadataHash"] == 77 and meta["validatedTopologyEpoch"] == 3
    assert meta["lastAssignmentConfigs"] == [{"key": "num.standby.replicas", "value": "1"}]
    m1, m2 = got[2][2]["data"], got[3][2]["data"]
    assert got[2][1]["memberId"] == "m-1"
    assert (m1["instanceId"], m1["rackId"], m1["clientId"], m1["clientHost"]) == (
        "inst-1",
        "rack-a",
        "client",
        "/10.0.0.1",
    )
    assert (m1["rebalanceTimeoutMs"], m1["topologyEpoch"], m1["processId"]) == (45000, 3, "proc-1")
    assert m1["userEndpoint"] == {"host": "host-a", "port": 65535}
    assert m1["clientTags"] == [{"key": "zone", "value": "z1"}, {"key": "k", "value": "v"}]
    assert m2["instanceId"] is None and m2["userEndpoint"] is None and m2["clientTags"] == []
    target = got[4][2]["data"]
    assert target["activeTasks"] == [{"subtopologyId": "0", "partitions": [0, 1]}]
    assert target["standbyTasks"] == [{"subtopologyId": "1", "partitions": [2]}] and target["warmupTasks"] == []
    assert got[5][2]["data"]["assignmentEpoch"] == 4
    cur = got[6][2]["data"]
    assert (cur["memberEpoch"], cur["previousMemberEpoch"], cur["state"]) == (7, 6, 2)
    assert cur["activeTasks"][0] == {"subtopologyId": "0", "partitions": [0, 2], "assignmentEpochs": [5, 7]}
    assert cur["activeTasks"][1]["partitions"] == list(range(200))
    assert cur["activeTasks"][1].get("assignmentEpochs", []) == []
    assert cur["activeTasksPendingRevocation"] == [{"subtopologyId": "0", "partitions": [1], "assignmentEpochs": [4]}]
    assert cur["warmupTasksPendingRevocation"] == [{"subtopologyId": "1", "partitions": [3, 4]}]
    assert [p for _t, _k, p in got[7:]] == [None, None, None]
