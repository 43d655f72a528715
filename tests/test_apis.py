"""Each advertised API, exercised over the wire with exact requests: idempotent
produce, long-poll fetch and its byte limits, ListOffsets by time, DeleteRecords,
configs, DescribeCluster, OffsetForLeaderEpoch, DescribeProducers, ApiVersions."""

from __future__ import annotations

import threading
import time

from rawclient import RawClient
from test_bad_input import create_topic, produce_request

from logbroker import Broker, _core
from logbroker.broker.handlers import HANDLERS
from logbroker.protocol import REQUESTS, ErrorCode

Fetch = REQUESTS[1]
ListOffsets = REQUESTS[2]
DeleteRecords = REQUESTS[21]
InitProducerId = REQUESTS[22]
OffsetForLeaderEpoch = REQUESTS[23]
DescribeConfigs = REQUESTS[32]
IncrementalAlterConfigs = REQUESTS[44]
DescribeCluster = REQUESTS[60]
DescribeProducers = REQUESTS[61]
ApiVersions = REQUESTS[18]


def batch(values: list[bytes], ts: int = 1_700_000_000_000, **kw) -> bytes:
    return _core.encode_batch([(None, v, i, []) for i, v in enumerate(values)], base_timestamp=ts, **kw)


def produce(c: RawClient, topic: str, records: bytes, partition: int = 0, version: int = 9):
    return c.request(0, version, produce_request(topic, partition, records)).responses[0].partition_responses[0]


def fetch(
    c: RawClient,
    topic: str,
    offset: int,
    *,
    partition: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    max_bytes: int = 50 << 20,
    partition_max_bytes: int = 1 << 20,
    version: int = 11,
):
    req = Fetch(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            Fetch.FetchTopic(
                topic=topic,
                partitions=[
                    Fetch.FetchPartition(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=partition_max_bytes,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    return c.request(1, version, req).responses[0].partitions[0]


def list_offset(c: RawClient, topic: str, timestamp: int, version: int = 7):
    req = ListOffsets(
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsets.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsets.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)
                ],
            )
        ],
    )
    return c.request(2, version, req).topics[0].partitions[0]


def test_api_versions_advertises_exactly_the_handlers(broker):
    with RawClient(broker.bootstrap_servers) as c:
        for v in range(0, 5):
            resp = c.request(18, v, ApiVersions(client_software_name="t", client_software_version="1"))
            got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            # a single node is a quorum of one voter: DescribeQuorum is served as in a cluster;
            # on a PLAINTEXT listener SaslHandshake and SaslAuthenticate are not (tests/test_sasl.py);
            # the share-group APIs are (group.share.enable is true by default), and the
            # streams-group APIs (streams.version is 1 on a new cluster)
            assert got == {k: (e.min_version, e.max_version) for k, e in HANDLERS.items() if not e.sasl_only}
            assert 55 in got and 88 in got and 89 in got
            assert 17 not in got and 36 not in got and HANDLERS[17].sasl_only
            assert 78 in got and HANDLERS[78].enabled_by == "group.share.enable"


def test_idempotent_retry_is_not_written_twice_and_gap_is_refused(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "idem") == 0
        init = c.request(22, 4, InitProducerId(transactional_id=None, transaction_timeout_ms=60000))
        assert init.error_code == 0 and init.producer_id >= 0
        pid, epoch = init.producer_id, init.producer_epoch
        b0 = batch([b"a", b"b", b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        r = produce(c, "idem", b0)
        assert (r.error_code, r.base_offset) == (0, 0)
        r = produce(c, "idem", b0)  # the retry: same sequence numbers
        assert (r.error_code, r.base_offset) == (0, 0)
        assert broker.server.replicas.get("idem", 0).log.log_end_offset == 3
        gap = batch([b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=7)
        r = produce(c, "idem", gap)
        assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert broker.server.replicas.get("idem", 0).log.log_end_offset == 3
        nxt = batch([b"d"], producer_id=pid, producer_epoch=epoch, base_sequence=3)
        r = produce(c, "idem", nxt)
        assert (r.error_code, r.base_offset) == (0, 3)
        # a fenced (older) epoch after a bump is refused
        bumped = c.request(
            22,
            4,
            InitProducerId(transactional_id=None, transaction_timeout_ms=60000, producer_id=pid, producer_epoch=epoch),
        )
        assert (bumped.producer_id, bumped.producer_epoch) == (pid, epoch + 1)
        r = produce(c, "idem", batch([b"n"], producer_id=pid, producer_epoch=epoch + 1, base_sequence=0))
        assert r.error_code == 0
        r = produce(c, "idem", batch([b"old"], producer_id=pid, producer_epoch=epoch, base_sequence=4))
        assert r.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        dp = c.request(
            61, 0, DescribeProducers(topics=[DescribeProducers.TopicRequest(name="idem", partition_indexes=[0])])
        )
        states = dp.topics[0].partitions[0].active_producers
        assert [(s.producer_id, s.producer_epoch, s.last_sequence) for s in states] == [(pid, epoch + 1, 0)]


def test_fetch_long_poll_wakes_on_produce(broker):
    with RawClient(broker.bootstrap_servers) as c, RawClient(broker.bootstrap_servers) as p:
        assert create_topic(c, "poll") == 0
        timer = threading.Timer(0.3, lambda: produce(p, "poll", batch([b"late"])))
        t0 = time.monotonic()
        timer.start()
        r = fetch(c, "poll", 0, max_wait_ms=5000, min_bytes=1)
        waited = time.monotonic() - t0
        timer.join()
        assert r.error_code == 0 and len(r.records) > 0
        assert 0.25 < waited < 4, waited
        # nothing new: the fetch returns empty after max_wait_ms
        t0 = time.monotonic()
        r = fetch(c, "poll", 1, max_wait_ms=300, min_bytes=1)
        assert len(r.records) == 0 and 0.25 < time.monotonic() - t0 < 3
        assert r.high_watermark == 1


def test_fetch_byte_limits(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "lim") == 0
        one = batch([b"v" * 1000] * 10)  # ~10 KB per batch
        for _ in range(10):
            assert produce(c, "lim", one).error_code == 0
        whole = fetch(c, "lim", 0)
        assert len(whole.records) == 10 * len(one)
        part = fetch(c, "lim", 0, partition_max_bytes=3 * len(one) + 5)
        assert len(part.records) == 3 * len(one)  # whole batches only
        tiny = fetch(c, "lim", 0, partition_max_bytes=10)
        assert len(tiny.records) == len(one)  # KIP-74: at least one whole batch
        mid = fetch(c, "lim", 25)  # an offset inside a batch returns that batch
        assert bytes(mid.records)[:8] == (20).to_bytes(8, "big")
        oor = fetch(c, "lim", 1000)
        assert oor.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_list_offsets_by_time_and_delete_records(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "times") == 0
        for i in range(5):
            assert produce(c, "times", batch([b"x", b"y"], ts=1_000_000 + i * 1000)).error_code == 0
        assert list_offset(c, "times", -2).offset == 0
        assert list_offset(c, "times", -1).offset == 10
        r = list_offset(c, "times", 1_002_000)
        assert (r.offset, r.timestamp) == (4, 1_002_000)
        r = list_offset(c, "times", 1_002_001)
        assert (r.offset, r.timestamp) == (5, 1_002_001)  # second record of that batch has ts +1
        assert list_offset(c, "times", 9_999_999).offset == -1
        r = list_offset(c, "times", -3)
        assert (r.offset, r.timestamp) == (9, 1_004_001)
        assert list_offset(c, "times", -1, version=1).offset == 10
        dr = c.request(
            21,
            1,
            DeleteRecords(
                topics=[
                    DeleteRecords.DeleteRecordsTopic(
                        name="times", partitions=[DeleteRecords.DeleteRecordsPartition(partition_index=0, offset=6)]
                    )
                ],
                timeout_ms=5000,
            ),
        )
        res = dr.topics[0].partitions[0]
        assert (res.error_code, res.low_watermark) == (0, 6)
        assert list_offset(c, "times", -2).offset == 6
        assert fetch(c, "times", 2).error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_configs_describe_alter(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "cfg") == 0
        alter = IncrementalAlterConfigs(
            resources=[
                IncrementalAlterConfigs.AlterConfigsResource(
                    resource_type=2,
                    resource_name="cfg",
                    configs=[
                        IncrementalAlterConfigs.AlterableConfig(name="retention.ms", config_operation=0, value="12345")
                    ],
                )
            ],
            validate_only=False,
        )
        assert c.request(44, 1, alter).responses[0].error_code == 0
        bad = IncrementalAlterConfigs(
            resources=[
                IncrementalAlterConfigs.AlterConfigsResource(
                    resource_type=2,
                    resource_name="cfg",
                    configs=[
                        IncrementalAlterConfigs.AlterableConfig(name="retention.ms", config_operation=0, value="soon")
                    ],
                )
            ],
            validate_only=False,
        )
        r = c.request(44, 1, bad).responses[0]
        assert r.error_code == ErrorCode.INVALID_CONFIG and "soon" in r.error_message
        desc = c.request(
            32,
            4,
            DescribeConfigs(
                resources=[
                    DescribeConfigs.DescribeConfigsResource(
                        resource_type=2, resource_name="cfg", configuration_keys=None
                    )
                ],
                include_synonyms=True,
                include_documentation=True,
            ),
        )
        configs = {e.name: e for e in desc.results[0].configs}
        assert configs["retention.ms"].value == "12345" and configs["retention.ms"].config_source == 1
        assert configs["segment.bytes"].config_source == 5
        desc = c.request(
            32,
            1,
            DescribeConfigs(
                resources=[
                    DescribeConfigs.DescribeConfigsResource(
                        resource_type=4,
                        resource_name=str(broker.server.node_id),
                        configuration_keys=["log.segment.bytes"],
                    )
                ]
            ),
        )
        assert [(e.name, e.value) for e in desc.results[0].configs] == [("log.segment.bytes", "1073741824")]

        # deleting what is not set changes nothing (Kafka's rule; kafka-reassign-partitions
        # --verify clears throttles this way); setting a static broker key is refused
        def incremental(resource_type: int, name: str, key: str, op: int, value: str | None = None):
            req = IncrementalAlterConfigs(
                resources=[
                    IncrementalAlterConfigs.AlterConfigsResource(
                        resource_type=resource_type,
                        resource_name=name,
                        configs=[IncrementalAlterConfigs.AlterableConfig(name=key, config_operation=op, value=value)],
                    )
                ],
                validate_only=False,
            )
            return c.request(44, 1, req).responses[0]

        node = str(broker.server.node_id)
        assert incremental(4, node, "leader.replication.throttled.rate", 1).error_code == 0
        assert incremental(2, "cfg", "leader.replication.throttled.replicas", 1).error_code == 0
        assert (
            incremental(2, "nope", "leader.replication.throttled.replicas", 1).error_code
            == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        r = incremental(4, node, "num.partitions", 0, "3")
        assert r.error_code == ErrorCode.INVALID_CONFIG and "static" in r.error_message
        assert (
            incremental(4, node, "log.retention.ms", 0, "1000").error_code == 0
        )  # dynamic (test_dynamic_broker_configs)
        assert incremental(4, node, "log.retention.ms", 1).error_code == 0
        r = incremental(2, "cfg", "leader.replication.throttled.replicas", 0, "*")
        assert r.error_code == ErrorCode.INVALID_CONFIG, "a key logbroker does not have cannot be set"
        desc = c.request(
            32,
            4,
            DescribeConfigs(
                resources=[
                    DescribeConfigs.DescribeConfigsResource(
                        resource_type=2, resource_name="cfg", configuration_keys=None
                    )
                ],
                include_synonyms=False,
                include_documentation=False,
            ),
        )
        assert {e.name: e.value for e in desc.results[0].configs}["retention.ms"] == "12345", "nothing else changed"


def test_describe_cluster_and_offset_for_leader_epoch(broker):
    with RawClient(broker.bootstrap_servers) as c:
        dc = c.request(60, 1, DescribeCluster(include_cluster_authorized_operations=False, endpoint_type=1))
        assert dc.cluster_id == broker.server.cluster_id
        assert [(b.broker_id, b.port) for b in dc.brokers] == [(broker.server.node_id, broker.port)]
        assert create_topic(c, "epochs") == 0
        assert produce(c, "epochs", batch([b"1", b"2"])).error_code == 0
        req = OffsetForLeaderEpoch(
            replica_id=-1,
            topics=[
                OffsetForLeaderEpoch.OffsetForLeaderTopic(
                    topic="epochs",
                    partitions=[
                        OffsetForLeaderEpoch.OffsetForLeaderPartition(
                            partition=0, current_leader_epoch=-1, leader_epoch=0
                        )
                    ],
                )
            ],
        )
        r = c.request(23, 4, req).topics[0].partitions[0]
        assert (r.error_code, r.leader_epoch, r.end_offset) == (0, 0, 2)


def test_retention_and_roll_run_in_the_broker(tmp_path):
    with Broker(data_dir=tmp_path / "d", log_retention_check_interval_ms=100, log_flush_scheduler_interval_ms=100) as b:
        with RawClient(b.bootstrap_servers) as c:
            req = REQUESTS[19](
                topics=[
                    REQUESTS[19].CreatableTopic(
                        name="ret",
                        num_partitions=1,
                        replication_factor=1,
                        assignments=[],
                        configs=[
                            REQUESTS[19].CreatableTopicConfig(name="segment.bytes", value="2000"),
                            REQUESTS[19].CreatableTopicConfig(name="retention.bytes", value="5000"),
                        ],
                    )
                ],
                timeout_ms=5000,
                validate_only=False,
            )
            assert c.request(19, 5, req).topics[0].error_code == 0
            for _ in range(20):
                assert produce(c, "ret", batch([b"z" * 900])).error_code == 0
            deadline = time.monotonic() + 10
            while list_offset(c, "ret", -2).offset == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            start = list_offset(c, "ret", -2).offset
            assert start > 0
            assert b.server.replicas.get("ret", 0).log.size_bytes <= 5000 + 2000
            assert fetch(c, "ret", start).error_code == 0
            assert fetch(c, "ret", start - 1).error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_idle_connections_are_closed(tmp_path):
    with Broker(data_dir=tmp_path / "d", connections_max_idle_ms=300) as b:
        with RawClient(b.bootstrap_servers) as c:
            assert c.request(18, 3, ApiVersions(client_software_name="t", client_software_version="1")).error_code == 0
            t0 = time.monotonic()
            assert c.is_closed(timeout=5)
            assert 0.2 < time.monotonic() - t0 < 4


def test_delete_topic_wakes_a_waiting_fetch(broker):
    with RawClient(broker.bootstrap_servers) as c, RawClient(broker.bootstrap_servers) as admin:
        assert create_topic(c, "gone") == 0
        DeleteTopics = REQUESTS[20]
        timer = threading.Timer(0.3, lambda: admin.request(20, 4, DeleteTopics(topic_names=["gone"], timeout_ms=5000)))
        timer.start()
        t0 = time.monotonic()
        r = fetch(c, "gone", 0, max_wait_ms=5000, min_bytes=1)
        timer.join()
        assert r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert time.monotonic() - t0 < 4
        assert not (broker.data_dir / "gone-0").exists()


def test_describe_log_dirs(broker):
    DescribeLogDirs = REQUESTS[35]
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "dirs") == 0
        assert produce(c, "dirs", batch([b"x" * 100, b"y" * 100])).error_code == 0
        everything = c.request(35, 4, DescribeLogDirs(topics=None))
        assert everything.error_code == 0 and len(everything.results) == 1
        d = everything.results[0]
        assert d.error_code == 0 and d.log_dir == str(broker.server.config.data_dir.resolve())
        assert 0 < d.usable_bytes <= d.total_bytes
        sizes = {
            (t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
            for t in d.topics
            for p in t.partitions
        }
        size, lag, future = sizes[("dirs", 0)]
        assert size > 200 and lag == 0 and future is False
        # named partitions only; unknown ones are left out; v1 has no volume sizes
        some = c.request(
            35,
            1,
            DescribeLogDirs(
                topics=[
                    DescribeLogDirs.DescribableLogDirTopic(topic="dirs", partitions=[0, 5]),
                    DescribeLogDirs.DescribableLogDirTopic(topic="nope", partitions=[0]),
                ]
            ),
        )
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in some.results[0].topics] == [("dirs", [0])]
