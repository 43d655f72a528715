"""Persisted share-partition state (KIP-932): the share coordinator on `__share_group_state`
and its APIs (83-87) on the wire, state that survives a broker restart, and a share-partition
that moves to a new leader in a three-node cluster without redelivering acknowledged records."""

from __future__ import annotations

import uuid

import pytest
from conftest import wait_until
from rawclient import RawClient
from replication_helpers import FAST, create, full_isr, layout
from test_bad_input import create_topic
from test_share_groups import CONFIG, acquired, fetch, produce, topic_id

from logbroker import Broker, Cluster
from logbroker.coord.groups.offsets_topic import partition_for
from logbroker.coord.groups.share_state_log import SHARE_STATE_TOPIC, coordinator_key
from logbroker.protocol import REQUESTS, ErrorCode

Init, Read, Write, Delete, Summary = (REQUESTS[k] for k in (83, 84, 85, 86, 87))
FindCoordinator = REQUESTS[10]
T = uuid.UUID("00000000-0000-0000-0000-0000000000aa")


def find_share_coordinator(c: RawClient, key: str):
    r = c.request(10, 6, FindCoordinator(key_type=2, coordinator_keys=[key]))
    return r.coordinators[0]


def read(c, group, tid, part, leader_epoch):
    r = c.request(
        84,
        0,
        Read(
            group_id=group,
            topics=[
                Read.ReadStateData(
                    topic_id=tid, partitions=[Read.PartitionData(partition=part, leader_epoch=leader_epoch)]
                )
            ],
        ),
    )
    return r.results[0].partitions[0]


def write(c, group, tid, part, state_epoch, leader_epoch, start, batches):
    r = c.request(
        85,
        1,
        Write(
            group_id=group,
            topics=[
                Write.WriteStateData(
                    topic_id=tid,
                    partitions=[
                        Write.PartitionData(
                            partition=part,
                            state_epoch=state_epoch,
                            leader_epoch=leader_epoch,
                            start_offset=start,
                            state_batches=[
                                Write.StateBatch(first_offset=a, last_offset=b, delivery_state=s, delivery_count=n)
                                for a, b, s, n in batches
                            ],
                        )
                    ],
                )
            ],
        ),
    )
    return r.results[0].partitions[0]


def summary(c, group, tid, part):
    r = c.request(
        87,
        1,
        Summary(
            group_id=group,
            topics=[
                Summary.ReadStateSummaryData(
                    topic_id=tid, partitions=[Summary.PartitionData(partition=part, leader_epoch=-1)]
                )
            ],
        ),
    )
    return r.results[0].partitions[0]


def batches_of(p):
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches]


def test_share_coordinator_apis_keep_state_and_fence_stale_writers(tmp_path):
    with Broker(data_dir=tmp_path / "d", config=CONFIG) as b, RawClient(b.bootstrap_servers) as c:
        co = find_share_coordinator(c, coordinator_key("g", T, 0))
        assert (co.error_code, co.port) == (0, int(b.bootstrap_servers.rsplit(":", 1)[1]))
        assert find_share_coordinator(c, "no-topic-id").error_code == ErrorCode.INVALID_REQUEST
        first = read(c, "g", T, 0, 3)
        assert (first.error_code, first.state_epoch, first.start_offset, batches_of(first)) == (0, 0, -1, [])

        assert write(c, "g", T, 0, 0, 3, 10, [(10, 12, 0, 1), (13, 13, 2, 1)]).error_code == 0
        # an update: its batches replace what they cover, the start offset drops what is below
        assert write(c, "g", T, 0, 0, 3, 11, [(12, 14, 4, 2)]).error_code == 0
        got = read(c, "g", T, 0, 3)
        assert (got.state_epoch, got.start_offset, batches_of(got)) == (0, 11, [(11, 11, 0, 1), (12, 14, 4, 2)])

        # a newer leader epoch is recorded; the old leader is fenced from then on
        assert read(c, "g", T, 0, 4).error_code == 0
        assert write(c, "g", T, 0, 0, 3, 15, []).error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert read(c, "g", T, 0, 3).error_code == ErrorCode.FENCED_LEADER_EPOCH
        bad = write(c, "g", T, 0, 0, 4, 15, [(15, 17, 0, 1), (17, 18, 0, 1)])
        assert bad.error_code == ErrorCode.INVALID_REQUEST and "bad state batch" in bad.error_message
        assert write(c, "g", T, 0, 0, 4, 15, [(15, 16, 9, 1)]).error_code == ErrorCode.INVALID_REQUEST

        # a reset (InitializeShareGroupState) bumps the state epoch: writers of the old one are fenced
        init = (
            c.request(
                83,
                0,
                Init(
                    group_id="g",
                    topics=[
                        Init.InitializeStateData(
                            topic_id=T, partitions=[Init.PartitionData(partition=0, state_epoch=1, start_offset=100)]
                        )
                    ],
                ),
            )
            .results[0]
            .partitions[0]
        )
        assert init.error_code == 0
        assert write(c, "g", T, 0, 0, 4, 101, []).error_code == ErrorCode.FENCED_STATE_EPOCH
        again = (
            c.request(
                83,
                0,
                Init(
                    group_id="g",
                    topics=[
                        Init.InitializeStateData(
                            topic_id=T, partitions=[Init.PartitionData(partition=0, state_epoch=1, start_offset=5)]
                        )
                    ],
                ),
            )
            .results[0]
            .partitions[0]
        )
        assert again.error_code == ErrorCode.FENCED_STATE_EPOCH
        s = summary(c, "g", T, 0)
        assert (s.error_code, s.state_epoch, s.leader_epoch, s.start_offset, s.delivery_complete_count) == (
            0,
            1,
            4,
            100,
            0,
        )

    # everything above was written to __share_group_state and is read back after a restart
    with Broker(data_dir=tmp_path / "d", config=CONFIG) as b, RawClient(b.bootstrap_servers) as c:
        wait_until(lambda: read(c, "g", T, 0, 4).error_code == 0, timeout=20, what="the share coordinator loaded")
        got = read(c, "g", T, 0, 4)
        assert (got.state_epoch, got.start_offset, batches_of(got)) == (1, 100, [])
        d = (
            c.request(
                86,
                0,
                Delete(
                    group_id="g",
                    topics=[Delete.DeleteStateData(topic_id=T, partitions=[Delete.PartitionData(partition=0)])],
                ),
            )
            .results[0]
            .partitions[0]
        )
        assert d.error_code == 0
        assert read(c, "g", T, 0, 4).start_offset == -1


def test_a_share_partitions_state_survives_a_broker_restart(tmp_path):
    with Broker(data_dir=tmp_path / "d", config=CONFIG) as b, RawClient(b.bootstrap_servers) as c:
        assert create_topic(c, "q", 1) == 0
        tid = topic_id(c, "q")
        produce(b.bootstrap_servers, "q", [b"v%d" % i for i in range(10)])
        assert acquired(fetch(c, "sg", "m1", 0, [(tid, 0)])) == {0: [(0, 9, 1)]}
        r = fetch(c, "sg", "m1", 1, [], acks={(tid, 0): [(0, 3, [1]), (4, 5, [2])]})
        assert all(p.acknowledge_error_code == 0 for t in r.responses for p in t.partitions)
        assert acquired(r) == {0: [(4, 5, 2)]}, "the released records, at once"
        # offsets 6-9 stay acquired by m1 when the broker stops
    with Broker(data_dir=tmp_path / "d", config=CONFIG) as b, RawClient(b.bootstrap_servers) as c:

        def get():
            got = acquired(fetch(c, "sg", "m2", 0, [(tid, 0)], max_wait_ms=500))
            return got.get(0)

        # 0-3 were accepted: never again. 4-5 were released, 6-9 written as delivered once
        # (with the acknowledgement); their third and second deliveries were not written (a
        # leader does not write when it hands records out): all come back as second deliveries
        assert wait_until(get, timeout=20, what="records of the restored share-partition") == [(4, 9, 2)]


def test_acknowledged_records_are_not_redelivered_after_the_leader_fails_over(tmp_path):
    config = {
        **CONFIG,
        **FAST,
        "share.coordinator.state.topic.replication.factor": 3,
        "share.coordinator.state.topic.num.partitions": 3,
        "min.insync.replicas": 2,
    }
    with Cluster(3, data_dir=tmp_path, config=config) as cluster:
        create(cluster.nodes[0], "sq", 1, 3)
        full_isr(cluster, "sq", 1)
        produce(cluster.bootstrap_servers, "sq", [b"r%d" % i for i in range(20)])
        leader = layout(cluster.nodes[0])[("sq", 0)][0]
        with RawClient(cluster.node(leader).bootstrap_servers) as c:
            tid = topic_id(c, "sq")
            assert acquired(fetch(c, "sg", "m1", 0, [(tid, 0)], max_records=12)) == {0: [(0, 11, 1)]}
            r = fetch(c, "sg", "m1", 1, [], acks={(tid, 0): [(0, 7, [1]), (8, 9, [2])]})
            assert all(p.acknowledge_error_code == 0 for t in r.responses for p in t.partitions)
        full_isr(cluster, SHARE_STATE_TOPIC, 3)
        index = partition_for(coordinator_key("sg", tid, 0), 3)
        assert index in range(3)

        cluster.node(leader).kill()
        others = [n for n in cluster.nodes if n.node_id != leader]
        new = wait_until(
            lambda: (
                (lay := layout(others[0]))[("sq", 0)][0] not in (leader, -1)
                and lay[(SHARE_STATE_TOPIC, index)][0] not in (leader, -1)
                and lay[("sq", 0)][0]
            ),
            timeout=30,
            what="new leaders for sq-0 and the share state",
        )
        with RawClient(cluster.node(new).bootstrap_servers) as c:
            seen: list[tuple[int, int, int]] = []
            epoch = [0]

            def drain():
                got = acquired(fetch(c, "sg", "m2", epoch[0], [(tid, 0)], max_wait_ms=300))
                epoch[0] += 1
                seen.extend(got.get(0, []))
                return {o for a, b_, _ in seen for o in range(a, b_ + 1)} >= set(range(8, 20)) or None

            wait_until(drain, timeout=30, what="the rest of the records from the new leader")
        offsets = [o for a, b_, _ in seen for o in range(a, b_ + 1)]
        assert min(offsets) == 8 and sorted(offsets) == list(range(8, 20)), seen
        counts = {o: n for a, b_, n in seen for o in range(a, b_ + 1)}
        assert [counts[o] for o in (8, 9, 10, 11, 12)] == [2, 2, 2, 2, 1], counts


@pytest.mark.parametrize("key", ["", "g:not-a-uuid:0", f"g:{T}:-1", f":{T}:0"])
def test_bad_share_coordinator_keys_are_refused(tmp_path, key):
    with Broker(data_dir=tmp_path / "d", config=CONFIG) as b, RawClient(b.bootstrap_servers) as c:
        assert find_share_coordinator(c, key).error_code == ErrorCode.INVALID_REQUEST


def test_share_group_offsets_change_only_while_the_group_is_empty(tmp_path):
    from test_share_groups import heartbeat

    Alter, Describe = REQUESTS[91], REQUESTS[90]
    with Broker(data_dir=tmp_path / "d", config=CONFIG) as b, RawClient(b.bootstrap_servers) as c:
        assert create_topic(c, "q", 2) == 0
        produce(b.bootstrap_servers, "q", [b"x"] * 5)

        def alter(offset: int, topic: str = "q", partition: int = 0):
            return c.request(
                91,
                0,
                Alter(
                    group_id="og",
                    topics=[
                        Alter.AlterShareGroupOffsetsRequestTopic(
                            topic_name=topic,
                            partitions=[
                                Alter.AlterShareGroupOffsetsRequestPartition(
                                    partition_index=partition, start_offset=offset
                                )
                            ],
                        )
                    ],
                ),
            )

        def describe(topics=None):
            return c.request(
                90, 0, Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(group_id="og", topics=topics)])
            ).groups[0]

        assert describe().error_code == ErrorCode.GROUP_ID_NOT_FOUND
        r = alter(3)
        assert (r.error_code, r.responses[0].partitions[0].error_code) == (0, 0)
        g = describe()
        assert [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions]) for t in g.topics] == [
            ("q", [(0, 3)])
        ], "all topics: the partitions with state"
        g = describe(
            [
                Describe.DescribeShareGroupOffsetsRequestTopic(topic_name="q", partitions=[0, 1]),
                Describe.DescribeShareGroupOffsetsRequestTopic(topic_name="nope", partitions=[0]),
            ]
        )
        assert [[(p.partition_index, p.start_offset, p.error_code) for p in t.partitions] for t in g.topics] == [
            [(0, 3, 0), (1, -1, 0)],
            [(0, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)],
        ]
        assert alter(1, "nope").responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert alter(-5).responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST

        # the group consumes from offset 3; while a member is in it, its offsets are not changed
        tid = topic_id(c, "q")
        assert heartbeat(c, "og", "m1", 0, ["q"]).error_code == 0
        assert acquired(fetch(c, "og", "m1", 0, [(tid, 0)])) == {0: [(3, 4, 1)]}
        busy = alter(0)
        assert busy.error_code == ErrorCode.NON_EMPTY_GROUP and "1 member" in busy.error_message
        Delete = REQUESTS[92]
        d = c.request(92, 0, Delete(group_id="og", topics=[Delete.DeleteShareGroupOffsetsRequestTopic(topic_name="q")]))
        assert d.error_code == ErrorCode.NON_EMPTY_GROUP
        assert (
            c.request(
                90, 0, Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(group_id="", topics=None)])
            )
            .groups[0]
            .error_code
            == ErrorCode.INVALID_GROUP_ID
        )


def test_acknowledgements_wait_out_a_share_coordinator_failover(tmp_path):
    """The share coordinator (leader of __share_group_state) on another node than the
    partition's leader is killed: an acknowledgement sent meanwhile is answered once the new
    coordinator has it, and nothing acknowledged comes back."""
    config = {
        **CONFIG,
        **FAST,
        "share.coordinator.state.topic.replication.factor": 3,
        "share.coordinator.state.topic.num.partitions": 1,
        "min.insync.replicas": 2,
    }
    with Cluster(3, data_dir=tmp_path, config=config) as cluster:
        with RawClient(cluster.nodes[0].bootstrap_servers) as c:
            assert find_share_coordinator(c, coordinator_key("sg", T, 0)).error_code == 0  # creates the topic
        full_isr(cluster, SHARE_STATE_TOPIC, 1)
        coordinator = layout(cluster.nodes[0])[(SHARE_STATE_TOPIC, 0)][0]
        leader, other = [n.node_id for n in cluster.nodes if n.node_id != coordinator]
        C = REQUESTS[19]
        with RawClient(cluster.nodes[0].bootstrap_servers) as c:
            r = c.request(
                19,
                5,
                C(
                    topics=[
                        C.CreatableTopic(
                            name="cq",
                            num_partitions=-1,
                            replication_factor=-1,
                            configs=[],
                            assignments=[
                                C.CreatableReplicaAssignment(partition_index=0, broker_ids=[leader, other, coordinator])
                            ],
                        )
                    ],
                    timeout_ms=10000,
                    validate_only=False,
                ),
            )
            assert r.topics[0].error_code == 0, r
        full_isr(cluster, "cq", 1)
        produce(cluster.bootstrap_servers, "cq", [b"c%d" % i for i in range(10)])
        with RawClient(cluster.node(leader).bootstrap_servers) as c:
            tid = topic_id(c, "cq")
            assert acquired(fetch(c, "sg", "m1", 0, [(tid, 0)])) == {0: [(0, 9, 1)]}
            cluster.node(coordinator).kill()
            # no new coordinator yet: the acknowledgement waits for one (the persister retries)
            r = fetch(c, "sg", "m1", 1, [], acks={(tid, 0): [(0, 5, [1]), (6, 9, [2])]})
            assert [p.acknowledge_error_code for t in r.responses for p in t.partitions] == [0]
            assert acquired(r) == {0: [(6, 9, 2)]}
            assert layout(cluster.node(leader))[(SHARE_STATE_TOPIC, 0)][0] in (leader, other)
        # the killed node comes back; then the partition's leader dies: its new leader reads the
        # state back from whichever node coordinates it by then
        cluster.node(coordinator).restart()
        full_isr(cluster, "cq", 1)
        full_isr(cluster, SHARE_STATE_TOPIC, 1)
        cluster.node(leader).kill()
        survivor = cluster.node(other)
        new = wait_until(
            lambda: (n := layout(survivor)[("cq", 0)][0]) not in (leader, -1) and n,
            timeout=30,
            what="a new leader for cq-0",
        )
        with RawClient(cluster.node(new).bootstrap_servers) as c:
            got = wait_until(
                lambda: acquired(fetch(c, "sg", "m2", 0, [(tid, 0)], max_wait_ms=500)).get(0),
                timeout=30,
                what="records from the new leader",
            )
            # accepted records never again; the released ones come back counting their written
            # delivery (the one that followed the release was not written: handing out is not)
            assert got == [(6, 9, 2)]
        # KIP-1226 lag, answered by the group's coordinator with the HW from cq-0's leader
        # (asked over the broker channel when that is another node)
        Describe = REQUESTS[90]

        def start_and_lag():
            with RawClient(survivor.bootstrap_servers) as c:
                fc = c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["sg"])).coordinators[0]
            assert fc.error_code == 0
            with RawClient(f"{fc.host}:{fc.port}") as gc:
                g = gc.request(
                    90,
                    1,
                    Describe(
                        groups=[
                            Describe.DescribeShareGroupOffsetsRequestGroup(
                                group_id="sg",
                                topics=[
                                    Describe.DescribeShareGroupOffsetsRequestTopic(topic_name="cq", partitions=[0])
                                ],
                            )
                        ]
                    ),
                ).groups[0]
            p = g.topics[0].partitions[0]
            return p.error_code, p.start_offset, p.lag

        wait_until(lambda: start_and_lag() == (0, 6, 10 - 6), timeout=30, what="the share-partition lag")


def test_describe_share_group_offsets_v1_reports_the_lag(tmp_path):
    """KIP-1226: lag = HW - start offset - records after the start already delivered."""
    from test_share_groups import heartbeat

    Describe = REQUESTS[90]
    with Broker(data_dir=tmp_path / "d", config=CONFIG) as b, RawClient(b.bootstrap_servers) as c:
        assert create_topic(c, "lq") == 0
        produce(b.bootstrap_servers, "lq", [b"x"] * 10)
        tid = topic_id(c, "lq")
        assert heartbeat(c, "lg", "m1", 0, ["lq"]).error_code == 0
        assert acquired(fetch(c, "lg", "m1", 0, [(tid, 0)])) == {0: [(0, 9, 1)]}
        # 0-3 and 6-7 accepted: the start offset moves to 4, two records past it are complete
        r = fetch(c, "lg", "m1", 1, [], acks={(tid, 0): [(0, 3, [1]), (6, 7, [1])]})
        assert [p.acknowledge_error_code for t in r.responses for p in t.partitions] == [0]

        def describe(version):
            g = c.request(
                90,
                version,
                Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(group_id="lg", topics=None)]),
            ).groups[0]
            return [(p.partition_index, p.start_offset, p.lag) for t in g.topics for p in t.partitions]

        assert describe(1) == [(0, 4, 10 - 4 - 2)]
        assert describe(0) == [(0, 4, -1)], "no lag before v1"
        produce(b.bootstrap_servers, "lq", [b"y"] * 5)
        assert describe(1) == [(0, 4, 15 - 4 - 2)]
