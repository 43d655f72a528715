"""The fault suite: a replicated topic under real clients while faults are injected into a
three-node `Cluster`, and a Jepsen-style check of what the clients saw (jepsen_checker.py).

    python tests/fault_suite.py --runs 10 --duration 120            # the long run
    python tests/fault_suite.py --faults kill,partition --duration 30 --runs 1 --json out.json

A run:
1. starts `Cluster(3)` with every node behind the fault proxy (fault_proxy.py) and, when the
   disk fault is on and tmpfs can be mounted, each node's data directory on its own tmpfs;
   creates topic `jepsen` (3 partitions, replication factor 3, min.insync.replicas=2,
   unclean election as asked);
2. runs the workload: confluent-kafka producers (idempotent, acks=all) writing unique values
   to every partition, one consumer reading every partition by assign (auto.offset.reset
   =error, so a reset would show), and two consumers in a group (subscribe, commits);
   every send, outcome and polled record goes into the history;
3. meanwhile the nemesis injects one fault at a time, letting the cluster heal (every
   partition's ISR full again) before the next:
       kill       kill -9 of a partition leader, the active controller or any node; restart
       pause      SIGSTOP of a node (sometimes past the broker session timeout); SIGCONT
       partition  the proxy isolates one node from the other two; heal
       restart    rolling restart: SIGTERM and restart each node in turn
       disk       a node's disk filled to the last 16 KiB; freed
       elr        eligible leader replicas (KIP-966): for one partition, a follower killed,
                  the other paused until the ISR is the leader alone (below min ISR, the
                  paused one in the ELR), the leader killed, the paused follower resumed: it
                  must be elected from the ELR (clean, unclean election off) and lose nothing.
                  With this fault the cluster is one controller-only node and three brokers
                  (2-4), so the quorum outlives losing every replica of a partition
4. stops the faults and the writers, heals everything, reads every partition to its high
   watermark (the final read), stops the cluster and compares every replica's log on disk;
5. checks the history: lost writes, duplicates, inconsistent offsets, nonmonotonic sends and
   polls, poll skips, phantoms, and replicas that differ.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
from jepsen_checker import History, Poll, Send, check, summary  # noqa: E402
from rawclient import RawClient  # noqa: E402

from logbroker import Cluster, _core  # noqa: E402
from logbroker.protocol import REQUESTS  # noqa: E402

TOPIC = "jepsen"
FAULTS = ("kill", "pause", "partition", "restart", "disk", "elr")
CLUSTER_CONFIG = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 300,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
}
DISK_BYTES = 256 * 1024 * 1024


@dataclasses.dataclass
class RunConfig:
    faults: list[str]
    duration: float = 30.0
    partitions: int = 3
    producers: int = 2
    unclean: bool = False
    seed: int = 0


@dataclasses.dataclass
class RunResult:
    config: RunConfig
    faults: list[dict]
    counts: dict[str, int]
    anomalies: dict[str, list]
    divergent_replicas: list[str]
    notes: list[str]

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values()) and not self.divergent_replicas


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the cluster and what it says ------------------------------------------------------------


def metadata(node) -> dict[int, tuple[int, list[int], list[int]]]:
    with RawClient(node.bootstrap_servers, timeout=5) as c:
        r = c.request(
            3, 12, REQUESTS[3](topics=[REQUESTS[3].MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False)
        )
    t = r.topics[0]
    return {p.partition_index: (p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) for p in t.partitions}


def any_metadata(cluster) -> dict[int, tuple[int, list[int], list[int]]]:
    for n in cluster.nodes:
        if n.is_running:
            try:
                return metadata(n)
            except Exception:  # noqa: BLE001 - try the next node
                continue
    return {}


def healthy(cluster, partitions: int) -> bool:
    """Every node running and every partition led with its whole replica set in the ISR."""
    if not all(n.is_running for n in cluster.nodes):
        return False
    m = any_metadata(cluster)
    return len(m) == partitions and all(
        leader >= 0 and sorted(isr) == sorted(replicas) for leader, replicas, isr in m.values()
    )


def wait_healthy(cluster, partitions: int, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if healthy(cluster, partitions):
            return True
        time.sleep(0.2)
    return False


def create_topic(cluster, partitions: int, unclean: bool) -> None:
    C = REQUESTS[19]
    configs = {"min.insync.replicas": "2", "unclean.leader.election.enable": str(unclean).lower()}
    req = C(
        topics=[
            C.CreatableTopic(
                name=TOPIC,
                num_partitions=partitions,
                replication_factor=3,
                assignments=[],
                configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        timeout_ms=15000,
        validate_only=False,
    )
    with RawClient(cluster.bootstrap_servers.split(",")[0]) as c:  # a broker (node 1 may be controller-only)
        r = c.request(19, 5, req).topics[0]
        if r.error_code:
            raise RuntimeError(f"creating {TOPIC}: error {r.error_code}: {r.error_message}")


# --- the workload ------------------------------------------------------------------------------


class Workload:
    """Producers and consumers recording a history (see the module doc)."""

    def __init__(self, bootstrap: str, partitions: int, producers: int, idempotent: bool = True) -> None:
        self.bootstrap = bootstrap
        self.idempotent = idempotent
        self.partitions = partitions
        self.n_producers = producers
        self.history = History()
        # reentrant: a replaced producer is freed by the garbage collector, possibly while this
        # thread holds the lock, and librdkafka then delivers its last reports (`done`) at once
        self.lock = threading.RLock()
        self.stop_writing = threading.Event()
        self.stop_reading = threading.Event()
        self.threads: list[threading.Thread] = []
        self.notes: list[str] = []

    def start(self) -> None:
        for i in range(self.n_producers):
            self.threads.append(threading.Thread(target=self._produce, args=(i + 1,), daemon=True))
        self.threads.append(threading.Thread(target=self._consume_assigned, args=("assign-1",), daemon=True))
        for name in ("group-1", "group-2"):
            self.threads.append(threading.Thread(target=self._consume_group, args=(name,), daemon=True))
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stop_writing.set()
        for t in self.threads[: self.n_producers]:
            t.join(180)
        # consumers run on a little, to read what the last writes put in the log
        time.sleep(2)
        self.stop_reading.set()
        for t in self.threads[self.n_producers :]:
            t.join(60)

    def _produce(self, pid: int) -> None:
        sends: dict[int, int] = {}  # seq -> index in history.sends

        def done(err, msg, seq):
            i = sends.pop(seq)
            old = self.history.sends[i]
            with self.lock:
                if err is None:
                    self.history.sends[i] = dataclasses.replace(old, ok=True, offset=msg.offset())
                else:
                    self.history.sends[i] = dataclasses.replace(old, ok=False)
                    if err.fatal():
                        self.notes.append(f"producer {pid}: fatal error {err}")

        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": self.idempotent,
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "request.timeout.ms": 10000,
                "socket.timeout.ms": 10000,
            }
        )
        seq = 0
        while not self.stop_writing.is_set():
            partition = seq % self.partitions
            value = f"p{pid}-{seq}".encode()
            with self.lock:
                sends[seq] = len(self.history.sends)
                self.history.sends.append(Send(pid, seq, partition, value, None))
            try:
                p.produce(TOPIC, value=value, partition=partition, on_delivery=lambda e, m, s=seq: done(e, m, s))
            except BufferError:
                with self.lock:
                    i = sends.pop(seq)
                    self.history.sends[i] = dataclasses.replace(self.history.sends[i], ok=False)
                p.poll(0.1)
                continue
            except KafkaException as e:
                # a fatal error (an idempotent producer whose sequences the cluster lost, as an
                # unclean election does): this producer is done; what it had queued fails
                with self.lock:
                    i = sends.pop(seq)
                    self.history.sends[i] = dataclasses.replace(self.history.sends[i], ok=False)
                    self.notes.append(f"producer {pid}: stopped by {e}")
                break
            seq += 1
            p.poll(0)
            if seq % 10 == 0:
                time.sleep(0.02)  # at most about 500 records/s per producer
        left = p.flush(60)
        if left:
            self.notes.append(f"producer {pid}: {left} record(s) unresolved at the end (outcome unknown)")

    def _record(self, consumer: str, segments: dict[int, int], msgs) -> None:
        with self.lock:
            for m in msgs:
                self.history.polls.append(
                    Poll(consumer, segments.get(m.partition(), 0), m.partition(), m.offset(), m.value())
                )

    def _consume_assigned(self, name: str) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"jepsen-{name}",
                "enable.auto.commit": False,
                "auto.offset.reset": "error",
                "fetch.wait.max.ms": 100,
            }
        )
        segments = {p: 0 for p in range(self.partitions)}
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(self.partitions)])
        try:
            while not self.stop_reading.is_set():
                msgs = c.consume(500, timeout=0.5)
                good = []
                for m in msgs:
                    if m.error() is None:
                        good.append(m)
                    elif m.error().code() == KafkaError._AUTO_OFFSET_RESET:
                        segments[m.partition()] += 1  # a reset: the sequence starts again
                        self.notes.append(f"{name}: offset reset on partition {m.partition()}: {m.error()}")
                        tp = TopicPartition(TOPIC, m.partition(), 0)
                        c.incremental_unassign([tp])
                        c.incremental_assign([tp])
                self._record(name, segments, good)
        finally:
            c.close()

    def _consume_group(self, name: str) -> None:
        segments: dict[int, int] = {}

        def on_assign(consumer, parts):
            for tp in parts:
                segments[tp.partition] = segments.get(tp.partition, 0) + 1

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "jepsen-group",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                "fetch.wait.max.ms": 100,
            }
        )
        c.subscribe([TOPIC], on_assign=on_assign)
        try:
            while not self.stop_reading.is_set():
                msgs = c.consume(500, timeout=0.5)
                self._record(name, segments, [m for m in msgs if m.error() is None])
        finally:
            c.close()

    def final_read(self) -> dict[int, list[tuple[int, bytes]]]:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "jepsen-final", "enable.auto.commit": False})
        out: dict[int, list[tuple[int, bytes]]] = {}
        try:
            for p in range(self.partitions):
                tp = TopicPartition(TOPIC, p, 0)
                low, high = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
                c.assign([tp])
                got: list[tuple[int, bytes]] = []
                deadline = time.monotonic() + 120
                while (not got or got[-1][0] < high - 1) and high > low and time.monotonic() < deadline:
                    for m in c.consume(1000, timeout=2):
                        if m.error() is None:
                            got.append((m.offset(), m.value()))
                out[p] = got
        finally:
            c.close()
        return out


# --- the nemesis ---------------------------------------------------------------------------------


class Nemesis:
    def __init__(
        self,
        cluster,
        proxy: FaultProxy,
        faults: list[str],
        partitions: int,
        rng: random.Random,
        disks: dict[int, Path] | None,
    ) -> None:
        self.cluster = cluster
        self.proxy = proxy
        self.faults = faults
        self.partitions = partitions
        self.rng = rng
        self.disks = disks or {}
        self.log: list[dict] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _pick_node(self) -> tuple[int, str]:
        m = any_metadata(self.cluster)
        choice = self.rng.random()
        if m and choice < 0.4:
            leader = m[self.rng.randrange(self.partitions)][0]
            if leader > 0:
                return leader, "a partition leader"
        if choice < 0.7:
            try:
                return self.cluster.controller_id(timeout=5), "the active controller"
            except TimeoutError:
                pass
        return self.rng.choice([n.node_id for n in self.cluster.nodes]), "a node"

    def _run(self) -> None:
        while not self.stop.wait(self.rng.uniform(1.0, 3.0)):
            fault = self.rng.choice(self.faults)
            if fault == "disk" and not self.disks:
                continue
            start = time.monotonic()
            entry = {"fault": fault, "at": round(time.time(), 3)}
            try:
                getattr(self, f"_{fault}")(entry)
            except Exception as e:  # noqa: BLE001 - recorded; the run goes on
                entry["error"] = repr(e)
            entry["seconds"] = round(time.monotonic() - start, 2)
            entry["healed"] = self._heal(entry, 60)
            self.log.append(entry)
            log(f"fault: {entry}")

    def _heal(self, entry: dict, timeout: float) -> bool:
        """Wait until every ISR is full again; a node that stopped by itself meanwhile (its
        metadata log on a full disk) is recorded in `entry` and restarted, as an operator
        would."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            exited = {n.node_id: n.proc.poll() for n in self.cluster.nodes if not n.is_running}
            for node, code in exited.items():
                entry.setdefault("exited", {})[node] = code
                self.cluster.node(node).start()
            if healthy(self.cluster, self.partitions):
                return True
            time.sleep(0.2)
        return False

    def _hold(self, lo: float, hi: float) -> float:
        d = self.rng.uniform(lo, hi)
        self.stop.wait(d)
        return d

    def _kill(self, entry: dict) -> None:
        node, what = self._pick_node()
        entry.update(node=node, target=what)
        self.cluster.node(node).kill()
        entry["down_s"] = round(self._hold(1.0, 5.0), 2)
        self.cluster.node(node).start()

    def _pause(self, entry: dict) -> None:
        node, what = self._pick_node()
        entry.update(node=node, target=what)
        n = self.cluster.node(node)
        n.proc.send_signal(signal.SIGSTOP)
        try:
            entry["paused_s"] = round(self._hold(1.0, 6.0), 2)
        finally:
            n.proc.send_signal(signal.SIGCONT)

    def _partition(self, entry: dict) -> None:
        node, what = self._pick_node()
        others = {n.node_id for n in self.cluster.nodes} - {node}
        entry.update(node=node, target=what, groups=[[node], sorted(others)])
        self.proxy.partition([{node}, others])
        try:
            entry["cut_s"] = round(self._hold(2.0, 8.0), 2)
        finally:
            self.proxy.heal()

    def _restart(self, entry: dict) -> None:
        order = [n.node_id for n in self.cluster.nodes]
        self.rng.shuffle(order)
        entry["order"] = order
        for node in order:
            n = self.cluster.node(node)
            n.stop(timeout=30)
            n.start()
            wait_healthy(self.cluster, self.partitions, 60)
            if self.stop.is_set():
                break

    def _elr(self, entry: dict) -> None:
        m = any_metadata(self.cluster)
        led = [p for p, (leader, replicas, isr) in m.items() if leader > 0 and sorted(isr) == sorted(replicas)]
        if not led:
            raise RuntimeError(f"no partition with a leader and a full ISR: {m}")
        p = self.rng.choice(led)
        leader, replicas, _isr = m[p]
        killed, paused = self.rng.sample([r for r in replicas if r != leader], 2)
        entry.update(partition=p, leader=leader, killed=killed, paused=paused)

        def state(node: int) -> tuple[int, list[int]]:
            """(leader, ISR) of the partition as `node` sees it ((-2, []) when it does not answer)."""
            try:
                leader_id, _replicas, isr = metadata(self.cluster.node(node))[p]
            except Exception:  # noqa: BLE001 - not answering yet
                return -2, []
            return leader_id, sorted(isr)

        def wait(what: str, node: int, ok, timeout: float = 30.0) -> None:
            deadline = time.monotonic() + timeout
            while not ok(state(node)):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what}: partition {p} is {state(node)} (node {node}) after {timeout:.0f} s")
                time.sleep(0.1)

        self.cluster.node(killed).kill()
        wait("the killed follower out of the ISR", leader, lambda s: killed not in s[1])
        n = self.cluster.node(paused)
        n.proc.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            # the paused follower leaves the ISR with the ISR below min.insync.replicas: into the ELR
            wait("the ISR down to the leader alone", leader, lambda s: s == (leader, [leader]))
            self.cluster.node(leader).kill()  # every replica of the partition down or stopped
        finally:
            n.proc.send_signal(signal.SIGCONT)
            entry["paused_s"] = round(time.monotonic() - t0, 2)
        # the leader's session ends, the ISR empties; the resumed follower, in the ELR, is elected
        wait("the paused follower elected from the ELR", paused, lambda s: s[0] == paused, 60)
        entry["elected"] = paused
        self.cluster.node(leader).start()
        self.cluster.node(killed).start()

    def _disk(self, entry: dict) -> None:
        node = self.rng.choice(sorted(self.disks))
        entry.update(node=node, target="a node's disk")
        ballast = self.disks[node] / "ballast"
        st = os.statvfs(self.disks[node])
        free = st.f_bavail * st.f_frsize
        # unbuffered: a buffered file's close flushes what is left, and when the broker took
        # some of the free space meanwhile that flush raised ENOSPC out of the fault itself
        with open(ballast, "wb", buffering=0) as f:
            f.truncate(0)
            chunk = b"\0" * (1 << 20)
            left = max(0, free - (16 << 10))  # 16 KiB left: the next appends fail
            try:
                while left > 0:
                    left -= f.write(chunk[: min(len(chunk), left)])
            except OSError:
                pass
        try:
            entry["full_s"] = round(self._hold(2.0, 6.0), 2)
        finally:
            ballast.unlink(missing_ok=True)


# --- one run -------------------------------------------------------------------------------------


def _mount_disks(root: Path, nodes: list[int]) -> dict[int, Path]:
    disks = {}
    for i in nodes:
        d = root / f"node{i}"
        d.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(d)], capture_output=True)
        if r.returncode != 0:
            _unmount(disks)
            return {}
        disks[i] = d
    return disks


def _unmount(disks: dict[int, Path]) -> None:
    for d in disks.values():
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def compare_replicas(root: Path, cluster_nodes: list[int], partitions: int) -> list[str]:
    """Replica logs that differ from another replica of the same partition (after the run)."""
    out = []
    for p in range(partitions):
        logs = {}
        for n in cluster_nodes:
            path = root / f"node{n}" / f"{TOPIC}-{p}"
            if not path.exists():
                continue
            lg = _core.Log.open(str(path), TOPIC, p, {}, None, 0)
            try:
                logs[n] = ([(o, v) for o, _ts, _k, v in lg.read_records(lg.log_start_offset)], lg.epoch_entries())
            finally:
                lg.close()
        first = next(iter(logs.values()), None)
        for n, content in logs.items():
            if content != first:
                out.append(
                    f"{TOPIC}-{p}: replica on node {n} differs ({len(content[0])} records, epochs "
                    f"{content[1]}; another has {len(first[0])}, epochs {first[1]})"
                )
    return out


def run(root: Path, cfg: RunConfig) -> RunResult:
    rng = random.Random(cfg.seed)
    root.mkdir(parents=True, exist_ok=True)
    disks = _mount_disks(root, [2, 3, 4] if "elr" in cfg.faults else [1, 2, 3]) if "disk" in cfg.faults else {}
    notes = []
    if "disk" in cfg.faults and not disks:
        notes.append("disk fault skipped: tmpfs cannot be mounted here")
    try:
        return _run(root, cfg, rng, disks, notes)
    finally:
        _unmount(disks)  # also when the run fails: a mount left behind outlives the test's directory


def _run(root: Path, cfg: RunConfig, rng: random.Random, disks: dict[int, Path], notes: list[str]) -> RunResult:
    proxy = FaultProxy()
    if "elr" in cfg.faults:  # the quorum on its own node: every replica of a partition can go down
        cluster = Cluster(
            1, broker_only=3, controller_only=True, data_dir=root, config=CLUSTER_CONFIG, front=proxy.front
        )
    else:
        cluster = Cluster(3, data_dir=root, config=CLUSTER_CONFIG, front=proxy.front)
    try:
        cluster.start()
        create_topic(cluster, cfg.partitions, cfg.unclean)
        if not wait_healthy(cluster, cfg.partitions, 60):
            raise RuntimeError("the topic never had a full ISR")
        workload = Workload(cluster.bootstrap_servers, cfg.partitions, cfg.producers)
        workload.start()
        time.sleep(2)
        nemesis = Nemesis(cluster, proxy, cfg.faults, cfg.partitions, rng, disks)
        nemesis.thread.start()
        time.sleep(cfg.duration)
        nemesis.stop.set()
        nemesis.thread.join(180)
        proxy.heal()
        for n in cluster.nodes:
            if not n.is_running:
                n.start()
            else:
                n.proc.send_signal(signal.SIGCONT)
        for d in disks.values():
            (d / "ballast").unlink(missing_ok=True)
        if not wait_healthy(cluster, cfg.partitions, 90):
            notes.append(f"cluster not healthy 90 s after the faults: {any_metadata(cluster)}")
        workload.stop()
        workload.history.final = workload.final_read()
        notes += workload.notes
    finally:
        cluster.stop()
        proxy.close()
    divergent = compare_replicas(root, [2, 3, 4] if "elr" in cfg.faults else [1, 2, 3], cfg.partitions)
    anomalies = check(workload.history)
    return RunResult(cfg, nemesis.log, summary(workload.history, anomalies), anomalies, divergent, notes)


def report(results: list[RunResult]) -> str:
    lines = [
        "| run | faults | injected | acknowledged | failed/unknown | polled | final records | anomalies |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for i, r in enumerate(results, 1):
        bad = {k: len(v) for k, v in r.anomalies.items() if v}
        if r.divergent_replicas:
            bad["replica-divergence"] = len(r.divergent_replicas)
        lines.append(
            f"| {i} | {','.join(r.config.faults)} | {len(r.faults)} | {r.counts['acknowledged']} | "
            f"{r.counts['failed']}/{r.counts['unknown']} | {r.counts['polled']} | {r.counts['final_records']} | "
            f"{bad or 'none'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of faults per run")
    ap.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated from {','.join(FAULTS)}")
    ap.add_argument("--unclean", action="store_true", help="unclean.leader.election.enable=true on the topic")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--dir", default=None, help="where runs keep their data (default: a temporary directory)")
    ap.add_argument("--json", default=None, help="write every run's counts, faults and anomalies here")
    args = ap.parse_args(argv)
    faults = [f for f in args.faults.split(",") if f]
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        ap.error(f"unknown faults {unknown}; choose from {FAULTS}")
    base = Path(args.dir) if args.dir else Path(os.environ.get("TMPDIR", "/tmp")) / f"logbroker-faults-{os.getpid()}"
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    results = []
    for i in range(args.runs):
        cfg = RunConfig(faults, args.duration, unclean=args.unclean, seed=seed + i)
        log(f"run {i + 1}/{args.runs}: faults {faults}, {args.duration:.0f} s, seed {cfg.seed}")
        r = run(base / f"run{i + 1}", cfg)
        if not args.dir and r.ok:
            shutil.rmtree(base / f"run{i + 1}", ignore_errors=True)
        results.append(r)
        log(
            f"run {i + 1}: {len(r.faults)} fault(s), counts {r.counts}, divergent {r.divergent_replicas}, "
            f"notes {r.notes}"
        )
    print(report(results))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                [
                    {
                        "config": dataclasses.asdict(r.config),
                        "faults": r.faults,
                        "counts": r.counts,
                        "anomalies": {k: [repr(x) for x in v[:20]] for k, v in r.anomalies.items()},
                        "divergent_replicas": r.divergent_replicas,
                        "notes": r.notes,
                    }
                    for r in results
                ],
                indent=1,
            )
        )
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
