"""A new group's first request on a fresh broker while the group coordinator is still
loading its `__consumer_offsets` partition (issue 31).

FindCoordinator creates `__consumer_offsets` on first use, as Kafka does, and does not name
this node as a group's coordinator while it is still loading the group's partition: it waits
a little for the load (LOAD_WAIT_S), else answers COORDINATOR_NOT_AVAILABLE, which every client
retries. Requests that reach the coordinator during the load keep Kafka's answer,
COORDINATOR_LOAD_IN_PROGRESS. Before this, librdkafka's first synchronous commit of a new
group failed with COORDINATOR_LOAD_IN_PROGRESS (it does not retry it) whenever its
FindCoordinator was answered while the partition was loading.

The load is made slow here (a sleep before the coordinator reads the partition), so the
window in which the failure happened is wide and certain rather than a matter of timing."""

from __future__ import annotations

import threading
import time

import pytest
import trio
from rawclient import RawClient

from logbroker import Broker
from logbroker.broker.handlers import groups as group_handlers
from logbroker.client.admin import Admin
from logbroker.protocol import REQUESTS, ErrorCode

FindCoordinator, OffsetCommit, OffsetFetch, JoinGroup = REQUESTS[10], REQUESTS[8], REQUESTS[9], REQUESTS[11]


def slow_load(broker: Broker, delay: float) -> None:
    """Every load of `__consumer_offsets` partitions by the broker's group coordinator
    starts `delay` seconds late (as on a busy machine, or with a large partition)."""
    assert broker.server is not None and broker.server.groups is not None
    coord = broker.server.groups
    load = coord._load

    async def late_load(indexes, epochs):
        await trio.sleep(delay)
        await load(indexes, epochs)

    coord._load = late_load


def fresh_broker(tmp_path, i: int, delay: float = 0.5) -> Broker:
    """A started broker that has never seen a group (no `__consumer_offsets`), with topic t."""
    b = Broker(data_dir=tmp_path / f"data{i}").start()
    with Admin(b.bootstrap_servers) as a:
        a.create_topics(["t"])
    slow_load(b, delay)
    return b


def commit_confluent(bs: str, group: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        # Assigned at an explicit offset: with none, the fetcher resets the offset, and
        # librdkafka 2.16 can deadlock in close() on that reset (rd_kafka_offset_reset_op_cb
        # taking a lock it holds; seen once in CI, the process stuck in rd_kafka_destroy).
        c.assign([TopicPartition("t", 0, 0)])
        c.commit(offsets=[TopicPartition("t", 0, 5)], asynchronous=False)  # raises KafkaException on failure
        return c.committed([TopicPartition("t", 0)], timeout=10)[0].offset
    finally:
        c.close()


def commit_logbroker(bs: str, group: str) -> int:
    from logbroker import Consumer, TopicPartition

    c = Consumer(bs, group_id=group, enable_auto_commit=False)
    try:
        c.assign([TopicPartition("t", 0)])
        c.commit({TopicPartition("t", 0): 5})
        return c.committed([TopicPartition("t", 0)])[TopicPartition("t", 0)]
    finally:
        c.close()


def commit_kafka_python(bs: str, group: str) -> int:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    try:
        c.assign([TopicPartition("t", 0)])
        c.commit({TopicPartition("t", 0): OffsetAndMetadata(5, "", -1)})
        return c.committed(TopicPartition("t", 0))
    finally:
        c.close()


@pytest.mark.parametrize(
    "commit",
    [commit_confluent, commit_logbroker, commit_kafka_python],
    ids=["confluent-kafka", "logbroker", "kafka-python"],
)
def test_first_commit_of_a_new_group_on_a_fresh_broker(tmp_path, commit):
    # three fresh brokers in a row, as in the report (librdkafka failed 3 of 3)
    for i in range(3):
        b = fresh_broker(tmp_path, i)
        try:
            t0 = time.monotonic()
            assert commit(b.bootstrap_servers, f"new-group-{i}") == 5
            assert time.monotonic() - t0 < 15
        finally:
            b.stop()


def test_find_coordinator_while_the_partition_loads_and_kafkas_codes_meanwhile(tmp_path, monkeypatch):
    monkeypatch.setattr(group_handlers, "LOAD_WAIT_S", 0.2)  # shorter than the load below
    b = fresh_broker(tmp_path, 0, delay=4.0)
    try:
        bs = b.bootstrap_servers
        coord = b.server.groups
        first: dict = {}

        def create():  # the first FindCoordinator creates the topic, and waits for its load
            with RawClient(bs, timeout=30) as c:
                first["r"] = c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["creator"]))

        creator = threading.Thread(target=create)
        creator.start()
        deadline = time.monotonic() + 10
        while coord.check_coordinator("g") != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            assert time.monotonic() < deadline, "__consumer_offsets was not created"
            time.sleep(0.02)
        t = OffsetCommit.OffsetCommitRequestTopic(
            name="t", partitions=[OffsetCommit.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)]
        )
        commit = OffsetCommit(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[t])
        with RawClient(bs) as c:
            # while loading: FindCoordinator does not name this node (v4 and v3)
            r = c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["g"]))
            assert r.coordinators[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE, r
            assert "loading" in r.coordinators[0].error_message
            r = c.request(10, 3, FindCoordinator(key_type=0, key="g"))
            assert r.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE and r.node_id == -1, r
            # what reaches the coordinator meanwhile gets Kafka's COORDINATOR_LOAD_IN_PROGRESS
            r = c.request(8, 8, commit)
            assert r.topics[0].partitions[0].error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, r
            r = c.request(9, 8, OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(group_id="g", topics=None)]))
            assert r.groups[0].error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, r
            r = c.request(
                11,
                5,
                JoinGroup(
                    group_id="g",
                    session_timeout_ms=10000,
                    rebalance_timeout_ms=10000,
                    member_id="",
                    protocol_type="consumer",
                    protocols=[JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"")],
                ),
            )
            assert r.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, r
            creator.join(30)
            assert first["r"].coordinators[0].error_code == ErrorCode.NONE, first
            # loaded: this node is the coordinator and the commit goes through
            r = c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["g"]))
            assert r.coordinators[0].error_code == ErrorCode.NONE and r.coordinators[0].node_id >= 0, r
            r = c.request(8, 8, commit)
            assert r.topics[0].partitions[0].error_code == ErrorCode.NONE, r
    finally:
        b.stop()


def test_find_coordinator_waits_for_a_short_load(tmp_path):
    # a load shorter than LOAD_WAIT_S: a FindCoordinator that arrives meanwhile waits for it
    # and names the coordinator, whose first commit then succeeds
    b = fresh_broker(tmp_path, 0, delay=1.0)
    try:
        bs = b.bootstrap_servers
        coord = b.server.groups

        def create():
            with RawClient(bs, timeout=30) as c:
                c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["creator"]))

        creator = threading.Thread(target=create)
        creator.start()
        deadline = time.monotonic() + 10
        while coord.check_coordinator("g") != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            assert time.monotonic() < deadline, "__consumer_offsets was not created"
            time.sleep(0.02)
        with RawClient(bs, timeout=30) as c:
            r = c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["g"]))
            assert r.coordinators[0].error_code == ErrorCode.NONE, r
            assert coord.check_coordinator("g") == ErrorCode.NONE
            t = OffsetCommit.OffsetCommitRequestTopic(
                name="t", partitions=[OffsetCommit.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)]
            )
            r = c.request(8, 8, OffsetCommit(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[t]))
            assert r.topics[0].partitions[0].error_code == ErrorCode.NONE, r
        creator.join(30)
    finally:
        b.stop()
