"""Transactions v2 (KIP-890 part 2) over the wire: ApiVersions finalizes transaction.version 2;
a Produce v12 adds its partitions to the transaction at the coordinator (no
AddPartitionsToTxn); TxnOffsetCommit v5 adds the group's offsets partition; EndTxn v5 bumps
the epoch, answers retries with the outcome, allows an empty abort; a late batch of an ended
transaction is refused by its epoch. Partition verification (KIP-890 part 1) refuses a v1
batch for a partition never added; with it off, Kafka's kafka-transactions tool finds and
aborts the hanging transaction. Checked with raw requests and a read_committed consumer."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from rawclient import RawClient
from test_bad_input import create_topic
from test_transaction_errors import init

from logbroker import Broker
from logbroker.protocol import REQUESTS, ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
from batches import build_batch  # noqa: E402
from conftest import require_java

Produce = REQUESTS[0]
FindCoordinator = REQUESTS[10]
ApiVersions = REQUESTS[18]
AddPartitionsToTxn = REQUESTS[24]
TxnOffsetCommit = REQUESTS[28]
DescribeTransactions = REQUESTS[65]


def produce(c, txn_id, topic, partition, pid, epoch, seq, values, version=12):
    batch = build_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
    r = c.request(
        0,
        version,
        Produce(
            transactional_id=txn_id,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                Produce.TopicProduceData(
                    name=topic, partition_data=[Produce.PartitionProduceData(index=partition, records=batch)]
                )
            ],
        ),
    )
    return r.responses[0].partition_responses[0]


def end_v5(c, txn_id, pid, epoch, commit):
    return c.request(
        26, 5, REQUESTS[26](transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit)
    )


def describe(c, txn_id):
    return c.request(65, 0, DescribeTransactions(transactional_ids=[txn_id])).transaction_states[0]


def committed_values(bootstrap, topic, partitions=1):
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "v2-check",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, last = [], time.monotonic()
    try:
        while time.monotonic() - last < 2:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append(m.value())
                last = time.monotonic()
    finally:
        c.close()
    return sorted(out)


def wait_state(c, txn_id, state, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        d = describe(c, txn_id)
        if d.transaction_state == state or time.monotonic() > deadline:
            return d
        time.sleep(0.05)


def test_api_versions_finalizes_transaction_version_2(broker):
    with RawClient(broker.bootstrap_servers) as c:
        r = c.request(18, 3, ApiVersions(client_software_name="t", client_software_version="1"))
        supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
        assert supported["transaction.version"] == (0, 2)
        assert r.finalized_features_epoch > 0  # the metadata-log index of the levels (tests/test_features.py)
        assert {f.name: f.max_version_level for f in r.finalized_features}["transaction.version"] == 2
        keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert keys[0][1] >= 12 and keys[24] == (0, 5) and keys[26] == (0, 5) and keys[28] == (0, 6)


def test_transaction_version_key_sets_the_bootstrap_level(tmp_path):
    with Broker(data_dir=tmp_path / "d", config={"transaction.version": "0"}) as b:
        with RawClient(b.bootstrap_servers) as c:
            r = c.request(18, 3, ApiVersions(client_software_name="t", client_software_version="1"))
            assert "transaction.version" not in {f.name for f in r.finalized_features}  # level 0: not finalized


def test_produce_v12_adds_partitions_and_end_txn_v5_bumps_the_epoch(broker):
    bs = broker.bootstrap_servers
    with RawClient(bs) as c:
        assert create_topic(c, "v2", 2) == 0
        c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["t2"]))
        r = init(c, "t2")
        assert r.error_code == ErrorCode.NONE, r
        pid, epoch = r.producer_id, r.producer_epoch

        # the first batch on each partition goes to the coordinator, which adds the partition
        for p in (0, 1):
            resp = produce(c, "t2", "v2", p, pid, epoch, 0, [b"a%d" % p, b"b%d" % p])
            assert resp.error_code == ErrorCode.NONE, resp
        d = describe(c, "t2")
        assert d.transaction_state == "Ongoing"
        assert sorted((t.topic, p) for t in d.topics for p in t.partitions) == [("v2", 0), ("v2", 1)]
        # later batches of the transaction append at once
        assert produce(c, "t2", "v2", 0, pid, epoch, 2, [b"c0"]).error_code == ErrorCode.NONE

        e = end_v5(c, "t2", pid, epoch, True)
        assert (e.error_code, e.producer_id, e.producer_epoch) == (ErrorCode.NONE, pid, epoch + 1), e
        # a retry of the same EndTxn answers the outcome with the new epoch
        e2 = end_v5(c, "t2", pid, epoch, True)
        assert e2.error_code in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS), e2
        d = wait_state(c, "t2", "CompleteCommit")
        assert (d.transaction_state, d.producer_epoch) == ("CompleteCommit", epoch + 1), d
        e2 = end_v5(c, "t2", pid, epoch, True)
        assert (e2.error_code, e2.producer_epoch) == (ErrorCode.NONE, epoch + 1), e2
        assert end_v5(c, "t2", pid, epoch, False).error_code == ErrorCode.INVALID_TXN_STATE

        # a late batch of the ended transaction: the marker's epoch fences it
        late = produce(c, "t2", "v2", 1, pid, epoch, 2, [b"late"])
        assert late.error_code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED), late
        assert committed_values(bs, "v2", 2) == sorted([b"a0", b"b0", b"c0", b"a1", b"b1"])

        # the next transaction, under the new epoch, is aborted
        epoch += 1
        assert produce(c, "t2", "v2", 0, pid, epoch, 0, [b"x"]).error_code == ErrorCode.NONE
        e = end_v5(c, "t2", pid, epoch, False)
        assert (e.error_code, e.producer_epoch) == (ErrorCode.NONE, epoch + 1), e
        epoch += 1
        wait_state(c, "t2", "CompleteAbort")
        assert committed_values(bs, "v2", 2) == sorted([b"a0", b"b0", b"c0", b"a1", b"b1"])

        # an empty abort (nothing was added) bumps the epoch, with no markers
        e = end_v5(c, "t2", pid, epoch, False)
        assert (e.error_code, e.producer_epoch) == (ErrorCode.NONE, epoch + 1), e
        epoch += 1
        # an empty commit is an error; a stale epoch is fenced
        assert end_v5(c, "t2", pid, epoch, True).error_code == ErrorCode.INVALID_TXN_STATE
        assert end_v5(c, "t2", pid, epoch - 3, False).error_code == ErrorCode.PRODUCER_FENCED
        # a Produce v12 from a stale epoch is refused by the coordinator, nothing appended
        leo = broker.server.replicas.get("v2", 1).log.log_end_offset
        stale = produce(c, "t2", "v2", 1, pid, epoch - 1, 0, [b"zombie"])
        assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH, stale
        assert broker.server.replicas.get("v2", 1).log.log_end_offset == leo


def test_produce_v12_while_the_previous_transaction_completes_is_retried(broker):
    """CONCURRENT_TRANSACTIONS from the coordinator reaches the producer as the retriable
    NOT_ENOUGH_REPLICAS; once the markers are written the batch is accepted."""
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "v2c") == 0
        c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["t2c"]))
        r = init(c, "t2c")
        pid, epoch = r.producer_id, r.producer_epoch
        codes = []

        def produce_retrying(value):
            while True:
                resp = produce(c, "t2c", "v2c", 0, pid, epoch, 0, [value])
                codes.append(resp.error_code)
                if resp.error_code != ErrorCode.NOT_ENOUGH_REPLICAS:
                    return resp
                time.sleep(0.01)

        for i in range(20):
            assert produce_retrying(b"%d" % i).error_code == ErrorCode.NONE
            e = end_v5(c, "t2c", pid, epoch, True)
            assert e.error_code == ErrorCode.NONE, e
            epoch = e.producer_epoch
            assert produce_retrying(b"next").error_code == ErrorCode.NONE
            e = end_v5(c, "t2c", pid, epoch, False)
            assert e.error_code == ErrorCode.NONE, e
            epoch = e.producer_epoch
        assert set(codes) <= {ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS}
    assert committed_values(broker.bootstrap_servers, "v2c") == sorted(b"%d" % i for i in range(20))


def test_txn_offset_commit_v5_adds_the_offsets_partition(broker):
    bs = broker.bootstrap_servers
    with RawClient(bs) as c:
        assert create_topic(c, "v2o") == 0
        c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["t2o"]))
        c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=["g2o"]))
        r = init(c, "t2o")
        pid, epoch = r.producer_id, r.producer_epoch
        assert produce(c, "t2o", "v2o", 0, pid, epoch, 0, [b"v"]).error_code == ErrorCode.NONE
        req = TxnOffsetCommit(
            transactional_id="t2o",
            group_id="g2o",
            producer_id=pid,
            producer_epoch=epoch,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                TxnOffsetCommit.TxnOffsetCommitRequestTopic(
                    name="v2o",
                    partitions=[
                        TxnOffsetCommit.TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata=""
                        )
                    ],
                )
            ],
        )
        resp = c.request(28, 5, req)
        assert resp.topics[0].partitions[0].error_code == ErrorCode.NONE, resp
        d = describe(c, "t2o")
        assert "__consumer_offsets" in {t.topic for t in d.topics}, d
        # a stale epoch is fenced at the coordinator before anything is written
        stale = TxnOffsetCommit(
            **{
                **{
                    k: getattr(req, k)
                    for k in (
                        "transactional_id",
                        "group_id",
                        "producer_id",
                        "generation_id_or_member_epoch",
                        "member_id",
                        "group_instance_id",
                        "topics",
                    )
                },
                "producer_epoch": epoch + 3,
            }
        )
        assert c.request(28, 5, stale).topics[0].partitions[0].error_code == ErrorCode.PRODUCER_FENCED
        # v6 names topics by id (KIP-1319): the topic's id commits, an id no topic has is
        # UNKNOWN_TOPIC_ID and commits nothing
        Metadata = REQUESTS[3]
        meta = c.request(3, 12, Metadata(topics=[Metadata.MetadataRequestTopic(name="v2o")]))
        topic_id = meta.topics[0].topic_id
        by_id = TxnOffsetCommit(
            **{k: getattr(req, k) for k in ("transactional_id", "group_id", "producer_id", "producer_epoch")},
            topics=[
                TxnOffsetCommit.TxnOffsetCommitRequestTopic(
                    topic_id=tid,
                    partitions=[
                        TxnOffsetCommit.TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=9, committed_leader_epoch=-1, committed_metadata=""
                        )
                    ],
                )
                for tid in (topic_id, uuid.uuid4())
            ],
        )
        resp = c.request(28, 6, by_id)
        assert [(t.topic_id, t.partitions[0].error_code) for t in resp.topics] == [
            (topic_id, ErrorCode.NONE),
            (by_id.topics[1].topic_id, ErrorCode.UNKNOWN_TOPIC_ID),
        ], resp
        assert end_v5(c, "t2o", pid, epoch, True).error_code == ErrorCode.NONE
        wait_state(c, "t2o", "CompleteCommit")
    g = Consumer({"bootstrap.servers": bs, "group.id": "g2o"})
    try:
        assert g.committed([TopicPartition("v2o", 0)], timeout=10)[0].offset == 9
    finally:
        g.close()


def test_add_partitions_to_txn_v5_from_a_broker_verifies_and_adds(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "v2a", 2) == 0
        c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["t2a"]))
        r = init(c, "t2a")
        pid, epoch = r.producer_id, r.producer_epoch

        def call(version, verify, parts, e=epoch):
            body = AddPartitionsToTxn(
                transactions=[
                    AddPartitionsToTxn.AddPartitionsToTxnTransaction(
                        transactional_id="t2a",
                        producer_id=pid,
                        producer_epoch=e,
                        verify_only=verify,
                        topics=[AddPartitionsToTxn.AddPartitionsToTxnTopic(name="v2a", partitions=parts)],
                    )
                ]
            )
            resp = c.request(24, version, body)
            assert resp.error_code == ErrorCode.NONE
            return {
                p.partition_index: p.partition_error_code
                for t in resp.results_by_transaction[0].topic_results
                for p in t.results_by_partition
            }

        assert call(5, True, [0]) == {0: ErrorCode.TRANSACTION_ABORTABLE}
        assert call(4, True, [0]) == {0: ErrorCode.INVALID_TXN_STATE}
        assert call(5, False, [0]) == {0: ErrorCode.NONE}
        assert call(5, True, [0, 1]) == {0: ErrorCode.NONE, 1: ErrorCode.TRANSACTION_ABORTABLE}
        assert call(5, False, [1], e=epoch + 1) == {1: ErrorCode.PRODUCER_FENCED}
        assert describe(c, "t2a").transaction_state == "Ongoing"


def test_an_exhausted_epoch_moves_the_producer_to_a_new_producer_id(broker):
    """Past epoch 32766 the coordinator allocates the next producer id: the markers go out
    under the old id at epoch 32767, and EndTxn answers the new id at epoch 0."""
    import trio

    bs = broker.bootstrap_servers
    with RawClient(bs) as c:
        assert create_topic(c, "v2x") == 0
        c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["t2x"]))
        r = init(c, "t2x")
        pid = r.producer_id

        async def age():  # as if 32765 transactions had ended since (one write of the state)
            coordinator = broker.server.transactions
            meta = coordinator.txns["t2x"]
            async with meta.lock:
                await coordinator._write(meta.changed(producer_epoch=32765))

        trio.from_thread.run(age, trio_token=broker._token)
        assert produce(c, "t2x", "v2x", 0, pid, 32765, 0, [b"a"]).error_code == ErrorCode.NONE
        e = end_v5(c, "t2x", pid, 32765, True)
        assert (e.error_code, e.producer_id, e.producer_epoch) == (ErrorCode.NONE, pid, 32766), e
        wait_state(c, "t2x", "CompleteCommit")
        assert produce(c, "t2x", "v2x", 0, pid, 32766, 0, [b"b"]).error_code == ErrorCode.NONE
        e = end_v5(c, "t2x", pid, 32766, True)
        assert e.error_code == ErrorCode.NONE and e.producer_id != pid and e.producer_epoch == 0, e
        new_pid = e.producer_id
        d = wait_state(c, "t2x", "CompleteCommit")
        assert (d.producer_id, d.producer_epoch) == (new_pid, 0), d
        # a retry of that EndTxn gets the same answer
        e = end_v5(c, "t2x", pid, 32766, True)
        assert (e.error_code, e.producer_id, e.producer_epoch) == (ErrorCode.NONE, new_pid, 0), e
        # the old id is no longer the transactional id's: refused, nothing appended
        leo = broker.server.replicas.get("v2x", 0).log.log_end_offset
        late = produce(c, "t2x", "v2x", 0, pid, 32766, 1, [b"late"])
        assert late.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING, late
        assert broker.server.replicas.get("v2x", 0).log.log_end_offset == leo
        assert produce(c, "t2x", "v2x", 0, new_pid, 0, 0, [b"c"]).error_code == ErrorCode.NONE
        e = end_v5(c, "t2x", new_pid, 0, True)
        assert (e.error_code, e.producer_id, e.producer_epoch) == (ErrorCode.NONE, new_pid, 1), e
    assert committed_values(bs, "v2x") == [b"a", b"b", b"c"]


def add_v3(c, txn_id, pid, epoch, topic, partition):
    A = AddPartitionsToTxn
    r = c.request(
        24,
        3,
        A(
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=[partition])],
        ),
    )
    return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def test_a_v1_batch_for_a_partition_never_added_is_refused(broker):
    """KIP-890 part 1: a transactions-v1 producer's first batch on a partition is checked with
    the coordinator; one the producer never added cannot open a hanging transaction."""
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "v1v", 2) == 0
        c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["t1v"]))
        r = init(c, "t1v")
        pid, epoch = r.producer_id, r.producer_epoch
        log0 = broker.server.replicas.get("v1v", 0).log
        r = produce(c, "t1v", "v1v", 0, pid, epoch, 0, [b"stray"], version=9)
        assert r.error_code == ErrorCode.INVALID_TXN_STATE, r
        r = produce(c, "t1v", "v1v", 0, pid, epoch, 0, [b"stray"], version=11)
        assert r.error_code == ErrorCode.TRANSACTION_ABORTABLE, r
        assert log0.log_end_offset == 0
        # added first, as a v1 producer does: accepted, and later batches go straight in
        assert add_v3(c, "t1v", pid, epoch, "v1v", 0) == ErrorCode.NONE
        assert produce(c, "t1v", "v1v", 0, pid, epoch, 0, [b"a"], version=9).error_code == ErrorCode.NONE
        assert produce(c, "t1v", "v1v", 0, pid, epoch, 1, [b"b"], version=9).error_code == ErrorCode.NONE
        # partition 1 is not in the transaction
        assert produce(c, "t1v", "v1v", 1, pid, epoch, 0, [b"c"], version=9).error_code == ErrorCode.INVALID_TXN_STATE
        assert (
            c.request(
                26, 3, REQUESTS[26](transactional_id="t1v", producer_id=pid, producer_epoch=epoch, committed=True)
            ).error_code
            == ErrorCode.NONE
        )
        wait_state(c, "t1v", "CompleteCommit")
    assert committed_values(broker.bootstrap_servers, "v1v", 2) == [b"a", b"b"]


def test_verification_off_lets_a_stray_v1_batch_in(tmp_path):
    with Broker(data_dir=tmp_path / "d", config={"transaction.partition.verification.enable": "false"}) as b:
        with RawClient(b.bootstrap_servers) as c:
            assert create_topic(c, "v1o") == 0
            c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["t1o"]))
            r = init(c, "t1o")
            resp = produce(c, "t1o", "v1o", 0, r.producer_id, r.producer_epoch, 0, [b"stray"], version=9)
            assert resp.error_code == ErrorCode.NONE, resp  # a hanging transaction, as before KIP-890
            assert b.server.replicas.get("v1o", 0).log.log_end_offset == 1


def test_kafka_transactions_finds_and_aborts_a_hanging_transaction(tmp_path):
    """With verification off a stray v1 batch hangs its partition's LSO; Kafka's
    kafka-transactions tool finds it (find-hanging) and aborts it (WriteTxnMarkers)."""
    require_java()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benches.peers.kafka import install

    tools = install()
    txns = "org.apache.kafka.tools.TransactionsCommand"
    with Broker(data_dir=tmp_path / "d", config={"transaction.partition.verification.enable": "false"}) as b:
        bs = b.bootstrap_servers
        with RawClient(bs) as c:
            assert create_topic(c, "hang") == 0
            c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["th"]))
            r = init(c, "th")
            assert (
                produce(c, "th", "hang", 0, r.producer_id, r.producer_epoch, 0, [b"stray"], version=9).error_code == 0
            )
        p = Producer({"bootstrap.servers": bs})
        p.produce("hang", value=b"after", partition=0)
        assert p.flush(10) == 0
        assert committed_values(bs, "hang") == []  # held back by the open transaction
        out = subprocess.run(
            tools.tools_java(
                txns, ["--bootstrap-server", bs, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"]
            ),
            capture_output=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr.decode()[-2000:]
        assert "hang" in out.stdout.decode(), out.stdout.decode()
        out = subprocess.run(
            tools.tools_java(
                txns, ["--bootstrap-server", bs, "abort", "--topic", "hang", "--partition", "0", "--start-offset", "0"]
            ),
            capture_output=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr.decode()[-2000:] + out.stdout.decode()[-2000:]
        assert committed_values(bs, "hang") == [b"after"]
