"""Several log directories (`log.dirs`, JBOD): placement, restart, DescribeLogDirs per
directory, AlterReplicaLogDirs moving a replica while producers write to it, the crash
states of a move, and the layouts the broker refuses (broker/log_dirs.py,
broker/replica_mover.py, handlers/alter_replica_log_dirs.py)."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, NewTopic

from logbroker import Broker
from logbroker.broker.log_dirs import LogDirs
from logbroker.client import Admin
from logbroker.client.errors import KafkaError


def create(bs: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def dirs_of(root: Path, n: int = 2) -> list[Path]:
    return [root / f"dir{i}" for i in range(n)]


def start(ds: list[Path], **settings) -> Broker:
    return Broker(config={"log.dirs": ",".join(map(str, ds)), **{k.replace("_", "."): v for k, v in settings.items()}})


def read_all(bs: str, topic: str, partition: int, expected: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "r", "enable.auto.commit": False})
    c.assign([CTP(topic, partition, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(out) < expected and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            assert not m.error(), m.error()
            out.append(m.value())
    c.close()
    return out


def wait_moved(admin: Admin, node: int, tp: tuple[str, int], dest: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        where = admin.describe_replica_log_dirs(node)
        if where.get(tp) == (str(dest), None):
            return
        time.sleep(0.1)
    raise AssertionError(f"{tp} not moved to {dest}: {admin.describe_replica_log_dirs(node)}")


def test_placement_matches_a_model_of_counts(tmp_path):
    """LogDirs keeps per-directory counts as replicas are placed, moved and forgotten (so
    placing costs O(directories)); checked against counting every replica afresh, and the
    choice against the model's: the fewest replicas, the first listed on ties."""
    import random

    rng = random.Random(44)
    ds = dirs_of(tmp_path, 3)
    dirs = LogDirs(ds)
    dirs.scan()
    model: dict[tuple[str, int], Path] = {}
    for step in range(3000):
        key = ("t", rng.randrange(200))
        op = rng.random()
        if op < 0.5:
            fewest = min(dirs.dirs, key=lambda d: sum(1 for x in model.values() if x == d))
            expected = model.get(key, fewest)
            assert dirs.place(key) == expected, step
            model[key] = expected
        elif op < 0.7 and key in model:
            dest = rng.choice(dirs.dirs)
            dirs.moved(key, dest)
            model[key] = dest
        else:
            dirs.forget(key)
            model.pop(key, None)
        assert dict(dirs.where) == model
        for d in dirs.dirs:
            assert dirs.replica_count(d) == sum(1 for x in model.values() if x == d), (step, d)


def test_replicas_spread_over_log_dirs_and_stay_there_across_restarts(tmp_path):
    ds = dirs_of(tmp_path)
    with start(ds) as b:
        create(b.bootstrap_servers, "t", 6)
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(6):
            for j in range(50):
                p.produce("t", f"{i}-{j}".encode(), partition=i)
        assert p.flush(10) == 0
        with Admin(b.bootstrap_servers) as admin:
            where = admin.describe_replica_log_dirs(b.server.node_id)
    placed = {d: sorted(i for (t, i), (ld, _f) in where.items() if t == "t" and ld == str(d)) for d in ds}
    assert [len(v) for v in placed.values()] == [3, 3], placed  # the fewest replicas first
    for d, parts in placed.items():
        assert sorted(e.name for e in d.iterdir() if e.name.startswith("t-")) == [f"t-{i}" for i in parts]
        assert (d / "meta.properties").exists() and "directory.id=" in (d / "meta.properties").read_text()
        assert (d / "replication-offset-checkpoint").exists()
    ids = {(d / "meta.properties").read_text().split("directory.id=")[1].split()[0] for d in ds}
    assert len(ids) == 2  # each directory its own id
    with start(ds) as b:
        with Admin(b.bootstrap_servers) as admin:
            assert admin.describe_replica_log_dirs(b.server.node_id) == where
        for i in range(6):
            assert read_all(b.bootstrap_servers, "t", i, 50) == [f"{i}-{j}".encode() for j in range(50)]


def test_move_a_replica_while_a_producer_writes_to_it(tmp_path):
    ds = dirs_of(tmp_path)
    with start(ds, log_segment_bytes=256 * 1024) as b:
        bs = b.bootstrap_servers
        create(bs, "m", 1)
        node = b.server.node_id
        acked: list[bytes] = []
        stop = threading.Event()

        def produce() -> None:
            p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5})
            i = 0
            while not stop.is_set():
                v = f"v{i:07d}".encode() + b"x" * 200
                p.produce("m", v, partition=0, on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
                i += 1
                if i % 500 == 0:
                    p.poll(0)
                    time.sleep(0.01)
            assert p.flush(30) == 0

        t = threading.Thread(target=produce)
        t.start()
        try:
            while len(acked) < 20000:
                time.sleep(0.1)
            with Admin(bs) as admin:
                src = Path(admin.describe_replica_log_dirs(node)[("m", 0)][0])
                dest = next(d for d in ds if d != src)
                admin.alter_replica_log_dirs(node, {("m", 0): str(dest)})
                wait_moved(admin, node, ("m", 0), dest)
                size_moved = len(acked)
                time.sleep(0.5)  # and the producer goes on writing to the moved replica
        finally:
            stop.set()
            t.join(60)
        assert len(acked) > size_moved
        assert not (src / "m-0").exists() and (dest / "m-0").exists()
        assert not [e for e in (*src.iterdir(), *dest.iterdir()) if "-future" in e.name or "-delete" in e.name]
        assert len(list((dest / "m-0").glob("*.log"))) > 1  # several segments were moved
        got = read_all(bs, "m", 0, len(acked))
        assert got == acked  # every acknowledged record, once, in order
    with start(ds) as b:  # and after a restart it is still there
        assert read_all(b.bootstrap_servers, "m", 0, len(acked)) == acked
        assert Path(b.server.replicas.get("m", 0).log.dir).parent == dest


def test_alter_replica_log_dirs_errors(tmp_path):
    ds = dirs_of(tmp_path)
    with start(ds) as b:
        bs = b.bootstrap_servers
        create(bs, "e", 1)
        node = b.server.node_id
        with Admin(bs) as admin:
            with pytest.raises(KafkaError, match="LOG_DIR_NOT_FOUND"):
                admin.alter_replica_log_dirs(node, {("e", 0): str(tmp_path / "elsewhere")})
            # a replica not here yet: refused now, created in that directory when it comes
            with pytest.raises(KafkaError, match="REPLICA_NOT_AVAILABLE"):
                admin.alter_replica_log_dirs(node, {("later", 0): str(ds[1])})
            create(bs, "later", 1)
            deadline = time.monotonic() + 10
            while ("later", 0) not in admin.describe_replica_log_dirs(node) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert admin.describe_replica_log_dirs(node)[("later", 0)] == (str(ds[1]), None)
            # where it is already: nothing to do
            here = admin.describe_replica_log_dirs(node)[("e", 0)][0]
            admin.alter_replica_log_dirs(node, {("e", 0): here})
            assert admin.describe_replica_log_dirs(node)[("e", 0)] == (here, None)


def test_a_move_interrupted_between_its_renames_is_finished_at_start(tmp_path):
    ds = dirs_of(tmp_path)
    with start(ds) as b:
        create(b.bootstrap_servers, "c", 2)
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(100):
            p.produce("c", f"r{i}".encode(), partition=0)
            p.produce("c", f"s{i}".encode(), partition=1)
        assert p.flush(10) == 0
        src = Path(b.server.replicas.get("c", 0).log.dir).parent
    dest = next(d for d in ds if d != src)
    move = uuid.uuid4().hex
    # the state a crash leaves between the move's renames: the source renamed -delete, the
    # (complete) future not yet renamed live
    shutil.copytree(src / "c-0", dest / f"c-0.{move}-future")
    os.rename(src / "c-0", src / f"c-0.{move}-delete")
    # and an unfinished move of c-1: its future dir goes, the replica stays
    other = Path(next(d for d in ds if (d / "c-1").exists()))
    stray = next(d for d in ds if d != other) / f"c-1.{uuid.uuid4().hex}-future"
    shutil.copytree(other / "c-1", stray)
    with start(ds) as b:
        assert Path(b.server.replicas.get("c", 0).log.dir).parent == dest
        assert read_all(b.bootstrap_servers, "c", 0, 100) == [f"r{i}".encode() for i in range(100)]
        assert not stray.exists() and not (src / f"c-0.{move}-delete").exists()
        assert Path(b.server.replicas.get("c", 1).log.dir).parent == other
        assert read_all(b.bootstrap_servers, "c", 1, 100) == [f"s{i}".encode() for i in range(100)]


def test_refused_layouts(tmp_path):
    ds = dirs_of(tmp_path)
    with start(ds) as b:
        create(b.bootstrap_servers, "d", 1)
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        p.produce("d", b"one", partition=0)
        assert p.flush(10) == 0
        src = Path(b.server.replicas.get("d", 0).log.dir).parent
    other = next(d for d in ds if d != src)
    shutil.copytree(src / "d-0", other / "d-0")
    with pytest.raises(Exception, match=r"d-0 has a directory in two log directories"):
        start(ds).start()
    shutil.rmtree(other / "d-0")
    with pytest.raises(Exception, match="lists .* twice"):
        start([ds[0], ds[0]]).start()
    # a log directory of another broker
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "meta.properties").write_text(
        "version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=7\ndirectory.id=BBBBBBBBBBBBBBBBBBBBBB\n"
    )
    with pytest.raises(Exception, match="belongs to node.id 7"):
        start([*ds, foreign]).start()


def test_move_a_follower_replica_in_a_cluster():
    """On three nodes (RF 3, acks=all) a follower's replica moves while records keep coming:
    it leaves the fetch loops for the swap, follows again from its new directory, returns to
    the ISR, and holds every record."""
    from logbroker import Cluster

    with Cluster(3, log_dirs=2) as c:
        bs = c.bootstrap_servers
        admin_c = AdminClient({"bootstrap.servers": bs})
        admin_c.create_topics([NewTopic("f", 1, 3)])["f"].result(20)
        p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
        values = [f"v{i}".encode() * 40 for i in range(6000)]
        for v in values[:3000]:
            p.produce("f", v, partition=0)
        assert p.flush(30) == 0
        md = admin_c.list_topics("f", timeout=10).topics["f"].partitions[0]
        follower = next(r for r in md.replicas if r != md.leader)
        node = c.nodes[follower - 1]
        with Admin(bs) as admin:
            src = Path(admin.describe_replica_log_dirs(follower)[("f", 0)][0])
            dest = next(d for d in node.log_dirs if d.resolve() != src.resolve())
            admin.alter_replica_log_dirs(follower, {("f", 0): str(dest)})
            for v in values[3000:]:
                p.produce("f", v, partition=0)
            assert p.flush(30) == 0
            wait_moved(admin, follower, ("f", 0), dest.resolve())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            md = admin_c.list_topics("f", timeout=10).topics["f"].partitions[0]
            if sorted(md.isrs) == [1, 2, 3]:
                break
            time.sleep(0.2)
        assert sorted(md.isrs) == [1, 2, 3], md
        assert read_all(bs, "f", 0, 6000) == values
        assert (dest / "f-0").is_dir() and not (src / "f-0").exists()
        with Admin(bs) as admin:  # the moved copy holds the leader's bytes
            sizes = {b: admin.describe_log_dirs(b)[("f", 0)] for b in (md.leader, follower)}
        assert sizes[md.leader] == sizes[follower] > 6000 * 80, sizes
