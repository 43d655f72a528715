"""DescribeTopicPartitions (75): every field, pagination as Kafka's
DescribeTopicPartitionsRequestHandler (topics in name order, ResponsePartitionLimit, the
cursor naming the topic and partition to resume at), unknown and unauthorized topics, the
request errors; and `kafka-topics --describe`, which asks it first in Kafka 4.4's tools."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from conftest import needs_java
from rawclient import RawClient

from logbroker.protocol import REQUESTS, ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

Request = REQUESTS[75]
ApiVersions = REQUESTS[18]
ZERO = uuid.UUID(int=0)


def describe(c: RawClient, topics: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None):
    req = Request(
        topics=[Request.TopicRequest(name=n) for n in topics],
        response_partition_limit=limit,
        cursor=None if cursor is None else Request.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )
    return c.request(75, 0, req)


def page(r) -> list[tuple[str, int, list[int]]]:
    return [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in r.topics]


def cursor(r) -> tuple[str, int] | None:
    return None if r.next_cursor is None else (r.next_cursor.topic_name, r.next_cursor.partition_index)


def create(bs: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(n, p, 1) for n, p in topics.items()]).values():
        f.result(30)


def test_fields_and_api_versions(broker):
    create(broker.bootstrap_servers, {"one": 2})
    node = broker.server.node_id
    with RawClient(broker.bootstrap_servers) as c:
        versions = {
            k.api_key: (k.min_version, k.max_version)
            for k in c.request(18, 3, ApiVersions(client_software_name="t", client_software_version="1")).api_keys
        }
        assert versions[75] == (0, 0)
        r = describe(c, ["one"])
        assert r.next_cursor is None and r.throttle_time_ms == 0
        [t] = r.topics
        image_topic = broker.server.controller.image.topics["one"]
        assert (t.error_code, t.name, t.topic_id, t.is_internal) == (0, "one", image_topic.topic_id, False)
        assert t.topic_authorized_operations not in (0, -2147483648)  # no authorizer: everything
        for i, p in enumerate(t.partitions):
            assert (p.error_code, p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) == (
                0,
                i,
                node,
                [node],
                [node],
            )
            assert p.leader_epoch == image_topic.partitions[i].leader_epoch
            assert (p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) == ([], [], [])

        # unknown and illegal names: per topic, in name order with the others
        r = describe(c, ["zz-missing", "one", "bad/name"])
        assert page(r) == [
            ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION, []),
            ("one", 0, [0, 1]),
            ("zz-missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []),
        ]
        assert r.topics[2].topic_id == ZERO


def test_pagination(broker):
    create(broker.bootstrap_servers, {"pa": 3, "pb": 1, "pc": 4, "pd": 2})
    with RawClient(broker.bootstrap_servers) as c:
        # all topics, 2 partitions a page: a topic cut in the middle, then resumed at its partition
        pages, at = [], None
        while True:
            r = describe(c, [], limit=2, cursor=at)
            pages.append((page(r), cursor(r)))
            at = cursor(r)
            if at is None:
                break
        assert pages == [
            ([("pa", 0, [0, 1])], ("pa", 2)),
            ([("pa", 0, [2]), ("pb", 0, [0])], ("pc", 0)),  # the limit reached at pb's end: resume at pc
            ([("pc", 0, [0, 1])], ("pc", 2)),
            ([("pc", 0, [2, 3])], ("pd", 0)),
            ([("pd", 0, [0, 1])], None),
        ]

        # named topics: the same order whatever the request's, the unknown ones take no partitions
        r = describe(c, ["pd", "nope", "pb", "pa"], limit=3)
        assert (page(r), cursor(r)) == (
            [("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []), ("pa", 0, [0, 1, 2])],
            ("pb", 0),
        )
        r = describe(c, ["pd", "nope", "pb", "pa"], limit=3, cursor=("pb", 0))
        assert (page(r), cursor(r)) == ([("pb", 0, [0]), ("pd", 0, [0, 1])], None)
        # a cursor inside a topic, and past its end
        assert page(describe(c, ["pc"], cursor=("pc", 3))) == [("pc", 0, [3])]
        assert page(describe(c, ["pc", "pd"], cursor=("pc", 9))) == [("pc", 0, []), ("pd", 0, [0, 1])]
        # the limit is at least 1 and at most 2000
        r = describe(c, [], limit=0)
        assert (page(r), cursor(r)) == ([("pa", 0, [0])], ("pa", 1))
        assert cursor(describe(c, [], limit=100000)) is None

        # request errors: every topic named answered INVALID_REQUEST
        r = describe(c, ["pa", "pb"], cursor=("pc", 0))
        assert page(r) == [("pa", ErrorCode.INVALID_REQUEST, []), ("pb", ErrorCode.INVALID_REQUEST, [])]
        r = describe(c, ["pa"], cursor=("pa", -1))
        assert page(r) == [("pa", ErrorCode.INVALID_REQUEST, [])]


def test_unauthorized_topics(tmp_path):
    """As Metadata: all topics leaves out those the principal may not DESCRIBE; named ones
    are TOPIC_AUTHORIZATION_FAILED (zero id, after the others) whether they exist or not."""
    from confluent_kafka.admin import AclOperation, ResourceType
    from test_authorization import Session, acl, acl_broker, create_topics, grant

    with acl_broker(tmp_path) as b:
        create_topics(b.bootstrap_servers, "seen", "hidden", partitions=2)
        grant(b.bootstrap_servers, acl(ResourceType.TOPIC, "seen", AclOperation.DESCRIBE))
        alice = Session(b, "alice")
        try:

            def ask(names, **kw):
                return alice(
                    75,
                    0,
                    topics=[Request.TopicRequest(name=n) for n in names],
                    response_partition_limit=kw.get("limit", 2000),
                    cursor=None,
                )

            r = ask([])
            assert page(r) == [("seen", 0, [0, 1])]
            assert r.topics[0].topic_authorized_operations == 1 << 8  # DESCRIBE alone
            r = ask(["hidden", "seen", "missing"], limit=1)
            assert page(r) == [
                ("seen", 0, [0]),
                ("hidden", ErrorCode.TOPIC_AUTHORIZATION_FAILED, []),
                ("missing", ErrorCode.TOPIC_AUTHORIZATION_FAILED, []),
            ]
            assert cursor(r) == ("seen", 1)
            assert r.topics[1].topic_id == ZERO and r.topics[1].topic_authorized_operations == -2147483648
        finally:
            alice.close()


def _kafka_topics(tools, bs: str, *args: str) -> str:
    r = subprocess.run(
        tools.tools_java("org.apache.kafka.tools.TopicCommand", ["--bootstrap-server", bs, *args]),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout


@needs_java
def test_kafka_topics_describe(broker):
    from benches.peers.kafka import install

    tools = install()
    bs = broker.bootstrap_servers
    create(bs, {"kt": 3, "ku": 1})
    node = broker.server.node_id
    topic_id = broker.server.controller.image.topics["kt"].topic_id
    out = _kafka_topics(tools, bs, "--describe", "--topic", "kt")
    assert re.search(r"Topic: kt\s+TopicId: \S+\s+PartitionCount: 3\s+ReplicationFactor: 1", out), out
    rows = re.findall(r"Topic: kt\s+Partition: (\d+)\s+Leader: (\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]+)", out)
    assert rows == [(str(i), str(node), str(node), str(node)) for i in range(3)], out
    assert "Elr:" in out, "the tool printed what DescribeTopicPartitions alone has"
    import base64

    assert base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=") in out, out
    paged = _kafka_topics(tools, bs, "--describe", "--topic", "kt", "--partition-size-limit-per-response", "1")
    assert re.findall(r"Partition: (\d+)", paged) == ["0", "1", "2"], paged  # three pages, one cursor each
    everything = _kafka_topics(tools, bs, "--describe")
    assert "Topic: kt\t" in everything and "Topic: ku\t" in everything, everything


def test_cluster_offline_replicas(tmp_path):
    """Three nodes: every node answers the same replicas, ISR and leaders; a stopped broker
    (fenced once its session times out) is an offline replica, and leads nothing."""
    from conftest import wait_until
    from replication_helpers import FAST

    from logbroker import Cluster

    with Cluster(3, data_dir=tmp_path / "c", config=FAST) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("ct", 3, 3)])["ct"].result(60)

        def answer(i: int):
            with RawClient(cluster.node(i).bootstrap_servers) as c:
                r = describe(c, ["ct"], limit=2)
                rest = describe(c, ["ct"], cursor=cursor(r))
            assert cursor(r) == ("ct", 2) and cursor(rest) is None
            return [
                (p.partition_index, p.leader_id, sorted(p.replica_nodes), sorted(p.isr_nodes), p.offline_replicas)
                for t in (r.topics[0], rest.topics[0])
                for p in t.partitions
            ]

        wait_until(
            lambda: all(len(answer(i)) == 3 and all(len(isr) == 3 for _, _, _, isr, _ in answer(i)) for i in (1, 2, 3)),
            what="ct everywhere, ISR full",
        )
        assert answer(1) == answer(2) == answer(3)
        assert all(off == [] and reps == [1, 2, 3] for _, _, reps, _, off in answer(1))
        victim = 3 if cluster.controller_id() != 3 else 2
        cluster.node(victim).stop()
        alive = [i for i in (1, 2, 3) if i != victim]
        wait_until(
            lambda: all(
                off == [victim] and leader != victim and victim not in isr
                for _, leader, _, isr, off in answer(alive[0])
            ),
            timeout=60,
            what=f"broker {victim} offline",
        )
