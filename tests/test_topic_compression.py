"""Topic `compression.type` (and the codec levels), as Kafka: `producer` stores each batch as the
producer compressed it; a codec makes the leader recompress every data batch of another codec
before it is written, so the segment files hold only that codec; `uncompressed` decompresses.
Checked on the stored bytes (the segment files' batch headers), through confluent-kafka and our
own consumer, across an IncrementalAlterConfigs change of codec and level, with bad values
refused as INVALID_CONFIG and nothing created."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from conftest import wait_until

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_codecs(data_dir: Path, topic: str) -> list[int]:
    """The codec id (attributes bits 0-2) of every batch in partition 0's segment files."""
    out = []
    for seg in sorted((data_dir / f"{topic}-0").glob("*.log")):
        b = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(b):
            (length,) = struct.unpack_from(">i", b, pos + 8)
            (attributes,) = struct.unpack_from(">h", b, pos + 21)
            out.append(attributes & 0x07)
            pos += 12 + length
    return out


def produce(bs: str, topic: str, values: list[bytes], codec: str) -> None:
    p = Producer({"bootstrap.servers": bs, "compression.type": codec, "linger.ms": 20, "acks": "all"})
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0


def consume(bs: str, topic: str, n: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        wait_until(
            lambda: got.extend(m.value() for m in c.consume(500, 1) if m.error() is None) or len(got) >= n,
            60,
            f"{n} records from {topic}",
        )
    finally:
        c.close()
    return got


def create(admin: AdminClient, topic: str, config: dict[str, str]) -> None:
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


@pytest.fixture
def lb(broker_process, tmp_path):
    bp = broker_process(tmp_path / "data")
    admin = AdminClient({"bootstrap.servers": bp.bootstrap_servers})
    return bp, admin


def test_topic_codec_is_what_the_segments_hold(lb):
    bp, admin = lb
    bs = bp.bootstrap_servers
    values = [f"value-{i:05d}-".encode() * 8 for i in range(400)]
    for topic, config in (
        ("as-producer", {}),
        ("as-zstd", {"compression.type": "zstd"}),
        ("as-gzip", {"compression.type": "gzip", "compression.gzip.level": "9"}),
        ("as-none", {"compression.type": "uncompressed"}),
    ):
        create(admin, topic, config)
        produce(bs, topic, values, "lz4")
        assert consume(bs, topic, len(values)) == values, topic
    assert set(stored_codecs(bp.data_dir, "as-producer")) == {CODEC_IDS["lz4"]}
    assert set(stored_codecs(bp.data_dir, "as-zstd")) == {CODEC_IDS["zstd"]}
    assert set(stored_codecs(bp.data_dir, "as-gzip")) == {CODEC_IDS["gzip"]}
    assert set(stored_codecs(bp.data_dir, "as-none")) == {CODEC_IDS["none"]}
    # the stored form is smaller than uncompressed where the codec compresses
    size = {t: sum(f.stat().st_size for f in (bp.data_dir / f"{t}-0").glob("*.log")) for t in ("as-zstd", "as-none")}
    assert size["as-zstd"] < size["as-none"] / 3, size

    # our own consumer reads the recompressed batches too
    from logbroker import Consumer as OurConsumer

    with OurConsumer(bs, group_id="ours", auto_offset_reset="earliest") as c:
        c.subscribe(["as-zstd"])
        got: list[bytes] = []
        wait_until(lambda: got.extend(r.value for r in c.poll(1.0)) or len(got) >= len(values), 60, "our consumer")
    assert got == values


def test_altering_the_codec_applies_to_new_batches(lb):
    bp, admin = lb
    bs = bp.bootstrap_servers
    create(admin, "changes", {"compression.type": "snappy"})
    produce(bs, "changes", [b"a" * 100] * 50, "none")
    r = ConfigResource(
        "topic",
        "changes",
        incremental_configs=[
            ConfigEntry("compression.type", "zstd", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("compression.zstd.level", "19", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([r])[r].result(30)
    described = admin.describe_configs([ConfigResource("topic", "changes")])
    entries = next(iter(described.values())).result(30)
    assert entries["compression.type"].value == "zstd" and entries["compression.zstd.level"].value == "19"
    produce(bs, "changes", [b"b" * 100] * 50, "gzip")
    codecs = stored_codecs(bp.data_dir, "changes")
    first_zstd = codecs.index(CODEC_IDS["zstd"])
    assert set(codecs[:first_zstd]) == {CODEC_IDS["snappy"]} and set(codecs[first_zstd:]) == {CODEC_IDS["zstd"]}, codecs
    assert consume(bs, "changes", 100) == [b"a" * 100] * 50 + [b"b" * 100] * 50


def test_defaults_and_bad_values(lb):
    bp, admin = lb
    create(admin, "plain", {})
    entries = next(iter(admin.describe_configs([ConfigResource("topic", "plain")]).values())).result(30)
    assert entries["compression.type"].value == "producer" and entries["compression.type"].is_default
    assert entries["compression.gzip.level"].value == "-1"
    assert entries["compression.zstd.level"].value == "3"
    for key, bad in (
        ("compression.type", "brotli"),
        ("compression.gzip.level", "10"),
        ("compression.zstd.level", "23"),
        ("compression.lz4.level", "0"),
    ):
        fut = admin.create_topics([NewTopic("refused", 1, 1, config={key: bad})])["refused"]
        with pytest.raises(KafkaException) as e:
            fut.result(30)
        err = e.value.args[0]
        assert err.name() == "INVALID_CONFIG" and key in err.str() and bad in err.str(), err.str()
    md = admin.list_topics(timeout=10)
    assert "refused" not in md.topics
