"""OffsetDelete (API 47): deleting a consumer group's committed offsets of some partitions,
with Kafka's rules (KafkaApis.handleOffsetDeleteRequest, OffsetMetadataManager.deleteOffsets):
GROUP_ID_NOT_FOUND for no such group, NON_EMPTY_GROUP for a classic group with members that
does not use the consumer protocol, GROUP_SUBSCRIBED_TO_TOPIC for each partition of a topic
the group's members subscribe to (classic and KIP-848 groups), UNKNOWN_TOPIC_OR_PARTITION,
DELETE on the group and READ on the topics. The deletion is a tombstone in
`__consumer_offsets`, so it holds after a restart. Kafka's own kafka-consumer-groups
--delete-offsets against logbroker, and logbroker's Admin.delete_group_offsets."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from conftest import needs_java, wait_until
from rawclient import RawClient

import logbroker
from logbroker.client.errors import BrokerResponseError
from logbroker.protocol import REQUESTS, ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

OffsetDelete, JoinGroup, ApiVersions = REQUESTS[47], REQUESTS[11], REQUESTS[18]


def delete_request(group: str, parts: dict[str, list[int]]):
    return OffsetDelete(
        group_id=group,
        topics=[
            OffsetDelete.OffsetDeleteRequestTopic(
                name=t, partitions=[OffsetDelete.OffsetDeleteRequestPartition(partition_index=p) for p in ps]
            )
            for t, ps in parts.items()
        ],
    )


def delete_offsets(bs: str, group: str, parts: dict[str, list[int]]) -> tuple[int, dict[tuple[str, int], int]]:
    """(group error, {(topic, partition): error}) of one OffsetDelete."""
    with RawClient(bs) as c:
        r = c.request(47, 0, delete_request(group, parts))
    return r.error_code, {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def commit(bs: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commits from outside the group (no membership): the group stays Empty."""
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    c.close()


def committed(bs: str, group: str) -> dict[tuple[str, int], int]:
    with logbroker.Admin(bs) as a:
        return {(tp.topic, tp.partition): o for tp, (o, _m) in a.list_group_offsets(group).items()}


def subscribed_consumer(bs: str, group: str, topics: list[str], protocol: str = "classic") -> Consumer:
    """A librdkafka consumer in `group` subscribed to `topics`, once it has its assignment."""
    conf = {"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    c = Consumer(conf)
    c.subscribe(topics)
    deadline = time.monotonic() + 30
    while not c.assignment():
        assert time.monotonic() < deadline, "no assignment"
        c.poll(0.1)
    return c


def test_api_versions_advertises_offset_delete(broker):
    with RawClient(broker.bootstrap_servers) as c:
        r = c.request(18, 3, ApiVersions(client_software_name="t", client_software_version="1"))
    assert {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}[47] == (0, 0)


def test_offsets_of_an_empty_group_are_deleted_and_errors(broker):
    bs = broker.bootstrap_servers
    with logbroker.Admin(bs) as a:
        a.create_topics([logbroker.NewTopic("od-a", num_partitions=3), logbroker.NewTopic("od-b", num_partitions=1)])
    commit(bs, "od-g", {("od-a", 0): 3, ("od-a", 1): 4, ("od-a", 2): 5, ("od-b", 0): 6})
    code, res = delete_offsets(bs, "od-g", {"od-a": [0, 2, 7], "od-b": [0], "od-none": [0]})
    assert code == ErrorCode.NONE
    assert res == {
        ("od-a", 0): 0,
        ("od-a", 2): 0,
        ("od-a", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("od-b", 0): 0,
        ("od-none", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert committed(bs, "od-g") == {("od-a", 1): 4}
    # a partition without a committed offset: NONE, nothing to delete
    assert delete_offsets(bs, "od-g", {"od-a": [0]}) == (ErrorCode.NONE, {("od-a", 0): 0})
    # group errors replace the partitions'
    assert delete_offsets(bs, "od-nosuch", {"od-a": [1]}) == (ErrorCode.GROUP_ID_NOT_FOUND, {})
    assert delete_offsets(bs, "", {"od-a": [1]}) == (ErrorCode.INVALID_GROUP_ID, {})
    # logbroker's Admin
    with logbroker.Admin(bs) as a:
        a.delete_group_offsets("od-g", [("od-a", 1)])
        with pytest.raises(BrokerResponseError, match="GROUP_ID_NOT_FOUND"):
            a.delete_group_offsets("od-nosuch", [("od-a", 1)])
    assert committed(bs, "od-g") == {}


def test_a_group_subscribed_to_the_topic_keeps_its_offsets(broker):
    bs = broker.bootstrap_servers
    with logbroker.Admin(bs) as a:
        a.create_topics(["od-sub", "od-other"])
    for group, protocol in (("od-classic", "classic"), ("od-848", "consumer")):
        c = subscribed_consumer(bs, group, ["od-sub"], protocol)
        try:
            c.commit(offsets=[TopicPartition("od-sub", 0, 2), TopicPartition("od-other", 0, 9)], asynchronous=False)
            code, res = delete_offsets(bs, group, {"od-sub": [0], "od-other": [0]})
            assert (code, res) == (
                ErrorCode.NONE,
                {("od-sub", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("od-other", 0): ErrorCode.NONE},
            ), group
            assert committed(bs, group) == {("od-sub", 0): 2}, group
            with logbroker.Admin(bs) as a, pytest.raises(BrokerResponseError, match="GROUP_SUBSCRIBED_TO_TOPIC"):
                a.delete_group_offsets(group, [("od-sub", 0)])
        finally:
            c.close()
        # the member left: the group is empty and no longer subscribed
        wait_until(
            lambda group=group: delete_offsets(bs, group, {"od-sub": [0]}) == (ErrorCode.NONE, {("od-sub", 0): 0}),
            timeout=20,
            what=f"{group} deletes once empty",
        )
        assert committed(bs, group) == {}


def test_a_classic_group_not_of_the_consumer_protocol_must_be_empty(broker):
    bs = broker.bootstrap_servers
    with logbroker.Admin(bs) as a:
        a.create_topics(["od-conn"])
    commit(bs, "od-connect", {("od-conn", 0): 1})
    join = JoinGroup(
        group_id="od-connect",
        session_timeout_ms=30000,
        rebalance_timeout_ms=30000,
        member_id="",
        protocol_type="connect",
        protocols=[JoinGroup.JoinGroupRequestProtocol(name="v0", metadata=b"x")],
    )
    with RawClient(bs) as c:
        r = c.request(11, 5, join)
        assert r.error_code == ErrorCode.MEMBER_ID_REQUIRED
        join.member_id = r.member_id
        assert c.request(11, 5, join).error_code == ErrorCode.NONE
        assert delete_offsets(bs, "od-connect", {"od-conn": [0]}) == (ErrorCode.NON_EMPTY_GROUP, {})
        leave = REQUESTS[13](group_id="od-connect", members=[REQUESTS[13].MemberIdentity(member_id=r.member_id)])
        assert c.request(13, 3, leave).error_code == ErrorCode.NONE
    assert delete_offsets(bs, "od-connect", {"od-conn": [0]}) == (ErrorCode.NONE, {("od-conn", 0): 0})


def test_deleted_offsets_stay_deleted_after_a_restart(tmp_path):
    with logbroker.Broker(data_dir=tmp_path / "data") as b:
        bs = b.bootstrap_servers
        with logbroker.Admin(bs) as a:
            a.create_topics([logbroker.NewTopic("od-r", num_partitions=2)])
        commit(bs, "od-rg", {("od-r", 0): 3, ("od-r", 1): 4})
        assert delete_offsets(bs, "od-rg", {"od-r": [0]}) == (ErrorCode.NONE, {("od-r", 0): 0})
        # a commit after the deletion is not undone by it
        commit(bs, "od-rg", {("od-r", 1): 5})
    with logbroker.Broker(data_dir=tmp_path / "data") as b:
        assert committed(b.bootstrap_servers, "od-rg") == {("od-r", 1): 5}
        assert delete_offsets(b.bootstrap_servers, "od-rg", {"od-r": [1]}) == (ErrorCode.NONE, {("od-r", 1): 0})
    with logbroker.Broker(data_dir=tmp_path / "data") as b:
        assert committed(b.bootstrap_servers, "od-rg") == {}


def test_acls_delete_on_the_group_and_read_on_the_topics(tmp_path):
    from confluent_kafka.admin import AclOperation, ResourceType
    from test_authorization import Session, acl, acl_broker, create_topics, grant, rd

    with acl_broker(tmp_path) as b:
        bs = b.bootstrap_servers
        create_topics(bs, "od-ok", "od-hidden")
        c = Consumer({**rd(bs, "admin"), "group.id": "od-acl", "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("od-ok", 0, 1), TopicPartition("od-hidden", 0, 1)], asynchronous=False)
        c.close()
        alice = Session(b, "alice")
        try:
            req = delete_request("od-acl", {"od-ok": [0], "od-hidden": [0]})
            r = alice(47, 0, group_id=req.group_id, topics=req.topics)
            assert (r.error_code, r.topics) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
            grant(
                bs,
                acl(ResourceType.GROUP, "od-acl", AclOperation.DELETE),
                acl(ResourceType.TOPIC, "od-ok", AclOperation.READ),
            )
            r = alice(47, 0, group_id=req.group_id, topics=req.topics)
            assert r.error_code == 0
            assert {(t.name, p.error_code) for t in r.topics for p in t.partitions} == {
                ("od-ok", 0),
                ("od-hidden", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            }
        finally:
            alice.close()


# --- Kafka's kafka-consumer-groups ---------------------------------------------------------


@pytest.fixture(scope="module")
def kafka_tools():
    from benches.peers.kafka import install

    return install()


def consumer_groups_tool(tools, bs: str, *args: str) -> str:
    """kafka-consumer-groups (ConsumerGroupCommand) against `bs`: its stdout and stderr."""
    cmd = tools.tools_java(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", ["--bootstrap-server", bs, *args], heap="-Xmx256m"
    )
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return r.stdout + r.stderr


@needs_java
def test_kafka_consumer_groups_delete_offsets(broker, kafka_tools):
    bs = broker.bootstrap_servers
    with logbroker.Admin(bs) as a:
        a.create_topics([logbroker.NewTopic("od-tool", num_partitions=2)])
    commit(bs, "od-tool-g", {("od-tool", 0): 3, ("od-tool", 1): 4})
    # an empty group: the partition's offset goes, --describe shows only the other one
    out = consumer_groups_tool(kafka_tools, bs, "--delete-offsets", "--group", "od-tool-g", "--topic", "od-tool:0")
    assert "Request succeeded for deleting offsets" in out, out
    rows = [line.split() for line in out.splitlines()]
    assert ["od-tool", "0", "Successful"] in rows, out
    out = consumer_groups_tool(kafka_tools, bs, "--describe", "--group", "od-tool-g")
    rows = [line.split() for line in out.splitlines() if line.startswith("od-tool-g ")]
    assert [r[1:4] for r in rows] == [["od-tool", "1", "4"]], out
    assert committed(bs, "od-tool-g") == {("od-tool", 1): 4}
    # a group with a member subscribed to the topic: the tool reports the partition's error
    c = subscribed_consumer(bs, "od-tool-live", ["od-tool"])
    try:
        c.commit(offsets=[TopicPartition("od-tool", 0, 1)], asynchronous=False)
        out = consumer_groups_tool(kafka_tools, bs, "--delete-offsets", "--group", "od-tool-live", "--topic", "od-tool")
        assert "Encountered some partition-level error" in out, out
        rows = [line.split(None, 2) for line in out.splitlines() if line.startswith("od-tool ")]
        assert [r[:2] for r in rows] == [["od-tool", "0"], ["od-tool", "1"]], out
        assert all("GroupSubscribedToTopicException" in r[2] for r in rows), out
        assert committed(bs, "od-tool-live") == {("od-tool", 0): 1}
    finally:
        c.close()
