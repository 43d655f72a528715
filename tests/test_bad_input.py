"""Bad input gets the protocol's error or a closed connection, never a crash and never
a change to stored data."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
from rawclient import RawClient, request_header

from logbroker.protocol import REQUESTS, ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
from batches import build_batch  # noqa: E402

Produce = REQUESTS[0]
Metadata = REQUESTS[3]
ApiVersions = REQUESTS[18]
CreateTopics = REQUESTS[19]


def produce_request(topic: str, partition: int, records: bytes, acks: int = 1):
    return Produce(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            Produce.TopicProduceData(
                name=topic, partition_data=[Produce.PartitionProduceData(index=partition, records=records)]
            )
        ],
    )


def create_topic(client: RawClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> int:
    topic_configs = [CreateTopics.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()]
    req = CreateTopics(
        topics=[
            CreateTopics.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=topic_configs
            )
        ],
        timeout_ms=5000,
        validate_only=False,
    )
    return client.request(19, 5, req).topics[0].error_code


def leo(broker, topic: str, partition: int = 0) -> int:
    return broker.server.replicas.get(topic, partition).log.log_end_offset


def assert_alive(broker) -> None:
    with RawClient(broker.bootstrap_servers) as c:
        resp = c.request(18, 3, ApiVersions(client_software_name="t", client_software_version="1"))
        assert resp.error_code == 0


def test_wrong_crc_is_corrupt_message_and_nothing_appended(broker):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, "crc") == 0
        good = build_batch([b"a", b"b"])
        resp = c.request(0, 9, produce_request("crc", 0, good))
        assert resp.responses[0].partition_responses[0].error_code == 0
        before = leo(broker, "crc")
        bad = bytearray(build_batch([b"c", b"d"]))
        bad[-1] ^= 0xFF  # flip a byte covered by the CRC
        resp = c.request(0, 9, produce_request("crc", 0, bytes(bad)))
        pr = resp.responses[0].partition_responses[0]
        assert pr.error_code == ErrorCode.CORRUPT_MESSAGE
        assert "crc" in (pr.error_message or "").lower()
        assert leo(broker, "crc") == before
        # a good batch followed by a bad one in one request: all-or-nothing
        resp = c.request(0, 9, produce_request("crc", 0, good + bytes(bad)))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
        assert leo(broker, "crc") == before


def test_batch_above_message_max_bytes(tmp_path):
    from logbroker import Broker

    with Broker(data_dir=tmp_path / "d", message_max_bytes=2000) as broker:
        with RawClient(broker.bootstrap_servers) as c:
            assert create_topic(c, "big") == 0
            resp = c.request(0, 3, produce_request("big", 0, build_batch([b"z" * 5000])))
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE
            assert leo(broker, "big") == 0


def test_unknown_topic_and_partition(broker):
    with RawClient(broker.bootstrap_servers) as c:
        resp = c.request(0, 7, produce_request("nope", 0, build_batch([b"x"])))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert create_topic(c, "two", 2) == 0
        resp = c.request(0, 7, produce_request("two", 7, build_batch([b"x"])))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("name", ["", "bad name", "a/b", "x" * 250, ".."])
def test_invalid_topic_names(broker, name):
    with RawClient(broker.bootstrap_servers) as c:
        assert create_topic(c, name) == ErrorCode.INVALID_TOPIC_EXCEPTION
        md = c.request(3, 1, Metadata(topics=[Metadata.MetadataRequestTopic(name=name)]))
        assert md.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert not any(p.name.startswith(name) for p in broker.data_dir.iterdir() if name)


def test_api_versions_unknown_version_gets_kip511_reply(broker):
    with RawClient(broker.bootstrap_servers) as c:
        c.send_frame(request_header(18, 99, 7) + b"\x00\x00")
        frame = c.recv_frame()
        cid, code = struct.unpack_from(">ih", frame, 0)
        assert cid == 7 and code == ErrorCode.UNSUPPORTED_VERSION
        # then the client retries at a version we serve
        assert c.request(18, 3, ApiVersions(client_software_name="t", client_software_version="1")).error_code == 0


def test_unsupported_version_closes_connection(broker):
    with RawClient(broker.bootstrap_servers) as c:
        c.send_frame(request_header(0, 2, 1) + b"\x00" * 20)  # Produce v2 was removed in Kafka 4
        assert c.is_closed()
    assert_alive(broker)


def test_unknown_api_key_closes_connection(broker):
    with RawClient(broker.bootstrap_servers) as c:
        c.send_frame(request_header(999, 0, 1))
        assert c.is_closed()
    assert_alive(broker)


@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x00\x03\x00", b"\x00\x00\x00\x09\x00\x00\x00\x01\x00\x05ab"])
def test_malformed_and_truncated_frames(broker, payload):
    with RawClient(broker.bootstrap_servers) as c:
        c.send_frame(payload)
        assert c.is_closed()
    assert_alive(broker)


def test_body_that_does_not_decode(broker):
    with RawClient(broker.bootstrap_servers) as c:
        # Metadata v1 claiming 1000 topics but carrying none
        c.send_frame(request_header(3, 1, 1) + struct.pack(">i", 1000))
        assert c.is_closed()
    assert_alive(broker)


def test_frame_above_socket_request_max_bytes(tmp_path):
    from logbroker import Broker

    with Broker(data_dir=tmp_path / "d", socket_request_max_bytes=4096) as broker:
        with RawClient(broker.bootstrap_servers) as c:
            c.sock.sendall(struct.pack(">i", 10_000_000) + b"\x00" * 100)
            assert c.is_closed()
        with RawClient(broker.bootstrap_servers) as c:
            c.sock.sendall(struct.pack(">i", -5))
            assert c.is_closed()
        assert_alive(broker)


def test_client_disconnects_mid_frame(broker):
    with RawClient(broker.bootstrap_servers) as c:
        c.sock.sendall(struct.pack(">i", 1000) + b"\x00" * 10)
    assert_alive(broker)
