"""Transaction APIs over the wire with bad or out-of-order input: each gets its Kafka error
code, nothing is written that should not be, and the transactional id keeps working."""

from __future__ import annotations

import time

from rawclient import RawClient
from test_bad_input import create_topic

from logbroker.protocol import REQUESTS, ErrorCode

FindCoordinator = REQUESTS[10]
InitProducerId = REQUESTS[22]
AddPartitionsToTxn = REQUESTS[24]
AddOffsetsToTxn = REQUESTS[25]
EndTxn = REQUESTS[26]
WriteTxnMarkers = REQUESTS[27]
TxnOffsetCommit = REQUESTS[28]


def init(c, txn_id, timeout_ms=60000, version=4, pid=-1, epoch=-1):
    return c.request(
        22,
        version,
        InitProducerId(
            transactional_id=txn_id, transaction_timeout_ms=timeout_ms, producer_id=pid, producer_epoch=epoch
        ),
    )


def add(c, txn_id, pid, epoch, parts, version=3):
    topics = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    r = c.request(
        24,
        version,
        AddPartitionsToTxn(
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[
                AddPartitionsToTxn.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()
            ],
        ),
    )
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def end(c, txn_id, pid, epoch, commit, version=3):
    return c.request(
        26, version, EndTxn(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit)
    ).error_code


def test_protocol_errors_and_state_rules(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "te") == 0
        c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["tx"]))
        r = init(c, "tx", timeout_ms=10**9)
        assert r.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT, r
        r = init(c, "")
        assert r.error_code == ErrorCode.INVALID_REQUEST, r
        r = init(c, "tx")
        assert r.error_code == ErrorCode.NONE and r.producer_epoch == 0, r
        pid, epoch = r.producer_id, r.producer_epoch

        # nothing open: commit is INVALID_TXN_STATE, abort is a no-op
        assert end(c, "tx", pid, epoch, True) == ErrorCode.INVALID_TXN_STATE
        assert end(c, "tx", pid, epoch, False) == ErrorCode.NONE
        # unknown mapping, stale epoch (PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before)
        assert add(c, "nobody", pid, epoch, [("te", 0)]) == {("te", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        assert add(c, "tx", pid + 1, epoch, [("te", 0)]) == {("te", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        assert add(c, "tx", pid, epoch + 5, [("te", 0)]) == {("te", 0): ErrorCode.PRODUCER_FENCED}
        assert add(c, "tx", pid, epoch + 5, [("te", 0)], version=1) == {("te", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
        # an unknown partition fails the whole request
        assert add(c, "tx", pid, epoch, [("te", 0), ("te", 9)]) == {
            ("te", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
            ("te", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        r = c.request(25, 3, AddOffsetsToTxn(transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id=""))
        assert r.error_code == ErrorCode.INVALID_GROUP_ID

        # a real transaction: add, commit; a retried commit is fine, an abort now is not
        assert add(c, "tx", pid, epoch, [("te", 0)]) == {("te", 0): ErrorCode.NONE}
        assert end(c, "tx", pid, epoch, True) == ErrorCode.NONE
        deadline = time.monotonic() + 10
        while end(c, "tx", pid, epoch, True) == ErrorCode.CONCURRENT_TRANSACTIONS and time.monotonic() < deadline:
            time.sleep(0.05)
        assert end(c, "tx", pid, epoch, True) == ErrorCode.NONE, "a retried EndTxn of a completed commit"
        assert end(c, "tx", pid, epoch, False) == ErrorCode.INVALID_TXN_STATE

        # KIP-360: re-init with the current id and epoch bumps it; a stale pair is fenced
        r = init(c, "tx", pid=pid, epoch=epoch)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (ErrorCode.NONE, pid, epoch + 1), r
        r = init(c, "tx", pid=pid, epoch=epoch)
        assert r.error_code == ErrorCode.PRODUCER_FENCED, r


def test_write_txn_markers_checks_epochs_and_partitions(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "wm") == 0
        r = init(c, "wtx")
        assert r.error_code == ErrorCode.NOT_COORDINATOR, "no __transaction_state before a FindCoordinator"
        c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["wtx"]))
        r = init(c, "wtx")
        assert r.error_code == ErrorCode.NONE, r
        pid, epoch = r.producer_id, r.producer_epoch

        def markers(producer_epoch, coordinator_epoch, parts, commit=True):
            req = WriteTxnMarkers(
                markers=[
                    WriteTxnMarkers.WritableTxnMarker(
                        producer_id=pid,
                        producer_epoch=producer_epoch,
                        transaction_result=commit,
                        coordinator_epoch=coordinator_epoch,
                        topics=[
                            WriteTxnMarkers.WritableTxnMarkerTopic(name=t, partition_indexes=[p]) for t, p in parts
                        ],
                    )
                ]
            )
            resp = c.request(27, 1, req)
            return [p.error_code for m in resp.markers for t in m.topics for p in t.partitions]

        assert markers(epoch, 5, [("wm", 0)]) == [ErrorCode.NONE]
        assert markers(epoch, 4, [("wm", 0)]) == [ErrorCode.TRANSACTION_COORDINATOR_FENCED]
        assert markers(epoch + 3, 5, [("wm", 0)]) == [ErrorCode.NONE]
        assert markers(epoch, 6, [("wm", 0)]) == [ErrorCode.INVALID_PRODUCER_EPOCH]
        assert markers(epoch + 3, 6, [("nope", 0)]) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert broker.server.replicas.get("wm", 0).log.log_end_offset == 2, "only the two accepted markers were written"


def test_txn_offset_commit_checks_the_member(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "to") == 0
        c.request(10, 3, FindCoordinator(key="g-to", key_type=0))
        c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["otx"]))
        r = init(c, "otx")
        assert r.error_code == ErrorCode.NONE, r
        pid, epoch = r.producer_id, r.producer_epoch
        req = TxnOffsetCommit(
            transactional_id="otx",
            group_id="g-to",
            producer_id=pid,
            producer_epoch=epoch,
            generation_id_or_member_epoch=3,
            member_id="ghost",
            topics=[
                TxnOffsetCommit.TxnOffsetCommitRequestTopic(
                    name="to",
                    partitions=[
                        TxnOffsetCommit.TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=5, committed_metadata=""
                        )
                    ],
                )
            ],
        )
        (code,) = [p.error_code for t in c.request(28, 3, req).topics for p in t.partitions]
        assert code == ErrorCode.UNKNOWN_MEMBER_ID


def test_describe_and_list_transactions(broker):
    DescribeTransactions, ListTransactions = REQUESTS[65], REQUESTS[66]
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "dl", 2) == 0
        c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["dtx"]))
        r = init(c, "dtx", timeout_ms=45000)
        pid, epoch = r.producer_id, r.producer_epoch
        assert add(c, "dtx", pid, epoch, [("dl", 1), ("dl", 0)]) == {("dl", 0): 0, ("dl", 1): 0}
        d = c.request(65, 0, DescribeTransactions(transactional_ids=["dtx", "nobody"]))
        found, missing = d.transaction_states
        assert (
            found.error_code,
            found.transaction_state,
            found.producer_id,
            found.producer_epoch,
            found.transaction_timeout_ms,
        ) == (0, "Ongoing", pid, epoch, 45000)
        assert found.transaction_start_time_ms > 0
        assert [(t.topic, list(t.partitions)) for t in found.topics] == [("dl", [0, 1])]
        assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND

        def listed(states=(), pids=(), duration=-1, version=1):
            r = c.request(
                66,
                version,
                ListTransactions(state_filters=list(states), producer_id_filters=list(pids), duration_filter=duration),
            )
            return (
                r.error_code,
                list(r.unknown_state_filters),
                [(t.transactional_id, t.transaction_state) for t in r.transaction_states],
            )

        assert listed() == (0, [], [("dtx", "Ongoing")])
        assert listed(states=["Ongoing", "Bogus"]) == (0, ["Bogus"], [("dtx", "Ongoing")])
        assert listed(states=["Empty"])[2] == []
        assert listed(pids=[pid + 1])[2] == []
        assert listed(duration=3_600_000)[2] == [], "not open for an hour"
        assert listed(version=0) == (0, [], [("dtx", "Ongoing")])
        assert end(c, "dtx", pid, epoch, False) == ErrorCode.NONE
        deadline = time.monotonic() + 10
        while listed()[2] != [("dtx", "CompleteAbort")] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listed()[2] == [("dtx", "CompleteAbort")]


def test_idle_transactional_ids_expire_and_stay_removed_after_a_restart(tmp_path):
    from conftest import wait_until

    from logbroker import Broker

    DescribeTransactions = REQUESTS[65]
    config = {
        "transactional.id.expiration.ms": 1500,
        "transaction.remove.expired.transaction.cleanup.interval.ms": 300,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 300,
    }

    def states(c):
        d = c.request(65, 0, DescribeTransactions(transactional_ids=["idle-tx", "busy-tx"]))
        return [(s.error_code, s.transaction_state) for s in d.transaction_states]

    with Broker(data_dir=tmp_path / "d", config=config) as b, RawClient(b.bootstrap_servers) as c:
        assert create_topic(c, "ex", 1) == 0
        c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=["idle-tx", "busy-tx"]))
        idle = init(c, "idle-tx")
        busy = init(c, "busy-tx", timeout_ms=60000)
        assert add(c, "busy-tx", busy.producer_id, busy.producer_epoch, [("ex", 0)]) == {("ex", 0): 0}
        assert states(c) == [(0, "Empty"), (0, "Ongoing")]
        # idle past transactional.id.expiration.ms: removed; an open transaction is not
        wait_until(
            lambda: states(c)[0][0] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
            timeout=15,
            what="the idle transactional id removed",
        )
        assert states(c)[1] == (0, "Ongoing")
    with (
        Broker(data_dir=tmp_path / "d", config={**config, "transactional.id.expiration.ms": 600000}) as b,
        RawClient(b.bootstrap_servers) as c,
    ):
        wait_until(lambda: states(c)[1] == (0, "Ongoing"), timeout=15, what="the coordinator loaded")
        assert states(c)[0][0] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "the tombstone was read back"
        again = init(c, "idle-tx")
        assert again.error_code == 0 and again.producer_id != idle.producer_id, "a new producer id"
