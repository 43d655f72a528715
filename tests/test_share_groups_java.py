"""The Java client's KafkaShareConsumer (Kafka 4.4) against logbroker's share groups:
several consumers on one partition with each record accepted once, redelivery after a
consumer is killed holding records, archiving at the delivery limit, and Kafka's own
kafka-console-share-consumer. The consumer is tests/java/ShareWorker.java, run as a
single-file source program on the Kafka tools classpath."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import needs_java, wait_until
from rawclient import RawClient
from test_group_configs import alter as alter_group

from logbroker import Broker
from logbroker.protocol import REQUESTS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = needs_java

WORKER = str(Path(__file__).resolve().parent / "java" / "ShareWorker.java")
CONFIG = {
    "group.share.enable": "true",
    "group.share.auto.offset.reset": "earliest",
    "group.share.record.lock.duration.ms": "2000",
    "group.share.delivery.count.limit": "3",
}


@pytest.fixture(scope="module")
def kafka_tools():
    from benches.peers.kafka import install

    return install()


@pytest.fixture
def share_broker(tmp_path):
    with Broker(data_dir=tmp_path / "data", config=CONFIG) as b:
        yield b


def read_all(bs: str, topic: str, n: int, timeout: float = 30) -> list:
    """The first `n` records of partition 0 of `topic` (waits up to `timeout`)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"read-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append(m)
    finally:
        c.close()
    return out


def persisted(broker, group: str, topic: str) -> tuple[int, list] | None:
    """(start offset, state batches) of the group's share-partition of `topic`-0, as its
    share coordinator (this broker) holds it."""
    tid = broker.server.controller.image.topics[topic].topic_id
    s = broker.server.share_coordinator.states.get((group, tid, 0))
    return None if s is None else (s.start_offset, s.batches)


def setup_topic(bs: str, topic: str, n: int, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, str(i).encode(), partition=i % partitions)
    assert p.flush(10) == 0


class Worker:
    """One ShareWorker process; `lines` fills as it prints (partition, offset, value, delivery count)."""

    def __init__(
        self, tools, bs: str, group: str, topic: str, mode: str, idle_ms: int, process_ms: int = 0, timed: bool = False
    ) -> None:
        args = [bs, group, topic, mode, str(idle_ms), str(process_ms)] + (["timed"] if timed else [])
        cmd = tools.tools_java(WORKER, args, heap="-Xmx256m")
        self.stderr = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.records: list[tuple[int, int, str, int]] = []
        self.unparsed: list[str] = []  # stdout lines that are not a record (shown on failure)
        self.lines_with_times: list[str] = []  # a timed worker's record lines
        self.commits: list[str] = []  # a timed worker's "commit <ms> <offsets>" lines
        self.holding = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                if line.strip() == "holding":
                    self.holding.set()
                    continue
                if line.startswith("commit "):
                    self.commits.append(line)
                    continue
                try:
                    part, off, value, count, *received = line.split()
                    self.records.append((int(part), int(off), value, int(count)))
                    if received:
                        self.lines_with_times.append(line)
                except ValueError:
                    self.unparsed.append(line)
        except (OSError, ValueError) as e:  # the pipe closed under us: reported by wait()
            self.unparsed.append(f"<stdout: {e!r}>")

    def _close(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.reader.join(5)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self.stderr.seek(0)
        err = self.stderr.read()
        self.stderr.close()
        return err

    def wait(self, timeout: float = 120) -> list[tuple[int, int, str, int]]:
        try:
            rc = self.proc.wait(timeout)
        finally:
            err = self._close()
        assert rc == 0, err[-3000:]
        assert not self.unparsed, (
            f"worker printed lines that are not records: {self.unparsed[:5]}; stderr: {err[-2000:]}"
        )
        return self.records

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self._close()


def test_three_consumers_share_one_partition_and_accept_each_record_once(share_broker, kafka_tools):
    bs = share_broker.bootstrap_servers
    setup_topic(bs, "work", 300)
    workers = [Worker(kafka_tools, bs, "jq", "work", "accept", 6000, process_ms=10) for _ in range(3)]
    results = [w.wait() for w in workers]
    values = sorted(int(v) for r in results for _, _, v, _ in r)
    assert values == list(range(300)), f"{len(values)} records, {len(set(values))} distinct"
    assert sum(1 for r in results if r) >= 2, [len(r) for r in results]
    assert all(count == 1 for r in results for *_, count in r)
    wait_until(
        lambda: persisted(share_broker, "jq", "work") == (300, []),
        timeout=10,
        what="every record acknowledged, and written",
    )


def test_java_consumers_in_a_key_ordered_group_keep_each_key_in_order(share_broker, kafka_tools):
    """Kafka's KafkaShareConsumer, unchanged, in a group with share.delivery.order=key (issue
    48): three of them over one partition of 240 records on 8 keys; every record of a key is
    received only after the worker holding the key's previous record started acknowledging
    it, and every record is accepted once."""
    bs = share_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("keyed", 1, 1)])["keyed"].result(10)
    with RawClient(bs) as c:
        assert alter_group(c, "jk", {"share.delivery.order": "key"}).error_code == 0
    keys = {i: f"k{i % 8}" for i in range(240)}
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i in range(240):
        p.produce("keyed", str(i).encode(), key=keys[i].encode(), partition=0)
    assert p.flush(10) == 0
    workers = [Worker(kafka_tools, bs, "jk", "keyed", "accept", 4000, 2, timed=True) for _ in range(3)]
    received: dict[int, list[int]] = {}  # offset -> receive times (ms)
    commit_started: dict[int, int] = {}  # offset -> when its acknowledgement was sent (ms)
    per_worker = []
    for w in workers:
        w.wait()
        per_worker.append(len(w.records))
        for line in w.commits:
            _commit, at, offsets = line.split()
            for off in offsets.split(","):
                commit_started.setdefault(int(off), int(at))
    for w in workers:
        for _part, off, _value, _count in w.records:
            received.setdefault(off, [])
    # receive times come from the record lines' last field
    for w in workers:
        for line in w.lines_with_times:
            _part, off, _value, _count, at = line.split()
            received[int(off)].append(int(at))
    assert sorted(received) == list(range(240)), f"{len(received)} of 240 offsets received"
    assert all(len(times) == 1 for times in received.values()), "a record was delivered twice"
    violations = []
    for j in range(240):
        for i in range(j - 1, -1, -1):
            if keys[i] == keys[j]:
                if received[j][0] < commit_started[i]:
                    violations.append(
                        f"{j} ({keys[j]}) received at {received[j][0]}, {i} acknowledged at {commit_started[i]}"
                    )
                break
    assert not violations, violations[:10]
    assert sum(1 for n in per_worker if n) >= 2, f"one worker did all the work: {per_worker}"


def test_records_held_by_a_killed_consumer_are_redelivered(share_broker, kafka_tools):
    bs = share_broker.bootstrap_servers
    setup_topic(bs, "held", 40)
    holder = Worker(kafka_tools, bs, "jh", "held", "hold", 60000)
    assert holder.holding.wait(60), "the holder got records"
    held = {v for _, _, v, _ in holder.records}
    holder.kill()
    t0 = time.monotonic()
    rest = Worker(kafka_tools, bs, "jh", "held", "accept", 6000).wait()
    assert sorted(int(v) for _, _, v, _ in rest) == list(range(40)), "every record, the held ones included"
    again = {v: count for _, _, v, count in rest if v in held}
    assert again and set(again.values()) == {2}, "the held records come back as second deliveries"
    assert time.monotonic() - t0 < 60


def test_released_records_come_back_until_the_delivery_limit_then_go_to_the_dead_letter_topic(
    share_broker, kafka_tools
):
    bs = share_broker.bootstrap_servers
    setup_topic(bs, "poison", 5)
    admin = AdminClient({"bootstrap.servers": bs})
    dlq = NewTopic("dlq.poison", 1, 1, config={"errors.deadletterqueue.group.enable": "true"})
    admin.create_topics([dlq])["dlq.poison"].result(10)
    with RawClient(bs) as c:
        configs = {
            "errors.deadletterqueue.topic.name": "dlq.poison",
            "errors.deadletterqueue.copy.record.enable": "true",
        }
        assert alter_group(c, "jp", configs).error_code == 0
    seen = Worker(kafka_tools, bs, "jp", "poison", "release", 5000).wait()
    counts: dict[str, list[int]] = {}
    for _, _, v, count in seen:
        counts.setdefault(v, []).append(count)
    assert counts == {str(i): [1, 2, 3] for i in range(5)}, "delivered three times (the limit), then archived"
    wait_until(
        lambda: persisted(share_broker, "jp", "poison") == (5, []),
        timeout=10,
        what="the share-partition written with every record archived",
    )
    dead = read_all(bs, "dlq.poison", 5)
    assert [m.value() for m in dead] == [str(i).encode() for i in range(5)]
    for i, m in enumerate(dead):
        h = {k: v.decode() for k, v in m.headers()}
        assert h == {
            "__dlq.errors.topic": "poison",
            "__dlq.errors.partition": "0",
            "__dlq.errors.offset": str(i),
            "__dlq.errors.group": "jp",
            "__dlq.errors.delivery.count": "3",
            "__dlq.errors.message": "Offset delivery count exceeded the threshold.",
        }, h


def test_kafka_console_share_consumer(share_broker, kafka_tools):
    bs = share_broker.bootstrap_servers
    setup_topic(bs, "console", 20, partitions=2)
    cmd = kafka_tools.tools_java(
        "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
        [
            "--bootstrap-server",
            bs,
            "--topic",
            "console",
            "--group",
            "jc",
            "--max-messages",
            "20",
            "--timeout-ms",
            "30000",
        ],
    )
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(int(v) for v in r.stdout.split()) == list(range(20))


def test_console_share_consumer_on_three_nodes(tmp_path, kafka_tools):
    """The group coordinator on one node, the partitions' leaders spread over three."""
    from logbroker import Cluster

    with Cluster(3, data_dir=tmp_path, config={**CONFIG, "group.share.record.lock.duration.ms": "30000"}) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("spread", 3, 3)])["spread"].result(30)
        p = Producer({"bootstrap.servers": bs})
        for i in range(30):
            p.produce("spread", str(i).encode(), partition=i % 3)
        assert p.flush(10) == 0
        leaders = {m.leader for m in admin.list_topics("spread", timeout=10).topics["spread"].partitions.values()}
        cmd = kafka_tools.tools_java(
            "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
            [
                "--bootstrap-server",
                bs,
                "--topic",
                "spread",
                "--group",
                "jc3",
                "--max-messages",
                "30",
                "--timeout-ms",
                "30000",
            ],
        )
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        assert sorted(int(v) for v in r.stdout.split()) == list(range(30))
        assert len(leaders) >= 2, leaders


def test_kafka_share_groups_describes_resets_and_deletes_offsets(share_broker, kafka_tools):
    bs = share_broker.bootstrap_servers
    setup_topic(bs, "jobs", 20, partitions=2)

    def console() -> list[int]:
        cmd = kafka_tools.tools_java(
            "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
            [
                "--bootstrap-server",
                bs,
                "--topic",
                "jobs",
                "--group",
                "workers",
                "--max-messages",
                "20",
                "--timeout-ms",
                "30000",
            ],
        )
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        return sorted(int(v) for v in r.stdout.split())

    def tool(*args: str) -> list[list[str]]:
        cmd = kafka_tools.tools_java(
            "org.apache.kafka.tools.consumer.group.ShareGroupCommand", ["--bootstrap-server", bs, *args]
        )
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        return [line.split() for line in r.stdout.splitlines() if line.strip()]

    assert console() == list(range(20))
    assert ["workers"] in tool("--list")
    rows = tool("--describe", "--group", "workers", "--offsets")
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], rows
    assert rows[1:] == [["workers", "jobs", "0", "10", "0"], ["workers", "jobs", "1", "10", "0"]], rows
    # back to the start: the partitions' leader drops what it held and reads the reset state
    rows = tool("--reset-offsets", "--group", "workers", "--topic", "jobs", "--to-earliest", "--execute")
    assert [r[:4] for r in rows[1:]] == [["workers", "jobs", "0", "0"], ["workers", "jobs", "1", "0"]], rows
    assert console() == list(range(20)), "every record again after the reset"
    rows = tool("--delete-offsets", "--group", "workers", "--topic", "jobs")
    assert rows[1] == ["jobs", "Successful"], rows
    assert "no offset information" in " ".join(tool("--describe", "--group", "workers", "--offsets")[0])


def test_share_consumers_lose_nothing_when_the_partition_leader_is_killed(tmp_path, kafka_tools):
    """Two KafkaShareConsumers on a replicated partition; the partition's leader (and with it
    its share-partitions) is killed with SIGKILL midway. Every record is accepted; records
    acknowledged before the kill are never delivered again (their state was written to the
    share coordinator, replicated, before the acknowledgement was answered)."""
    from replication_helpers import FAST, full_isr, layout

    from logbroker import Cluster

    config = {
        **CONFIG,
        **FAST,
        "group.share.record.lock.duration.ms": "5000",
        "share.coordinator.state.topic.replication.factor": 3,
        "share.coordinator.state.topic.num.partitions": 3,
        "offsets.topic.replication.factor": 3,
        "min.insync.replicas": 2,
    }
    with Cluster(3, data_dir=tmp_path, config=config) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("fq", 1, 3)])["fq"].result(30)
        full_isr(cluster, "fq", 1)
        p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5})
        n = 600
        for i in range(n):
            p.produce("fq", str(i).encode(), partition=0)
        assert p.flush(30) == 0
        leader = layout(cluster.nodes[0])[("fq", 0)][0]
        workers = [Worker(kafka_tools, bs, "fg", "fq", "accept", 15000, process_ms=20) for _ in range(2)]
        deadline = time.monotonic() + 90
        while sum(len(w.records) for w in workers) < n // 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        before = {v for w in workers for _, _, v, _ in w.records}
        assert len(before) >= n // 3, "consumers made progress before the kill"
        cluster.node(leader).kill()
        results = [w.wait(180) for w in workers]
        accepted = [v for r in results for _, _, v, _ in r]
        assert set(int(v) for v in accepted) == set(range(n)), f"{len(set(accepted))} of {n} records"
        again = len(accepted) - len(set(accepted))
        # what a consumer held or had not yet had acknowledged at the kill may come again; the
        # consumers acknowledge each poll (max.poll.records=10) before the next, so few
        assert again <= 40, f"{again} records delivered twice"
        # the group's start offset, at its share coordinator: past every record
        Describe = REQUESTS[90]
        req = Describe(
            groups=[
                Describe.DescribeShareGroupOffsetsRequestGroup(
                    group_id="fg",
                    topics=[Describe.DescribeShareGroupOffsetsRequestTopic(topic_name="fq", partitions=[0])],
                )
            ]
        )
        answers = []
        for node in cluster.nodes:
            if node.node_id != leader:
                with RawClient(node.bootstrap_servers) as c:
                    answers.append(c.request(90, 0, req).groups[0])
        [g] = [a for a in answers if a.error_code == 0]
        assert g.topics[0].partitions[0].start_offset == n
