"""Issue 48's "done when", on three nodes: a key-ordered share group of logbroker's
ShareConsumers works through records on a few keys (some delayed, some released with a
back-off, some rejected) while the partition's leader is killed with SIGKILL and restarted;
a checker over the recorded history then finds

- no key processed out of order: a record is received only after every earlier record of
  its key was acknowledged (accepted, or rejected) by some member — an acknowledgement the
  new leader never learned makes the earlier record come back first, which is allowed;
- no record received before its `logbroker.deliver.at` time;
- every record accepted or dead-lettered (rejected: written to the group's dead-letter topic,
  KIP-1191, through its ARCHIVING state, which survives the failover), none lost.
"""

from __future__ import annotations

import random
import threading
import time

from replication_helpers import FAST

from logbroker import Admin, Cluster, Consumer, NewTopic, Producer, ShareConsumer
from logbroker.client.errors import KafkaError

CONFIG = {
    **FAST,
    "group.share.enable": "true",
    "group.share.auto.offset.reset": "earliest",
    "group.share.record.lock.duration.ms": "3000",
    "group.share.delivery.count.limit": "6",
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.num.partitions": 3,
    "min.insync.replicas": 2,
}
N, KEYS = 300, 12


def leader_of(cluster, topic: str) -> int:
    with Admin(cluster.bootstrap_servers) as a:
        return a.describe_topics([topic])[topic].partitions[0].leader


def test_key_order_delivery_times_and_no_loss_through_a_leader_kill(tmp_path):
    rng = random.Random(48)
    with Cluster(3, data_dir=tmp_path, config=CONFIG) as cluster:
        bs = cluster.bootstrap_servers
        with Admin(bs) as a:
            a.create_topics([NewTopic("work", 1, 3)])
            a.create_topics([NewTopic("dlq.work", 1, 3, config={"errors.deadletterqueue.group.enable": "true"})])
            group = {
                "share.delivery.order": "key",
                "share.release.backoff.ms": "200",
                "errors.deadletterqueue.topic.name": "dlq.work",
            }
            a.alter_configs({("group", "ordered"): group})
        keys = {i: f"k{i % KEYS}" for i in range(N)}
        due: dict[int, int] = {}
        with Producer(bs, acks="all", linger_ms=5) as p:
            start_ms = int(time.time() * 1000)
            for i in range(N):
                deliver_at = None
                if rng.random() < 0.1:
                    deliver_at = due[i] = start_ms + rng.randrange(1000, 8000)
                p.send("work", str(i).encode(), key=keys[i].encode(), deliver_at=deliver_at)
            p.flush(60)

        lock = threading.Lock()
        received: list[tuple[int, float, int]] = []  # (record, wall time, delivery count)
        acked: dict[int, float] = {}  # record -> when an accept or reject was first sent
        accepted: set[int] = set()
        rejected: set[int] = set()
        stop = threading.Event()
        errors: list[BaseException] = []

        def member(name: str) -> None:
            mrng = random.Random(name)
            try:
                with ShareConsumer(
                    bs, "ordered", share_acknowledgement_mode="explicit", max_poll_records=10, client_id=name
                ) as c:
                    c.subscribe(["work"])
                    while not stop.is_set():
                        recs = c.poll(0.2)
                        for r in recs:
                            i = int(r.value)
                            with lock:
                                received.append((i, time.time(), r.delivery_count))
                            time.sleep(mrng.uniform(0, 0.01))
                            roll = mrng.random()
                            if roll < 0.1 and r.delivery_count < 3:
                                c.acknowledge(r, "release")
                            elif roll < 0.13:
                                c.acknowledge(r, "reject")
                                with lock:
                                    acked.setdefault(i, time.time())
                                    rejected.add(i)
                            else:
                                c.acknowledge(r, "accept")
                                with lock:
                                    acked.setdefault(i, time.time())
                                    accepted.add(i)
                        if recs:
                            try:
                                c.commit_sync()
                            except KafkaError:
                                pass  # the leader died under it: those records come back
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        threads = [threading.Thread(target=member, args=(f"m{i}",)) for i in range(3)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(acked) < N // 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        leader = leader_of(cluster, "work")
        cluster.node(leader).kill()
        time.sleep(3)
        cluster.node(leader).start()
        deadline = time.monotonic() + 120
        while len(acked) < N and time.monotonic() < deadline and not errors:
            time.sleep(0.2)
        stop.set()
        for t in threads:
            t.join(60)
        assert not errors, errors
        # the dead letters, read back: each names its source offset
        dead: set[int] = set()
        with Consumer(bs, group_id="dlq-reader", auto_offset_reset="earliest") as dc:
            dc.subscribe(["dlq.work"])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (set(range(N)) - accepted) <= dead:
                for r in dc.poll(0.5):
                    dead.add(int(dict(r.headers)["__dlq.errors.offset"]))

    assert len(acked) == N, (
        f"{N - len(acked)} records never accepted nor rejected: {sorted(set(range(N)) - set(acked))[:20]}"
    )
    violations = []
    for i, at, count in received:
        if i in due and at * 1000 < due[i]:
            violations.append(f"record {i} received {due[i] - at * 1000:.0f} ms before its time (delivery {count})")
        for j in range(i):
            if keys[j] == keys[i] and (j not in acked or acked[j] > at):
                violations.append(f"record {i} ({keys[i]}) received while earlier record {j} was not yet acknowledged")
                break
    assert not violations, violations[:10]
    assert accepted | dead == set(range(N)), (
        f"neither accepted nor dead-lettered: {sorted(set(range(N)) - accepted - dead)}"
    )
    assert dead <= rejected, f"dead letters of records never rejected: {sorted(dead - rejected)}"
    redelivered = sum(1 for _i, _at, count in received if count > 1)
    print(
        f"{len(received)} receipts, {redelivered} redeliveries, {len(accepted)} accepted, {len(rejected)} rejected, "
        f"{len(dead)} dead-lettered"
    )
