"""Transactions on one in-process broker, protocol v1 against v2 (KIP-890 part 2), with raw
requests so both run the same client code. One transaction: 10 Produce requests of one
100-record batch to one partition, then EndTxn(commit). v1 adds the partition first
(AddPartitionsToTxn v3, Produce v11, EndTxn v3); v2 sends Produce v12, whose first batch the
network thread hands to the coordinator to add the partition, and EndTxn v5 (epoch bump).
A request answered CONCURRENT_TRANSACTIONS (v1) or NOT_ENOUGH_REPLICAS (v2) while the
previous transaction's markers are written is retried at once, as clients do (counted in
the cycle). Reported: transaction cycle time, and the first Produce of each transaction
alone (the one that waits for the coordinator in v2, and in v1 with
`transaction.partition.verification.enable`, KIP-890 part 1; v1 runs with it on and off).

Run: python -m pytest benches/bench_transactions.py --benchmark-only
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from batches import build_batch  # noqa: E402
from rawclient import RawClient  # noqa: E402

from logbroker import Broker  # noqa: E402
from logbroker.protocol import REQUESTS, ErrorCode  # noqa: E402

Produce, CreateTopics, FindCoordinator, InitProducerId = REQUESTS[0], REQUESTS[19], REQUESTS[10], REQUESTS[22]
AddPartitionsToTxn, EndTxn = REQUESTS[24], REQUESTS[26]
BATCHES = 10
RECORDS = 100
RETRY = {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_ENOUGH_REPLICAS}


@pytest.fixture(scope="module", params=["verified", "unverified"])
def broker(request, tmp_path_factory):
    config = {"transaction.partition.verification.enable": str(request.param == "verified").lower()}
    with Broker(data_dir=tmp_path_factory.mktemp("txn"), config=config) as b, RawClient(b.bootstrap_servers) as c:
        C = CreateTopics
        for name in ("tv1", "tv2"):
            c.request(
                19,
                5,
                C(
                    topics=[
                        C.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])
                    ],
                    timeout_ms=10000,
                    validate_only=False,
                ),
            )
        yield b


def _retry(call):
    while True:
        code, value = call()
        if code not in RETRY:
            assert code == ErrorCode.NONE, ErrorCode(code).name
            return value


def _run(benchmark, bootstrap, v2: bool):
    topic, txn_id = ("tv2", "bench-v2") if v2 else ("tv1", "bench-v1")
    c = RawClient(bootstrap)
    c.request(10, 4, FindCoordinator(key_type=1, coordinator_keys=[txn_id]))
    r = c.request(
        22, 4, InitProducerId(transactional_id=txn_id, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
    )
    state = {"pid": r.producer_id, "epoch": r.producer_epoch}
    values = [b"x" * 100] * RECORDS
    first_times: list[float] = []

    def produce(seq):
        batch = build_batch(
            values, producer_id=state["pid"], producer_epoch=state["epoch"], base_sequence=seq, transactional=True
        )
        resp = c.request(
            0,
            12 if v2 else 11,
            Produce(
                transactional_id=txn_id,
                acks=1,
                timeout_ms=5000,
                topic_data=[
                    Produce.TopicProduceData(
                        name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=batch)]
                    )
                ],
            ),
        )
        return resp.responses[0].partition_responses[0].error_code, None

    def add():
        A = AddPartitionsToTxn
        resp = c.request(
            24,
            3,
            A(
                v3_and_below_transactional_id=txn_id,
                v3_and_below_producer_id=state["pid"],
                v3_and_below_producer_epoch=state["epoch"],
                v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=[0])],
            ),
        )
        return resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code, None

    def end():
        resp = c.request(
            26,
            5 if v2 else 3,
            EndTxn(transactional_id=txn_id, producer_id=state["pid"], producer_epoch=state["epoch"], committed=True),
        )
        return resp.error_code, (resp.producer_id, resp.producer_epoch)

    def cycle():
        # v1 sequences go on across transactions under one epoch; v2 starts each at 0
        base = state.get("seq", 0)
        t0 = time.perf_counter()
        if not v2:
            _retry(add)
        _retry(lambda: produce(base))
        first_times.append(time.perf_counter() - t0)
        for i in range(1, BATCHES):
            _retry(lambda s=base + i * RECORDS: produce(s))
        pid, epoch = _retry(end)
        if v2:
            state["pid"], state["epoch"] = pid, epoch
        else:
            state["seq"] = base + BATCHES * RECORDS

    benchmark.pedantic(cycle, rounds=60, iterations=1, warmup_rounds=3)
    c.close()
    benchmark.extra_info["first_produce_median_ms"] = statistics.median(first_times) * 1000
    benchmark.extra_info["records_per_s"] = BATCHES * RECORDS / benchmark.stats.stats.median


def test_transaction_v1(benchmark, broker):
    _run(benchmark, broker.bootstrap_servers, v2=False)


def test_transaction_v2(benchmark, broker):
    if broker.config.get_bool("transaction.partition.verification.enable") is False:
        pytest.skip("v2 always goes through the coordinator")
    _run(benchmark, broker.bootstrap_servers, v2=True)
