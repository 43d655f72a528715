"""The API versions Kafka 4.2-4.4 added, served as Kafka 4.4 serves them (issue 47, part 5),
over the wire with exact requests on one node: ApiVersions v5's misrouting check (KIP-1242),
Produce v13, OffsetCommit v10, OffsetFetch v10 and TxnOffsetCommit v6 naming topics by id,
Metadata v13's top-level error, ListOffsets v11's EARLIEST_PENDING_UPLOAD (KIP-1023), DeleteGroups
v3's messages, DescribeLogDirs v5, ListTransactions v2's id pattern (KIP-1152), AddOffsetsToTxn
v4, and WriteTxnMarkers v2 carrying the transaction version (KIP-1228)."""

from __future__ import annotations

import uuid

from rawclient import RawClient
from test_apis import batch
from test_bad_input import create_topic
from test_transaction_errors import init
from test_transactions_v2 import end_v5, produce, wait_state

from logbroker.protocol import REQUESTS, ErrorCode

ApiVersions = REQUESTS[18]
Produce = REQUESTS[0]
Metadata = REQUESTS[3]
OffsetCommit = REQUESTS[8]
OffsetFetch = REQUESTS[9]
FindCoordinator = REQUESTS[10]
ListOffsets = REQUESTS[2]
DeleteGroups = REQUESTS[42]
DescribeLogDirs = REQUESTS[35]
ListTransactions = REQUESTS[66]
AddOffsetsToTxn = REQUESTS[25]
WriteTxnMarkers = REQUESTS[27]


def topic_id(c: RawClient, name: str) -> uuid.UUID:
    meta = c.request(3, 12, Metadata(topics=[Metadata.MetadataRequestTopic(name=name)]))
    return meta.topics[0].topic_id


def test_api_versions_v5_refuses_a_misrouted_connection(broker):
    bs = broker.bootstrap_servers
    with RawClient(bs) as c:
        cluster = c.request(3, 12, Metadata(topics=[])).cluster_id
        node = broker.server.node_id

        def ask(cluster_id, node_id):
            return c.request(
                18,
                5,
                ApiVersions(
                    client_software_name="t", client_software_version="1", cluster_id=cluster_id, node_id=node_id
                ),
            )

        for good in (ask(None, -1), ask(cluster, node)):  # no ids (a seed), or the right ones
            assert good.error_code == ErrorCode.NONE and {k.api_key for k in good.api_keys} >= {0, 1, 18}
        for cluster_id, node_id in ((cluster, node + 1), ("AAAAAAAAAAAAAAAAAAAAAA", node)):
            bad = ask(cluster_id, node_id)
            assert (bad.error_code, bad.api_keys) == (ErrorCode.REBOOTSTRAP_REQUIRED, []), (cluster_id, node_id)
        named_without_cluster = ask(None, node)
        assert (named_without_cluster.error_code, named_without_cluster.api_keys) == (ErrorCode.INVALID_REQUEST, [])
        # the connection stays usable: a refused check changes nothing
        assert c.request(18, 4, ApiVersions(client_software_name="t", client_software_version="1")).error_code == 0
        meta = c.request(3, 13, Metadata(topics=None))
        assert meta.error_code == ErrorCode.NONE and meta.cluster_id == cluster  # v13: the top-level error


def test_produce_v13_names_topics_by_id(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "by-id") == 0
        tid, unknown = topic_id(c, "by-id"), uuid.uuid4()
        req = Produce(
            transactional_id=None,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                Produce.TopicProduceData(
                    topic_id=t, partition_data=[Produce.PartitionProduceData(index=0, records=batch([b"a", b"b"]))]
                )
                for t in (tid, unknown)
            ],
        )
        resp = c.request(0, 13, req)
        got = {t.topic_id: t.partition_responses[0] for t in resp.responses}
        assert (got[tid].error_code, got[tid].base_offset) == (ErrorCode.NONE, 0)
        assert got[unknown].error_code == ErrorCode.UNKNOWN_TOPIC_ID and str(unknown).replace("-", "") in (
            got[unknown].error_message or ""
        )
        assert broker.server.replicas.get("by-id", 0).log.log_end_offset == 2


def test_offset_commit_and_fetch_v10_name_topics_by_id(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "oc-id", 2) == 0
        c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["g10"]))
        tid, unknown = topic_id(c, "oc-id"), uuid.uuid4()
        commit = OffsetCommit(
            group_id="g10",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[
                OffsetCommit.OffsetCommitRequestTopic(
                    topic_id=t,
                    partitions=[
                        OffsetCommit.OffsetCommitRequestPartition(
                            partition_index=p, committed_offset=10 + p, committed_leader_epoch=-1
                        )
                        for p in (0, 1)
                    ],
                )
                for t in (tid, unknown)
            ],
        )
        resp = c.request(8, 10, commit)
        assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in resp.topics] == [
            (tid, [ErrorCode.NONE, ErrorCode.NONE]),
            (unknown, [ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_ID]),
        ]

        def fetch(topics):
            req = OffsetFetch(
                groups=[OffsetFetch.OffsetFetchRequestGroup(group_id="g10", topics=topics)], require_stable=False
            )
            return c.request(9, 10, req).groups[0]

        asked = fetch(
            [OffsetFetch.OffsetFetchRequestTopics(topic_id=t, partition_indexes=[0, 1]) for t in (tid, unknown)]
        )
        assert asked.error_code == ErrorCode.NONE
        assert [(t.topic_id, [(p.committed_offset, p.error_code) for p in t.partitions]) for t in asked.topics] == [
            (tid, [(10, 0), (11, 0)]),
            (unknown, [(-1, ErrorCode.UNKNOWN_TOPIC_ID), (-1, ErrorCode.UNKNOWN_TOPIC_ID)]),
        ]
        every = fetch(None)  # all of the group's offsets, each topic by its id
        assert [(t.topic_id, [p.committed_offset for p in t.partitions]) for t in every.topics] == [(tid, [10, 11])]
        # the same offsets by name at v9: one store whichever way topics are named
        v9 = OffsetFetch(
            groups=[
                OffsetFetch.OffsetFetchRequestGroup(
                    group_id="g10", topics=[OffsetFetch.OffsetFetchRequestTopics(name="oc-id", partition_indexes=[1])]
                )
            ],
            require_stable=False,
        )
        assert c.request(9, 9, v9).groups[0].topics[0].partitions[0].committed_offset == 11


def test_list_offsets_v11_earliest_pending_upload_of_an_untiered_topic(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "lo11") == 0
        req = ListOffsets(
            replica_id=-1,
            isolation_level=0,
            topics=[
                ListOffsets.ListOffsetsTopic(
                    name="lo11",
                    partitions=[
                        ListOffsets.ListOffsetsPartition(partition_index=0, timestamp=-6, current_leader_epoch=-1)
                    ],
                )
            ],
            timeout_ms=1000,
        )
        r = c.request(2, 11, req).topics[0].partitions[0]
        assert (r.error_code, r.offset) == (ErrorCode.NONE, -1)  # nothing is ever copied: no such offset
        # before v11 the timestamp is not one this version knows
        assert c.request(2, 10, req).topics[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_VERSION


def test_delete_groups_v3_says_why_and_describe_log_dirs_v5(broker):
    with RawClient(broker.bootstrap_servers) as c:
        c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["gone"]))
        resp = c.request(42, 3, DeleteGroups(groups_names=["never-was"]))
        r = resp.results[0]
        assert r.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert "never-was" in r.error_message and ErrorCode.GROUP_ID_NOT_FOUND.message in r.error_message
        dirs = c.request(35, 5, DescribeLogDirs(topics=None)).results
        assert dirs and all(d.error_code == 0 and d.is_cordoned is False and d.total_bytes > 0 for d in dirs)


def test_list_transactions_v2_pattern_and_add_offsets_v4(broker):
    with RawClient(broker.bootstrap_servers) as c:
        for txn in ("orders-1", "orders-2", "billing-1"):
            c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=[txn]))
            assert init(c, txn).error_code == ErrorCode.NONE

        def listed(pattern, version=2):
            r = c.request(
                66,
                version,
                ListTransactions(state_filters=[], producer_id_filters=[], transactional_id_pattern=pattern),
            )
            return r.error_code, sorted(t.transactional_id for t in r.transaction_states)

        assert listed("orders-.*") == (ErrorCode.NONE, ["orders-1", "orders-2"])
        assert listed("orders") == (ErrorCode.NONE, [])  # the whole id must match
        assert listed(None) == listed("") == (ErrorCode.NONE, ["billing-1", "orders-1", "orders-2"])
        assert listed("orders-(") == (ErrorCode.INVALID_REGULAR_EXPRESSION, [])
        r = init(c, "orders-1")
        c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["g-txn"]))
        added = c.request(
            25,
            4,
            AddOffsetsToTxn(
                transactional_id="orders-1",
                producer_id=r.producer_id,
                producer_epoch=r.producer_epoch,
                group_id="g-txn",
            ),
        )
        assert added.error_code == ErrorCode.NONE
        assert wait_state(c, "orders-1", "Ongoing").transaction_state == "Ongoing"


def test_write_txn_markers_v2_refuses_a_stale_transactions_v2_marker(broker):
    """KIP-1228: under transactions v2 a marker carries the bumped epoch; one at the epoch of
    the transaction open on the partition is a stale marker and must not close it."""
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "tv2m") == 0
        c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["tv2"]))
        r = init(c, "tv2")
        pid, epoch = r.producer_id, r.producer_epoch
        assert produce(c, "tv2", "tv2m", 0, pid, epoch, 0, [b"open"]).error_code == ErrorCode.NONE

        def marker(tv):
            req = WriteTxnMarkers(
                markers=[
                    WriteTxnMarkers.WritableTxnMarker(
                        producer_id=pid,
                        producer_epoch=epoch,
                        transaction_result=False,
                        topics=[WriteTxnMarkers.WritableTxnMarkerTopic(name="tv2m", partition_indexes=[0])],
                        coordinator_epoch=0,
                        transaction_version=tv,
                    )
                ]
            )
            return c.request(27, 2, req).markers[0].topics[0].partitions[0].error_code

        log = broker.server.replicas.get("tv2m", 0).log
        assert marker(2) == ErrorCode.INVALID_PRODUCER_EPOCH
        assert log.log_end_offset == 1 and log.last_stable_offset() == 0  # nothing written, still open
        # the coordinator ends it with transactions v2's bumped epoch: the marker goes through
        assert end_v5(c, "tv2", pid, epoch, False).error_code == ErrorCode.NONE
        assert wait_state(c, "tv2", "CompleteAbort").transaction_state == "CompleteAbort"
        assert log.log_end_offset == 2 and log.last_stable_offset() == 2
