"""Share groups (KIP-932) on one in-process broker: a ShareFetch of up to 500 records and the
ShareAcknowledge that accepts them, which is answered only once the share-partition's new
state is written to `__share_group_state` at its share coordinator (here the same broker:
the write is a local append covered by the HW). Reported: cycle time, records per second,
and the ShareAcknowledge round trip alone.

Run: python -m pytest benches/bench_share.py --benchmark-only
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rawclient import RawClient  # noqa: E402

from logbroker import Broker  # noqa: E402
from logbroker.protocol import REQUESTS  # noqa: E402

ShareFetch, ShareAck, Metadata, CreateTopics = REQUESTS[78], REQUESTS[79], REQUESTS[3], REQUESTS[19]
RECORDS = 50_000
PER_FETCH = 500


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    config = {"group.share.auto.offset.reset": "earliest", "group.share.partition.max.record.locks": "2000"}
    with Broker(data_dir=tmp_path_factory.mktemp("share"), config=config) as b, RawClient(b.bootstrap_servers) as c:
        C = CreateTopics
        c.request(
            19,
            5,
            C(
                topics=[C.CreatableTopic(name="q", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=10000,
                validate_only=False,
            ),
        )
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 5})
        for _ in range(RECORDS):
            p.produce("q", b"x" * 100, partition=0)
        assert p.flush(30) == 0
        r = c.request(
            3, 12, Metadata(topics=[Metadata.MetadataRequestTopic(name="q")], allow_auto_topic_creation=False)
        )
        yield b, c, r.topics[0].topic_id


def test_share_fetch_and_acknowledge(benchmark, loaded):
    _b, c, tid = loaded
    member = str(uuid.uuid4())
    state = {"epoch": 0}
    ack_times: list[float] = []

    def cycle():
        f = c.request(
            78,
            1,
            ShareFetch(
                group_id="bench",
                member_id=member,
                share_session_epoch=state["epoch"],
                max_wait_ms=1000,
                min_bytes=1,
                max_bytes=1 << 22,
                max_records=PER_FETCH,
                batch_size=PER_FETCH,
                topics=[ShareFetch.FetchTopic(topic_id=tid, partitions=[ShareFetch.FetchPartition(partition_index=0)])],
                forgotten_topics_data=[],
            ),
        )
        state["epoch"] += 1
        ranges = [
            (a.first_offset, a.last_offset) for t in f.responses for p in t.partitions for a in p.acquired_records
        ]
        assert ranges, "records to acquire"
        t0 = time.perf_counter()
        a = c.request(
            79,
            1,
            ShareAck(
                group_id="bench",
                member_id=member,
                share_session_epoch=state["epoch"],
                topics=[
                    ShareAck.AcknowledgeTopic(
                        topic_id=tid,
                        partitions=[
                            ShareAck.AcknowledgePartition(
                                partition_index=0,
                                acknowledgement_batches=[
                                    ShareAck.AcknowledgementBatch(
                                        first_offset=lo, last_offset=hi, acknowledge_types=[1]
                                    )
                                    for lo, hi in ranges
                                ],
                            )
                        ],
                    )
                ],
            ),
        )
        ack_times.append(time.perf_counter() - t0)
        state["epoch"] += 1
        assert all(p.error_code == 0 for t in a.responses for p in t.partitions)
        return sum(hi - lo + 1 for lo, hi in ranges)

    benchmark.pedantic(cycle, rounds=60, iterations=1, warmup_rounds=5)
    med = benchmark.stats.stats.median
    benchmark.extra_info["records_per_s"] = PER_FETCH / med
    benchmark.extra_info["ack_median_ms"] = statistics.median(ack_times) * 1000
