"""A cluster given bad input, with real `logbroker serve` processes: a quorum that cannot be
reached yet (one voter of three started) answers with clear retriable errors and forms when
the others come; a node that reuses a voter's node.id is refused before it touches anything;
a node whose voter list disagrees with the cluster's is refused by every voter and changes
nothing. (A data directory of another cluster: test_cluster_quorum.py; a second broker-only
node with the same id: test_cluster_broker_only.py.)"""

from __future__ import annotations

import time

import pytest
from conftest import BrokerProcess, free_port, wait_until

from logbroker.client.connection import BrokerConnection
from logbroker.protocol import REQUESTS, ErrorCode

FAST = ["--set", "broker.session.timeout.ms=3000", "--set", "broker.heartbeat.interval.ms=300"]


def node(tmp_path, i: int, ports: dict[int, tuple[int, int]], voters: str, extra=()) -> BrokerProcess:
    p, c = ports[i]
    return BrokerProcess(
        tmp_path / f"node{i}",
        port=p,
        extra=[
            "--node-id",
            str(i),
            "--voters",
            voters,
            *FAST,
            *extra,
            "--listen",
            f"PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}",
        ],
    )


def create_topic(bp: BrokerProcess, name: str, timeout_ms: int = 3000):
    Req = REQUESTS[19]
    req = Req(
        topics=[Req.CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=timeout_ms,
        validate_only=False,
    )
    with BrokerConnection(bp.bootstrap_servers, timeout=30) as c:
        return c.send(req, version=5).topics[0]


def brokers(bp: BrokerProcess) -> list[int]:
    with BrokerConnection(bp.bootstrap_servers, timeout=5) as c:
        r = c.send(REQUESTS[3](topics=[], allow_auto_topic_creation=False), version=12)
    return sorted(b.node_id for b in r.brokers)


def topic_names(bp: BrokerProcess) -> set[str]:
    with BrokerConnection(bp.bootstrap_servers, timeout=5) as c:
        r = c.send(REQUESTS[3](topics=None, allow_auto_topic_creation=False), version=12)
    return {t.name for t in r.topics}


def test_an_unreachable_quorum_is_a_clear_retriable_error_and_the_cluster_forms_later(tmp_path):
    ports = {i: (free_port(), free_port()) for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{c}" for i, (_, c) in ports.items())
    nodes = [node(tmp_path, i, ports, voters) for i in (1, 2, 3)]
    try:
        first = nodes[0].start()
        # no quorum: the node is up, has no leader, and says so instead of hanging or crashing
        t0 = time.monotonic()
        t = create_topic(first, "early")
        assert time.monotonic() - t0 < 25
        assert t.error_code in (ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT), t
        assert t.error_message and "controller" in t.error_message.lower(), t.error_message
        # not registered (no quorum to register with): it names itself, never an empty list
        # (librdkafka would not ask again for a whole request timeout)
        assert brokers(first) == [1]
        time.sleep(1)
        assert first.proc.poll() is None, "the node exited without a quorum"
        text = first.log_text()
        assert "Traceback" not in text
        # the others arrive: a leader is elected, everyone registers, the same request works
        nodes[1].start()
        nodes[2].start()
        wait_until(lambda: all(brokers(bp) == [1, 2, 3] for bp in nodes), what="three registered brokers")
        assert wait_until(lambda: create_topic(first, "later").error_code == 0, what="CreateTopics through node 1")
        names = wait_until(lambda: "later" in (n := topic_names(nodes[2])) and n, what="topic later on node 3")
        assert "early" not in names
    finally:
        for bp in nodes:
            bp.reap()


def test_a_node_reusing_a_voters_id_or_disagreeing_on_the_voters_is_refused(tmp_path):
    ports = {i: (free_port(), free_port()) for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{c}" for i, (_, c) in ports.items())
    nodes = [node(tmp_path, i, ports, voters) for i in (1, 2, 3)]
    try:
        for bp in nodes:
            bp.start()
        wait_until(lambda: all(brokers(bp) == [1, 2, 3] for bp in nodes), what="three registered brokers")
        assert create_topic(nodes[0], "kept").error_code == 0

        # a fourth process configured as node 2 (copied config, its own ports): refused
        # before it writes anything
        pd, cd = free_port(), free_port()
        dup = BrokerProcess(
            tmp_path / "dup",
            port=pd,
            extra=[
                "--node-id",
                "2",
                "--voters",
                voters,
                *FAST,
                "--listen",
                f"PLAINTEXT://127.0.0.1:{pd},CONTROLLER://127.0.0.1:{cd}",
            ],
        )
        with pytest.raises(RuntimeError, match="broker did not start"):
            dup.start(timeout=20)
        text = dup.log_text()
        assert "bad configuration" in text and "differs from node 2's entry" in text, text[-2000:]
        assert not (tmp_path / "dup" / "__cluster_metadata-0").exists()

        # a node whose voter list names other controllers: another cluster id, so every
        # voter refuses it and logs why; the cluster goes on unchanged
        p4, c4 = free_port(), free_port()
        other_voters = f"4@127.0.0.1:{c4},{voters}"
        stray = BrokerProcess(
            tmp_path / "stray",
            port=p4,
            extra=[
                "--node-id",
                "4",
                "--voters",
                other_voters,
                *FAST,
                "--listen",
                f"PLAINTEXT://127.0.0.1:{p4},CONTROLLER://127.0.0.1:{c4}",
            ],
        ).start()
        try:
            wait_until(
                lambda: all("belongs to cluster" in bp.log_text() for bp in nodes),
                what="every voter refusing the stray node",
            )
            line = next(x for x in nodes[0].log_text().splitlines() if "belongs to cluster" in x)
            assert "controller 4" in line and "refused" in line
            assert create_topic(stray, "stray-topic", timeout_ms=2000).error_code != 0
            assert all(brokers(bp) == [1, 2, 3] for bp in nodes)
            assert create_topic(nodes[1], "still").error_code == 0
            names = wait_until(lambda: "still" in (n := topic_names(nodes[2])) and n, what="topic still on node 3")
            assert "kept" in names and "stray-topic" not in names
        finally:
            stray.reap()
    finally:
        for bp in nodes:
            bp.reap()
