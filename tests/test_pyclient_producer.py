"""logbroker.Producer against our broker: every codec with keys and headers, partition
placement identical to the Java client's murmur2 (via librdkafka's murmur2_random), custom
partitioners, futures and callbacks, acks, idempotent retries through a proxy that drops a
response, timeouts and errors."""

from __future__ import annotations

import re
import socket
import threading

import confluent_kafka as ck
import pytest
from conftest import CODECS, Rec, check_partition_records, make_records
from pyclient_helpers import DroppingProxy, consume_all

import logbroker
from logbroker import _core
from logbroker.client import errors


def create(bootstrap: str, topic: str, partitions: int = 1, **config: str) -> None:
    with logbroker.Admin(bootstrap) as a:
        a.create_topics([logbroker.NewTopic(topic, partitions, config=config)])


def as_recs(records) -> dict[int, list]:
    got: dict[int, list] = {}
    for r in records:
        got.setdefault(r.partition, []).append((r.offset, Rec(r.partition, r.key, r.value, tuple(r.headers))))
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec_with_keys_and_headers(broker, codec):
    create(broker.bootstrap_servers, "rt", 3)
    recs = make_records(600, 3, tag=codec)
    with logbroker.Producer(broker.bootstrap_servers, compression_type=codec, linger_ms=2) as p:
        futs = [p.send("rt", r.value, key=r.key, partition=r.partition, headers=list(r.headers)) for r in recs]
        p.flush(30)
    assert all(f.done() for f in futs)
    got = consume_all(broker.bootstrap_servers, "rt", 3, len(recs))
    check_partition_records(recs, as_recs(got))


def test_keyed_placement_matches_the_java_partitioner(broker):
    """librdkafka's murmur2_random is documented to match the Java client's default."""
    create(broker.bootstrap_servers, "keyed", 7)
    keys = [f"key-{i}".encode() for i in range(300)] + [b"", b"a", b"\x00\xff", "é".encode()]
    ours = {}
    with logbroker.Producer(broker.bootstrap_servers) as p:
        for k in keys:
            ours[k] = p.send("keyed", b"v", key=k).result(10).partition
    theirs = {}
    cp = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "partitioner": "murmur2_random"})

    def on_delivery(err, msg):
        assert err is None
        theirs[msg.key()] = msg.partition()

    for k in keys:
        cp.produce("keyed", b"v", key=k, on_delivery=on_delivery)
    assert cp.flush(10) == 0
    assert ours == theirs
    assert all(_core.partition_for_key(k, 7) == ours[k] for k in keys)
    assert len(set(ours.values())) == 7


def test_murmur2_known_values():
    # Kafka's UtilsTest.testMurmur2
    assert _core.murmur2(b"21") == -973932308
    assert _core.murmur2(b"foobar") == -790332482
    assert _core.murmur2(b"a-little-bit-long-string") == -985981536


def test_unkeyed_records_stick_to_a_partition_per_batch(broker):
    create(broker.bootstrap_servers, "sticky", 4)
    with logbroker.Producer(broker.bootstrap_servers, batch_size=100_000, linger_ms=50) as p:
        futs = [p.send("sticky", b"x" * 10) for _ in range(50)]
        p.flush(10)
    assert len({f.result().partition for f in futs}) == 1


def test_custom_partitioner(broker):
    create(broker.bootstrap_servers, "custom", 5)
    seen = []

    def last(topic, key, n):
        seen.append((topic, key, n))
        return n - 1

    with logbroker.Producer(broker.bootstrap_servers, partitioner=last) as p:
        md = p.send("custom", b"v", key="k").result(10)
    assert md.partition == 4
    assert seen == [("custom", b"k", 5)]


def test_future_result_callbacks_and_metadata(broker):
    create(broker.bootstrap_servers, "fut")
    called = threading.Event()
    got = []
    with logbroker.Producer(broker.bootstrap_servers, linger_ms=20) as p:
        f = p.send("fut", b"one", timestamp=1_700_000_000_000)
        assert f.topic == "fut" and f.partition == 0
        f.add_done_callback(lambda fut: (got.append(fut.result()), called.set()))
        md = f.result(10)
        assert called.wait(5)
        assert md == got[0]
        assert (md.topic, md.partition, md.offset, md.timestamp) == ("fut", 0, 0, 1_700_000_000_000)
        assert f.done() and f.exception() is None
        late = []
        f.add_done_callback(late.append)  # already done: runs at once
        assert late == [f]
        assert "RecordFuture" in repr(f)
        second = p.send("fut", b"two", headers={"h": b"v"})
        assert second.result(10).offset == 1


def test_acks_zero_and_one(broker):
    create(broker.bootstrap_servers, "acks")
    with logbroker.Producer(broker.bootstrap_servers, acks=0, enable_idempotence=False) as p:
        assert p.send("acks", b"zero").result(10).offset == -1
    with logbroker.Producer(broker.bootstrap_servers, acks=1, enable_idempotence=False) as p:
        assert p.send("acks", b"one").result(10).offset >= 0
    # As Kafka's producer (KIP-679): idempotence not asked for gives way to acks=1.
    with logbroker.Producer(broker.bootstrap_servers, acks=1) as p:
        assert p.config["enable.idempotence"] is False
        assert p.send("acks", b"one again").result(10).offset >= 0
    assert len(consume_all(broker.bootstrap_servers, "acks", 1, 3)) == 3


def test_idempotent_retry_after_a_dropped_response_has_no_duplicates(broker):
    create(broker.bootstrap_servers, "idem", 2)
    proxy = DroppingProxy(broker.bootstrap_servers, drop_produce_response=2)
    try:
        with logbroker.Producer(
            proxy.bootstrap_servers, linger_ms=1, batch_size=2000, max_in_flight_requests_per_connection=5
        ) as p:
            futs = [p.send("idem", f"v{i}".encode(), key=f"k{i % 10}".encode()) for i in range(2000)]
            p.flush(30)
            metas = [f.result(0) for f in futs]
    finally:
        proxy.close()
    assert proxy.dropped == 1
    got = consume_all(broker.bootstrap_servers, "idem", 2, 2000)
    values = [r.value for r in got]
    assert len(values) == 2000 and len(set(values)) == 2000
    # Per key, the order of sending is kept.
    for k in range(10):
        key = f"k{k}".encode()
        sent = [f"v{i}".encode() for i in range(2000) if i % 10 == k]
        assert [r.value for r in sorted(got, key=lambda r: r.offset) if r.key == key] == sent
    assert {(m.partition, m.offset) for m in metas if m.offset >= 0} <= {(r.partition, r.offset) for r in got}


def test_metadata_timeout_names_the_topic_and_what_the_broker_said(broker):
    with logbroker.Producer(broker.bootstrap_servers, max_block_ms=300, allow_auto_create_topics=False) as p:
        with pytest.raises(logbroker.KafkaTimeoutError, match="'nope'") as e:
            p.send("nope", b"v")
    assert re.search(r"(\d+) metadata request\(s\) sent, \1 answered", str(e.value)), e.value
    assert "nope: UNKNOWN_TOPIC_OR_PARTITION" in str(e.value)


def test_metadata_timeout_names_the_request_a_silent_broker_left_unanswered():
    """A listener that accepts and never answers (a stalled broker): the timeout says no
    metadata request was answered, and why the last one failed."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        with logbroker.Producer(f"127.0.0.1:{port}", max_block_ms=1500, request_timeout_ms=400) as p:
            with pytest.raises(logbroker.KafkaTimeoutError, match="'t'") as e:
                p.send("t", b"v")
    assert re.search(r"[1-9]\d* metadata request\(s\) sent, 0 answered", str(e.value)), e.value
    assert "got no response within request.timeout.ms=400" in str(e.value), e.value


def test_delivery_timeout_when_the_broker_is_gone(tmp_path):
    b = logbroker.Broker(data_dir=tmp_path / "d").__enter__()
    create(b.bootstrap_servers, "gone")
    p = logbroker.Producer(b.bootstrap_servers, delivery_timeout_ms=1500, request_timeout_ms=500, linger_ms=0)
    p.send("gone", b"first").result(10)
    b.__exit__(None, None, None)
    f = p.send("gone", b"second")
    with pytest.raises(logbroker.KafkaTimeoutError, match="delivery.timeout.ms=1500"):
        f.result(15)
    with pytest.raises(logbroker.KafkaTimeoutError, match="did not complete within"):
        p.send("gone", b"third").result(0.01)
    p.close(0.1)


def test_record_too_large_and_bad_values(broker):
    create(broker.bootstrap_servers, "big")
    with logbroker.Producer(broker.bootstrap_servers, max_request_size=1000) as p:
        with pytest.raises(errors.MessageTooLargeError):
            p.send("big", b"x" * 5000)
        with pytest.raises(errors.SerializationError):
            p.send("big", 12345)  # type: ignore[arg-type]
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            p.send("big", b"v", partition=7).result(5)


def test_partitions_for_flush_close_and_context_manager(broker):
    create(broker.bootstrap_servers, "pf", 3)
    p = logbroker.Producer(broker.bootstrap_servers, linger_ms=10_000)
    assert p.partitions_for("pf") == [0, 1, 2]
    f = p.send("pf", b"waits for linger")
    p.flush(10)  # flush does not wait for linger.ms
    assert f.done()
    p.close()
    p.close()  # idempotent
    with pytest.raises(logbroker.KafkaError):
        p.send("pf", b"after close")
    with logbroker.Producer(broker.bootstrap_servers) as q:
        q.send("pf", b"v", partition=2)
    # __exit__ flushed it
    assert any(r.value == b"v" for r in consume_all(broker.bootstrap_servers, "pf", 3, 2))


def test_config_errors():
    with pytest.raises(errors.ConfigError, match="lingr.ms"):
        logbroker.Producer("127.0.0.1:1", lingr_ms=5)
    with pytest.raises(errors.ConfigError, match="acks"):
        logbroker.Producer("127.0.0.1:1", acks=2)
    with pytest.raises(errors.ConfigError, match="idempotence"):
        logbroker.Producer("127.0.0.1:1", acks=1, enable_idempotence=True)
    with pytest.raises(errors.ConfigError, match="compression"):
        logbroker.Producer("127.0.0.1:1", compression_type="brotli")
