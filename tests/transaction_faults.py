"""Transactions under faults: transactional producers (confluent-kafka) committing and
aborting multi-partition transactions in a three-node `Cluster` while the nemesis kills -9
the broker coordinating their transactional ids or a partition leader, and read_committed
consumers polling throughout; then a final read_committed read and the transaction checks
of jepsen_checker.py (aborted reads, torn transactions, lost commits, dirty reads,
duplicates, phantoms).

    python tests/transaction_faults.py --runs 3 --duration 60      # a longer run
    (tests/test_transaction_faults.py runs a short one in CI)

A producer's transaction outcome is what it saw: committed (commit_transaction returned),
aborted (abort_transaction returned), unknown (an error on the way: the checker then only
asks for all or nothing). After a fatal error (fenced) or an unknown outcome the producer is
replaced by a new one with the same transactional id, whose init_transactions fences the old
one and finishes its transaction.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from jepsen_checker import Poll, Txn, check_transactions, txn_summary  # noqa: E402
from rawclient import RawClient  # noqa: E402

from logbroker import Cluster  # noqa: E402
from logbroker.coord.groups.transaction_log import TRANSACTION_STATE_TOPIC, partition_for  # noqa: E402
from logbroker.protocol import REQUESTS  # noqa: E402

TOPIC = "txn-jepsen"
STATE_PARTITIONS = 5
CONFIG = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 300,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": STATE_PARTITIONS,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
    "offsets.topic.replication.factor": 3,
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def layout(cluster) -> dict[tuple[str, int], tuple[int, list[int], list[int]]]:
    for n in cluster.nodes:
        if not n.is_running:
            continue
        try:
            with RawClient(n.bootstrap_servers, timeout=5) as c:
                r = c.request(3, 12, REQUESTS[3](topics=None, allow_auto_topic_creation=False))
            return {
                (t.name, p.partition_index): (p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
                for t in r.topics
                for p in t.partitions
            }
        except Exception:  # noqa: BLE001 - ask the next node
            continue
    return {}


def healthy(cluster) -> bool:
    if not all(n.is_running for n in cluster.nodes):
        return False
    m = layout(cluster)
    parts = [v for (t, _), v in m.items() if t in (TOPIC, TRANSACTION_STATE_TOPIC)]
    return len(parts) >= 3 + STATE_PARTITIONS and all(
        leader >= 0 and sorted(isr) == sorted(replicas) for leader, replicas, isr in parts
    )


def wait_healthy(cluster, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if healthy(cluster):
            return True
        time.sleep(0.2)
    return False


@dataclasses.dataclass
class Result:
    counts: dict
    anomalies: dict
    faults: list

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())


class Workload:
    def __init__(self, bootstrap: str, partitions: int, producers: int, rng: random.Random) -> None:
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.producers = producers
        self.rng = rng
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.txns: list[Txn] = []
        self.polls: list[Poll] = []
        self.errors: list[str] = []
        self.hanging: list[tuple[int, int, int]] = []  # (partition, LSO, HW) never closed

    def _producer(self, pid: int) -> Producer:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": f"txj-{pid}",
                "linger.ms": 2,
                "transaction.timeout.ms": 10000,
                "message.timeout.ms": 10000,
            }
        )
        p.init_transactions(60)
        return p

    def produce(self, pid: int) -> None:
        rng = random.Random(self.rng.random())
        p = None
        seq = 0
        while not self.stop.is_set():
            try:
                if p is None:
                    p = self._producer(pid)
            except KafkaException as e:
                self.errors.append(f"producer {pid} init: {e}")
                p = None
                time.sleep(0.5)
                continue
            values = tuple(
                (rng.randrange(self.partitions), f"p{pid}-t{seq}-{i}".encode()) for i in range(rng.randint(1, 6))
            )
            commit = rng.random() < 0.7
            outcome = "unknown"
            try:
                p.begin_transaction()
                for part, v in values:
                    p.produce(TOPIC, value=v, partition=part)
                if commit:
                    p.commit_transaction(30)
                    outcome = "committed"
                else:
                    p.abort_transaction(30)
                    outcome = "aborted"
            except KafkaException as e:
                err = e.args[0]
                if err.txn_requires_abort():
                    try:
                        p.abort_transaction(30)
                        outcome = "aborted"
                    except KafkaException:
                        outcome = "unknown"
                if outcome == "unknown":
                    # fenced, fatal or undecided: a new producer fences this one and ends its transaction
                    try:
                        p.flush(0)
                    except Exception:  # noqa: BLE001
                        pass
                    p = None
            with self.lock:
                self.txns.append(Txn(pid, seq, values, outcome))
            seq += 1

    def consume(self, name: str) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"txj-{name}",
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(self.partitions)])
        try:
            while not self.stop.is_set():
                for m in c.consume(500, timeout=0.5):
                    if m.error() is None:
                        with self.lock:
                            self.polls.append(Poll(name, 0, m.partition(), m.offset(), m.value()))
        finally:
            c.close()

    def final_read(self, timeout: float = 120) -> dict[int, list[tuple[int, bytes]]]:
        """read_committed, once no transaction is open (the LSO equals the HW everywhere)."""
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "txj-final",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        uncommitted = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "txj-hw", "isolation.level": "read_uncommitted"}
        )
        deadline = time.monotonic() + timeout
        out: dict[int, list[tuple[int, bytes]]] = {}
        try:
            for part in range(self.partitions):
                tp = TopicPartition(TOPIC, part)
                waited = time.monotonic()
                while True:  # wait for open transactions to end
                    lso = c.get_watermark_offsets(tp, timeout=10)[1]
                    hw = uncommitted.get_watermark_offsets(tp, timeout=10)[1]
                    if lso == hw:
                        break
                    if time.monotonic() > deadline:
                        self.hanging.append((part, lso, hw))
                        break
                    if time.monotonic() - waited > 5:
                        log(f"final read: {TOPIC}-{part} LSO {lso} HW {hw}: a transaction is still open")
                        waited = time.monotonic()
                    time.sleep(0.5)
                end = c.get_watermark_offsets(tp, timeout=10)[1]
                c.assign([TopicPartition(TOPIC, part, 0)])
                got: list[tuple[int, bytes]] = []
                last = -1
                while last < end - 1 and time.monotonic() < deadline:
                    msgs = c.consume(1000, timeout=1)
                    for m in msgs:
                        if m.error() is None:
                            got.append((m.offset(), m.value()))
                            last = m.offset()
                    if not msgs and c.position([TopicPartition(TOPIC, part)])[0].offset >= end:
                        break
                out[part] = got
        finally:
            c.close()
            uncommitted.close()
        return out


def run(tmp: Path, duration: float, seed: int, partitions: int = 3, producers: int = 2) -> Result:
    rng = random.Random(seed)
    faults: list[dict] = []
    with Cluster(3, data_dir=tmp, config=CONFIG) as cluster:
        C = REQUESTS[19]
        with RawClient(cluster.node(1).bootstrap_servers) as c:
            r = c.request(
                19,
                5,
                C(
                    topics=[
                        C.CreatableTopic(
                            name=TOPIC,
                            num_partitions=partitions,
                            replication_factor=3,
                            assignments=[],
                            configs=[C.CreatableTopicConfig(name="min.insync.replicas", value="2")],
                        )
                    ],
                    timeout_ms=15000,
                    validate_only=False,
                ),
            ).topics[0]
            assert r.error_code == 0, r
        w = Workload(cluster.bootstrap_servers, partitions, producers, rng)
        threads = [threading.Thread(target=w.produce, args=(i,), daemon=True) for i in range(producers)]
        threads += [threading.Thread(target=w.consume, args=(f"rc{i}",), daemon=True) for i in range(2)]
        for t in threads:
            t.start()
        if not wait_healthy(cluster, 60):
            raise RuntimeError(f"the cluster never became healthy: {layout(cluster)}; client errors {w.errors[:3]}")
        end = time.monotonic() + duration
        while time.monotonic() < end:
            time.sleep(rng.uniform(1.0, 3.0))
            m = layout(cluster)
            pid = rng.randrange(producers)
            coordinator = m.get((TRANSACTION_STATE_TOPIC, partition_for(f"txj-{pid}", STATE_PARTITIONS)), (-1,))[0]
            leader = m.get((TOPIC, rng.randrange(partitions)), (-1,))[0]
            target, why = (coordinator, f"coordinator of txj-{pid}") if rng.random() < 0.6 else (leader, "a leader")
            if target < 1:
                continue
            log(f"kill -9 node {target} ({why})")
            cluster.node(target).kill()
            time.sleep(rng.uniform(0.5, 3.0))
            cluster.node(target).restart()
            healed = wait_healthy(cluster, 60)
            faults.append({"fault": "kill", "node": target, "target": why, "healed": healed})
            if not healed:
                raise RuntimeError(f"the cluster did not heal after killing node {target}")
        w.stop.set()
        for t in threads:
            t.join(90)
        final = w.final_read(timeout=60 + 30 * partitions)
    anomalies = check_transactions(w.txns, w.polls, final)
    anomalies["hanging-transaction"] = w.hanging  # a partition whose LSO never reached its HW
    counts = txn_summary(w.txns, w.polls, final, anomalies)
    counts["faults"] = len(faults)
    counts["client_errors"] = len(w.errors)
    return Result(counts, anomalies, faults)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    import tempfile

    results = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="txj-") as d:
            r = run(Path(d), args.duration, args.seed + i)
        log(f"run {i + 1}: {json.dumps(r.counts)}")
        results.append(
            {
                "counts": r.counts,
                "faults": r.faults,
                "anomalies": {k: [repr(x) for x in v[:20]] for k, v in r.anomalies.items()},
            }
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    bad = [r for r in results if any(r["anomalies"].values())]
    log(
        f"{len(results)} run(s), {sum(r['counts']['faults'] for r in results)} fault(s), "
        f"{sum(r['counts']['transactions'] for r in results)} transaction(s), {len(bad)} with anomalies"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
