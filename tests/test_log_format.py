"""`logbroker serve --log-format json`: every line on stderr is one JSON object with the time,
level, logger, node and message, and the topic, partition, offset, peer, group, transactional
id and producer id as fields where the event names them: from the Python control plane (log
calls pass them as `extra`) and from the Rust engine's lines (parsed: `parse_fields`)."""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer
from conftest import wait_until
from rawclient import RawClient
from replication_helpers import FAST, assign, full_isr, layout, produce_all

from logbroker import Cluster, _core
from logbroker.cluster import free_port
from logbroker.log_format import DATAPATH_LINES, FETCHER_LINES, JsonFormatter, parse_fields
from logbroker.protocol import REQUESTS, ErrorCode

TOPIC = "orders.v1-x"  # '.' and '-' in the name: its partition is what follows the last '-'


def test_json_formatter_fields():
    f = JsonFormatter(node_id=7)
    rec = logging.LogRecord("logbroker.x", logging.INFO, __file__, 1, "moved %s-%d", ("t", 3), None)
    rec.topic, rec.partition = "t", 3
    doc = json.loads(f.format(rec))
    assert doc["node"] == 7 and doc["level"] == "INFO" and doc["logger"] == "logbroker.x"
    assert doc["message"] == "moved t-3" and (doc["topic"], doc["partition"]) == ("t", 3)
    assert doc["ts"].endswith("Z") and "peer" not in doc
    try:
        raise ValueError("boom")
    except ValueError:
        rec = logging.LogRecord("l", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    assert "ValueError: boom" in json.loads(f.format(rec))["exception"]


def test_serve_writes_json_lines(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "logbroker",
            "serve",
            "--data-dir",
            str(tmp_path / "d"),
            "--listen",
            f"127.0.0.1:{port}",
            "--log-format",
            "json",
            "--node-id",
            "4",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert "logbroker ready" in proc.stdout.readline()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # a frame of garbage
            s.sendall(b"\x00\x00\x00\x08garbage!")
            s.settimeout(5)
            assert s.recv(10) == b""  # closed by the broker
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    lines = [line for line in err.splitlines() if line.strip()]
    docs = [json.loads(line) for line in lines]  # every line is JSON
    assert docs and all({"ts", "level", "logger", "node", "message"} <= d.keys() for d in docs)
    assert all(d["node"] == 4 for d in docs)
    closed = [d for d in docs if d["level"] == "WARNING" and "peer" in d]
    assert closed and closed[0]["peer"].startswith("127.0.0.1:"), docs


def test_rust_lines_parsed_into_fields():
    """The replica fetchers' and the network thread's lines (rust/src/server/replica_fetcher.rs,
    produce.rs, fetch.rs) reach Python as text; the known shapes give their fields back."""
    assert parse_fields(
        f"{TOPIC}-12: leader 2 answered error 6 at fetch offset 120 (leader epoch 3); backing off", FETCHER_LINES
    ) == {"topic": TOPIC, "partition": 12, "peer": 2, "offset": 120}
    assert parse_fields(
        "7-0: fetch offset 5 is below leader 3's log start 9; restarting the log there", FETCHER_LINES
    ) == {"topic": "7", "partition": 0, "peer": 3, "offset": 5}
    assert parse_fields("a-1: truncating to 5 failed: disk full", FETCHER_LINES) == {"topic": "a", "partition": 1}
    assert parse_fields(
        "fetching 4 partition(s) from broker 2 at 127.0.0.1:9092 failed: EOF; retrying every 100 ms", FETCHER_LINES
    ) == {"peer": 2}
    assert parse_fields(
        f"produce to {TOPIC}-3 from [::1]:5123 rejected (CORRUPT_MESSAGE): bad CRC", DATAPATH_LINES
    ) == {"topic": TOPIC, "partition": 3, "peer": "[::1]:5123"}
    assert parse_fields(
        f"fetch from 10.0.0.5:5123: fetch offset 9 of {TOPIC}-0 is outside [log start 0, LEO 3]", DATAPATH_LINES
    ) == {"peer": "10.0.0.5:5123", "offset": 9, "topic": TOPIC, "partition": 0}
    assert parse_fields("network loop poll failed: EINTR", DATAPATH_LINES) == {}


def brokers(node) -> list[int]:
    with RawClient(node.bootstrap_servers) as c:
        return [b.node_id for b in c.request(3, 12, REQUESTS[3](topics=None, allow_auto_topic_creation=False)).brokers]


def json_docs(text: str) -> list[dict]:

    docs = [json.loads(line) for line in text.splitlines() if line.strip()]  # every line is JSON
    assert docs and all({"ts", "level", "logger", "node", "message"} <= d.keys() for d in docs)
    return docs


def one(docs: list[dict], text: str, **wanted) -> dict:
    """The first record whose message holds `text`; its fields must be `wanted`."""
    found = [d for d in docs if text in d["message"]]
    assert found, f"no record with {text!r} in {[d['message'] for d in docs]}"
    assert {k: found[0].get(k) for k in wanted} == wanted, found[0]
    return found[0]


def test_broker_events_carry_topic_partition_offset_peer_group_and_transaction(tmp_path):
    """One `logbroker serve --log-format json`: a topic created, a corrupt batch and a fetch
    out of range (lines of the network thread), a consumer group's rebalance and a
    transaction aborted at its timeout each log their fields."""
    port, log_path = free_port(), tmp_path / "serve.log"
    with open(log_path, "wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "logbroker",
                "serve",
                "--data-dir",
                str(tmp_path / "d"),
                "--node-id",
                "1",
                "--listen",
                f"127.0.0.1:{port}",
                "--log-format",
                "json",
                "--set",
                "offsets.topic.num.partitions=1",
                "--set",
                "transaction.state.log.num.partitions=1",
                "--set",
                "transaction.abort.timed.out.transaction.cleanup.interval.ms=100",
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    bootstrap = f"127.0.0.1:{port}"
    try:
        assert proc.stdout is not None and "logbroker ready" in proc.stdout.readline()
        with RawClient(bootstrap) as c:
            C = REQUESTS[19]
            assert (
                c.request(
                    19,
                    5,
                    C(
                        topics=[
                            C.CreatableTopic(
                                name=TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[]
                            )
                        ],
                        timeout_ms=10000,
                        validate_only=False,
                    ),
                )
                .topics[0]
                .error_code
                == 0
            )
            client = "{}:{:d}".format(*c.sock.getsockname()[:2])
            P = REQUESTS[0]
            bad = bytearray(_core.encode_batch([(b"k", b"v", 0, [])], base_timestamp=1))
            bad[-1] ^= 0xFF  # covered by the CRC
            r = c.request(
                0,
                9,
                P(
                    transactional_id=None,
                    acks=1,
                    timeout_ms=5000,
                    topic_data=[
                        P.TopicProduceData(
                            name=TOPIC, partition_data=[P.PartitionProduceData(index=0, records=bytes(bad))]
                        )
                    ],
                ),
            )
            assert r.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
            F = REQUESTS[1]
            r = c.request(
                1,
                11,
                F(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=1,
                    max_bytes=1 << 20,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    forgotten_topics_data=[],
                    rack_id="",
                    topics=[
                        F.FetchTopic(
                            topic=TOPIC,
                            partitions=[F.FetchPartition(partition=0, fetch_offset=1000, partition_max_bytes=1 << 20)],
                        )
                    ],
                ),
            )
            assert r.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "billing.v2", "session.timeout.ms": 6000})
        try:
            consumer.subscribe([TOPIC])
            wait_until(lambda: (consumer.poll(0.2), consumer.assignment())[1], timeout=30, what="an assignment")
        finally:
            consumer.close()

        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": "tx.1",
                "transaction.timeout.ms": 1000,
                "message.timeout.ms": 1000,
            }
        )
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(TOPIC, b"open")
        producer.flush(30)
        time.sleep(2)  # over transaction.timeout.ms: the coordinator aborts it
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    docs = json_docs(log_path.read_text())
    assert all(d["node"] == 1 for d in docs)
    one(docs, f"created topic {TOPIC} ", topic=TOPIC)
    one(docs, f"produce to {TOPIC}-0 from {client} rejected (CORRUPT_MESSAGE)", topic=TOPIC, partition=0, peer=client)
    one(
        docs,
        f"fetch from {client}: fetch offset 1000 of {TOPIC}-0 is outside",
        topic=TOPIC,
        partition=0,
        offset=1000,
        peer=client,
    )
    one(docs, "group billing.v2: preparing to rebalance", group="billing.v2")
    one(docs, "group billing.v2: generation 1 with 1 member(s)", group="billing.v2")
    pid = one(docs, "transactional id 'tx.1': producer id", transactional_id="tx.1")["producer_id"]
    assert isinstance(pid, int) and pid >= 0
    one(docs, "transactional id 'tx.1': aborting the transaction of producer", transactional_id="tx.1", producer_id=pid)


def test_cluster_events_carry_topic_partition_and_peer(tmp_path):
    """Three nodes logging JSON, a partition led by L and followed by F, neither the active
    controller: F dies (L shrinks the ISR, the controller commits it and fences F) and comes
    back (it follows L again, L expands the ISR), then L dies (F's fetcher, in Rust, fails on
    it; the controller fences L): each of these lines names the partition and the other node
    as fields."""

    # the ISR shrinks (replica.lag.time.max.ms) before the controller fences the dead broker
    with Cluster(3, data_dir=tmp_path, config={**FAST, "replica.lag.time.max.ms": 1000}, log_format="json") as cluster:
        with RawClient(cluster.node(1).bootstrap_servers) as c:
            controller = c.request(60, 0, REQUESTS[60]()).controller_id
        leader, follower = [n for n in (1, 2, 3) if n != controller]
        assign(cluster.node(controller), TOPIC, [leader, follower])
        full_isr(cluster, TOPIC, 1)
        produce_all(cluster.bootstrap_servers, TOPIC, 20)
        cluster.node(follower).kill()
        wait_until(
            lambda: (
                follower not in brokers(cluster.node(controller))
                and layout(cluster.node(controller))[(TOPIC, 0)][3] == [leader]
            ),
            timeout=30,
            what="the follower fenced and out of the ISR",
        )
        produce_all(cluster.bootstrap_servers, TOPIC, 20)  # what the follower lacks when it is back
        cluster.node(follower).start()
        full_isr(cluster, TOPIC, 1)
        cluster.node(leader).kill()
        wait_until(
            lambda: layout(cluster.node(controller))[(TOPIC, 0)][0] == follower, timeout=30, what="the follower leads"
        )
    logs = {n.node_id: json_docs(n.log_text()) for n in cluster.nodes}
    assert all(d["node"] == i for i, docs in logs.items() for d in docs)
    # "orders.v1-x-0: asking the controller to change ISR [L, F] -> [L] (leader epoch 0, ...", then back
    asks = [d for d in logs[leader] if d["message"].startswith(f"{TOPIC}-0: asking the controller to change ISR ")]
    assert len(asks) >= 2 and all((d["topic"], d["partition"]) == (TOPIC, 0) for d in asks), asks
    one(logs[controller], f"-> [{leader}] (requested by leader {leader},", topic=TOPIC, partition=0, peer=leader)
    one(logs[controller], f"fenced broker(s) [{follower}] (no heartbeat", peer=follower)
    one(logs[controller], f"fenced broker(s) [{leader}] (no heartbeat", peer=leader)
    following = [
        d for d in logs[follower] if d["message"].startswith(f"following 1 partition(s) from broker {leader} ")
    ]
    assert len(following) == 2 and all(d["peer"] == leader for d in following), following  # before and after
    one(logs[follower], f"fetching 1 partition(s) from broker {leader} at", peer=leader)  # a Rust line, parsed
