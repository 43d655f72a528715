"""A single node runs on the metadata log, a quorum of one voter: its snapshots (by size and
by time), its restart, and a data directory from before the metadata log (meta.properties,
the partition directories and `__cluster_metadata/image.json`), whose image's records are
written to the log once, after which the file goes and nothing else changes (topic ids,
partitions, configs, records, SCRAM users, client quotas, the producer ids handed out)."""

from __future__ import annotations

import json
import shutil
import time

from logbroker import Admin, Broker, Consumer, NewTopic, Producer, TopicPartition
from logbroker.coord.metadata.metadata import MetadataImage


def legacy_layout(broker: Broker) -> MetadataImage:
    """Stop `broker` and turn its data directory into what a single node wrote before the
    metadata log: image.json holding its image, no `__cluster_metadata-0`."""
    image = broker.server.controller.image
    broker.stop()
    shutil.rmtree(broker.data_dir / "__cluster_metadata-0")
    (broker.data_dir / "__cluster_metadata").mkdir()
    (broker.data_dir / "__cluster_metadata" / "image.json").write_text(json.dumps(image.to_json(), indent=1))
    return image


def test_image_json_moves_to_the_metadata_log(tmp_path):
    data = tmp_path / "data"
    broker = Broker(data_dir=data).start()
    with Admin(broker.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("orders", 3, config={"retention.ms": "86400000"})])
        admin.alter_user_scram_credentials(upsertions=[("alice", "SCRAM-SHA-256", "secret", 4096)])
        admin.alter_client_quotas([({"user": "alice"}, {"producer_byte_rate": 1024.0})])
    with Producer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True) as p:
        for i in range(30):
            p.send("orders", value=b"v%d" % i, partition=i % 3)
        p.flush()
    before = legacy_layout(broker)
    assert before.topics["orders"].configs == {"retention.ms": "86400000"}

    broker = Broker(data_dir=data).start()
    try:
        after = broker.server.controller.image
        assert not (data / "__cluster_metadata").exists(), "image.json is gone once its records are committed"
        assert after.cluster_id == before.cluster_id
        t = after.topics["orders"]
        assert (t.topic_id, t.configs, sorted(t.partitions)) == (
            before.topics["orders"].topic_id,
            {"retention.ms": "86400000"},
            [0, 1, 2],
        )
        assert after.scram_credential("alice", "SCRAM-SHA-256") == before.scram_credential("alice", "SCRAM-SHA-256")
        assert after.client_quotas == before.client_quotas
        assert after.next_producer_id >= before.next_producer_id, "producer ids are never handed out twice"
        with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition("orders", i) for i in range(3)])
            got = []
            while len(got) < 30:
                got += [r.value for r in c.poll(timeout=5)]
        assert sorted(got) == sorted(b"v%d" % i for i in range(30))
        with Producer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True) as p:
            p.send("orders", value=b"after", partition=0).result(10)
    finally:
        broker.stop()

    # a start that committed the records but stopped before removing the file: the topic
    # ids already in the log say so; the file is removed, nothing is written twice
    (data / "__cluster_metadata").mkdir()
    (data / "__cluster_metadata" / "image.json").write_text(json.dumps(before.to_json()))
    with Broker(data_dir=data) as broker:
        assert not (data / "__cluster_metadata").exists()
        assert broker.server.controller.image.topics["orders"].topic_id == before.topics["orders"].topic_id
        with Admin(broker.bootstrap_servers) as admin:
            assert sorted(admin.list_topics()) == ["orders"]


def test_a_broken_image_json_stops_the_start_naming_the_file(tmp_path):
    data = tmp_path / "data"
    (data / "__cluster_metadata").mkdir(parents=True)
    (data / "__cluster_metadata" / "image.json").write_text('{"version": 1, "topics": [')
    broker = Broker(data_dir=data)
    try:
        broker.start()
    except Exception as e:  # noqa: BLE001 - the start's error is what is checked
        assert "image.json" in str(e) and "not valid JSON" in str(e), e
    else:
        broker.stop()
        raise AssertionError("a broken image.json was accepted")
    assert (data / "__cluster_metadata" / "image.json").exists(), "the file is left for the operator"


def test_snapshots_by_time_and_by_size_bound_the_log_across_restarts(tmp_path):
    data = tmp_path / "data"
    with Broker(data_dir=data, metadata_log_max_snapshot_interval_ms=300) as broker:
        quorum = broker.server.quorum
        assert quorum.single_voter and quorum.is_active and quorum.leader_id == 1
        with Admin(broker.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("a", 2)])
            deadline = time.monotonic() + 10
            while quorum.snapshot_index < quorum.applied_index:  # nothing else is written: the timer takes it
                assert time.monotonic() < deadline, (quorum.snapshot_index, quorum.applied_index)
                time.sleep(0.05)
            by_time = quorum.snapshot_index
    with Broker(data_dir=data, metadata_log_max_record_bytes_between_snapshots=2000) as broker:
        quorum = broker.server.quorum
        assert quorum.snapshot_index >= by_time, "the restart starts from the snapshot"
        assert sorted(broker.server.controller.image.topics) == ["a"]
        with Admin(broker.bootstrap_servers) as admin:
            admin.create_topics([NewTopic(f"t{i}", 3) for i in range(10)])  # ~5 kB of records: by size
        deadline = time.monotonic() + 10
        while quorum.snapshot_index <= by_time:  # taken right after the entry is published
            assert time.monotonic() < deadline, (quorum.snapshot_index, by_time)
            time.sleep(0.05)
    with Broker(data_dir=data) as broker:
        image = broker.server.controller.image
        assert sorted(image.topics) == sorted(["a"] + [f"t{i}" for i in range(10)])
        assert all(len(image.topics[f"t{i}"].partitions) == 3 for i in range(10))
