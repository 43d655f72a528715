"""`logbroker mirror` between two brokers, run as a user would: keys, values, headers,
timestamps and partitions kept; aborted transactions left behind; resumed from its progress
group without duplicates; exactly-once through a target transaction; a source consumer
group's offsets translated so it resumes on the target at the same records."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logbroker import Broker


def mirror(src: str, dst: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "logbroker",
            "mirror",
            "--from",
            src,
            "--to",
            dst,
            "--once",
            "--idle-timeout",
            "2",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def read_all(bs: str, topic: str, partitions: int, isolation: str = "read_uncommitted") -> dict[int, list]:
    c = Consumer(
        {"bootstrap.servers": bs, "group.id": "reader", "isolation.level": isolation, "enable.auto.commit": False}
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    last = time.monotonic()
    while time.monotonic() - last < 2:
        m = c.poll(0.2)
        if m is not None and not m.error():
            out[m.partition()].append((m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1]))
            last = time.monotonic()
    c.close()
    return out


def strip(records: dict[int, list]) -> dict[int, list]:
    return {p: [r[1:] for r in rs] for p, rs in records.items()}


@pytest.fixture
def two(tmp_path):
    with Broker(data_dir=tmp_path / "src") as src, Broker(data_dir=tmp_path / "dst") as dst:
        yield src.bootstrap_servers, dst.bootstrap_servers


def test_mirror_copies_resumes_and_translates_group_offsets(two):
    src, dst = two
    admin = AdminClient({"bootstrap.servers": src})
    for name, n in (("m1", 3), ("m2", 1), ("skip", 1)):
        admin.create_topics([NewTopic(name, n, 1)])[name].result(10)
    p = Producer({"bootstrap.servers": src})
    for i in range(30):
        p.produce(
            "m1",
            key=b"k%d" % i,
            value=b"v%d" % i,
            partition=i % 3,
            headers=[("n", b"%d" % i)],
            timestamp=1_700_000_000_000 + i,
        )
        p.produce("skip", value=b"no")
    assert p.flush(10) == 0
    t = Producer({"bootstrap.servers": src, "transactional.id": "mt"})
    t.init_transactions(10)
    t.begin_transaction()
    t.produce("m2", value=b"committed-1")
    t.commit_transaction(10)
    t.begin_transaction()
    t.produce("m2", value=b"aborted")
    t.flush(10)
    t.abort_transaction(10)
    t.begin_transaction()
    t.produce("m2", value=b"committed-2")
    t.commit_transaction(10)
    # a source consumer group that read part of m1 and m2
    app = Consumer({"bootstrap.servers": src, "group.id": "app", "enable.auto.commit": False})
    app.commit(
        offsets=[TopicPartition("m1", 0, 4), TopicPartition("m1", 1, 10), TopicPartition("m2", 0, 4)],
        asynchronous=False,
    )
    app.close()

    r = mirror(src, dst, "--topics", "m.*", "--sync-group-offsets", "app")
    assert r.returncode == 0, r.stderr
    dadmin = AdminClient({"bootstrap.servers": dst})
    md = dadmin.list_topics(timeout=10)
    assert len(md.topics["m1"].partitions) == 3 and len(md.topics["m2"].partitions) == 1 and "skip" not in md.topics
    source_m1 = read_all(src, "m1", 3)
    assert strip(read_all(dst, "m1", 3)) == strip(source_m1)
    assert [v for _, _, v, _, _ in read_all(dst, "m2", 1)[0]] == [b"committed-1", b"committed-2"]

    # the progress group on the target holds the source's end offsets
    g = Consumer({"bootstrap.servers": dst, "group.id": "logbroker-mirror"})
    ends = g.committed([TopicPartition("m1", i) for i in range(3)] + [TopicPartition("m2", 0)], timeout=10)
    g.close()
    assert [x.offset for x in ends] == [10, 10, 10, 5]  # m2: after committed-2 (offset 4; its marker is 5)

    # app's offsets translated: m1 keeps its offsets; m2's source offset 4 (after the aborted
    # record and its marker) is the target offset of committed-2
    g = Consumer({"bootstrap.servers": dst, "group.id": "app"})
    got = g.committed([TopicPartition("m1", 0), TopicPartition("m1", 1), TopicPartition("m2", 0)], timeout=10)
    g.close()
    assert [x.offset for x in got] == [4, 10, 1]

    # the offset syncs are persisted on the target: a later run translates offsets inside
    # what an earlier run copied (m2's source offset 0 -> target 0, m1-0's 7 -> 7)
    app = Consumer({"bootstrap.servers": src, "group.id": "app", "enable.auto.commit": False})
    app.commit(offsets=[TopicPartition("m1", 0, 7), TopicPartition("m2", 0, 0)], asynchronous=False)
    app.close()
    r = mirror(src, dst, "--topics", "m.*", "--sync-group-offsets", "app")
    assert r.returncode == 0 and "copied 0 record(s)" in r.stderr, r.stderr
    g = Consumer({"bootstrap.servers": dst, "group.id": "app"})
    got = g.committed([TopicPartition("m1", 0), TopicPartition("m1", 1), TopicPartition("m2", 0)], timeout=10)
    g.close()
    assert [x.offset for x in got] == [7, 10, 0]
    assert "logbroker-mirror.offset-syncs.internal" in dadmin.list_topics(timeout=10).topics

    # more records: a second run copies only those
    for i in range(30, 36):
        p.produce("m1", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3, timestamp=1_700_000_000_000 + i)
    assert p.flush(10) == 0
    r = mirror(src, dst, "--topics", "m.*")
    assert r.returncode == 0 and "copied 6 record(s)" in r.stderr, r.stderr
    assert strip(read_all(dst, "m1", 3)) == strip(read_all(src, "m1", 3))


def test_mirror_exactly_once_and_bad_input(two):
    src, dst = two
    admin = AdminClient({"bootstrap.servers": src})
    admin.create_topics([NewTopic("e1", 2, 1)])["e1"].result(10)
    p = Producer({"bootstrap.servers": src})
    for i in range(200):
        p.produce("e1", value=b"%d" % i, partition=i % 2)
    assert p.flush(10) == 0
    r = mirror(src, dst, "--topics", "e1", "--exactly-once", "--group", "eos")
    assert r.returncode == 0, r.stderr
    committed = read_all(dst, "e1", 2, "read_committed")
    assert sorted(int(v) for rs in committed.values() for _, _, v, _, _ in rs) == list(range(200))
    g = Consumer({"bootstrap.servers": dst, "group.id": "eos"})
    assert [x.offset for x in g.committed([TopicPartition("e1", 0), TopicPartition("e1", 1)], timeout=10)] == [100, 100]
    g.close()

    assert mirror(src, dst, "--topics", "(").returncode == 2
    r = mirror(src, dst, "--topics", "nothing-matches")
    assert r.returncode == 1 and "no source topic matches" in r.stderr
    # a target topic with fewer partitions cannot keep partition numbers
    dadmin = AdminClient({"bootstrap.servers": dst})
    dadmin.create_topics([NewTopic("narrow", 1, 1)])["narrow"].result(10)
    admin.create_topics([NewTopic("narrow", 2, 1)])["narrow"].result(10)
    r = mirror(src, dst, "--topics", "narrow")
    assert r.returncode == 1 and "partition" in r.stderr, r.stderr


def test_offset_map_translates_across_gaps():
    from logbroker.cli.mirror import OffsetMap

    m = OffsetMap()
    assert m.translate(0) is None
    for s, t in ((0, 0), (1, 1), (2, 2), (5, 3), (6, 4), (9, 5)):  # gaps: markers, aborted records
        m.add(s, t)
    assert m.runs == [(0, 2, 0), (5, 6, 3), (9, 9, 5)]
    assert [m.translate(o) for o in range(12)] == [0, 1, 2, 3, 3, 3, 4, 5, 5, 5, 6, None]
    # Loading the persisted runs (in any order, a later sync of a run replacing an earlier
    # one) gives the same map.
    loaded = OffsetMap()
    for run in ((9, 9, 5), (0, 1, 0), (5, 6, 3), (0, 2, 0)):
        loaded.load(*run)
    assert loaded.runs == m.runs and loaded.target_end == m.target_end
    assert [loaded.translate(o) for o in range(12)] == [m.translate(o) for o in range(12)]
