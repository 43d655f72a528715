"""Tiered storage (docs/operations.md, "Tiered storage"): what copying costs the produce
path, how fast consumers read history back from the remote tier, and how fast a replaced
broker is back in sync, for logbroker and Apache Kafka 4.4 with the same workload (issue 45).

The brokers: logbroker (`logbroker serve` processes, logbroker.Cluster) with its store a
`file://` directory; Kafka (benches/peers/kafka.py, KRaft combined mode, installed from Maven
Central into ~/.cache/logbroker-bench on first use) with its test tier, LocalTieredStorage
from kafka-storage's test fixtures jar (a RemoteStorageManager that copies to a directory,
`rsm.config.dir`), and the default TopicBasedRemoteLogMetadataManager. Both remote tiers are
on the same disk as the data, under the bench's temp directory; both brokers run
`remote.log.manager.task.interval.ms` 1000 and `log.retention.check.interval.ms` 1000, and
their tiered topics `remote.storage.enable=true` and 8 MiB segments. The two brokers never
run at the same time.

Produce and consume (one broker):
0. Warm-up (untimed): the records once to a tiered topic, copied, and read back (Kafka's JIT).
1. Produce: R records of S random bytes (confluent-kafka, uncompressed, acks=all, 2 partitions)
   to a plain topic and to a tiered one (`local.retention.bytes` 1), runs alternating; MB/s of
   each (median of the runs; goal: tiered at most 5% lower), and the broker process's CPU
   seconds (utime + stime: all of the JVM's threads for Kafka) from the produce's start until
   every rolled segment is copied, per GB of `.log` bytes in the remote tier.
2. Consume: the same records read from offset 0 by a confluent-kafka consumer: the plain
   topic (local, page cache warm), the tiered one once its local log kept only the active
   segment, after a broker restart (remote, first read: nothing cached by the broker), and
   again (from the reader's cache for logbroker; Kafka has no cache of remote segment bytes,
   LocalTieredStorage reads the files again, from the page cache). MB/s of each (median of
   the runs; goals: remote at least 0.5x local on the first read, 1x from the cache).

    python -m benches.bench_tiered_storage [--broker logbroker|kafka|both] [--records 400000] [--size 500] [--runs 3]

Replacement broker (`--replace`; three nodes, one topic of 3 partitions with replication
factor 3, min.insync.replicas 2): `--history` bytes (records of `--size` bytes, acks=all)
go to a tiered topic whose `local.retention.bytes` keeps about `--local` bytes of it on the
brokers (`--local` / 3 per partition); once every rolled segment is copied and the leaders'
local logs are down to that, node 3 is stopped (SIGTERM), its partition data is deleted, and
it is started again: the time from its start until it is in the ISR of every partition. Then
the same with a fresh cluster and a plain topic of the same history (the replica copies all
of it) as the baseline. Printed: both times (and how much of each went by until the node
listened), the bytes the new replica holds, and tiered / plain (goal: under 0.1).
"Its partition data": on a Kafka node everything in its log.dirs but meta.properties (the
node and directory ids `kafka-storage format` wrote); the Kafka nodes run with a separate
metadata.log.dir, so the metadata log (KRaft: every node is a controller too) survives, as
it would a replaced data disk. A logbroker node keeps its metadata log in its data
directory (the first of log.dirs), so there every partition directory (`<topic>-<partition>`)
is deleted and the metadata log, meta.properties and checkpoint files stay.

    python -m benches.bench_tiered_storage --replace [--broker ...] [--history 1e9] [--local 1e8] [--size 500]
    python -m benches.bench_tiered_storage --replace --history 10e9 --local 1e9   # issue 45's sizes

Not in CI (minutes; the 10 GB replacement needs about 35 GB free under $TMPDIR for the plain
topic's three replicas).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benches.peers.common import client_conf, cpu_seconds, wait_port  # noqa: E402

SEGMENT = 8 << 20
PARTITIONS = 2  # the produce/consume topics
REPLACE_NODES = 3
REPLACE_PARTITIONS = 3  # every node leads one partition before the replaced node stops
VICTIM = 3  # the node replaced
TASK_INTERVALS = {"remote.log.manager.task.interval.ms": "1000", "log.retention.check.interval.ms": "1000"}


class LogbrokerBrokers:
    """n `logbroker serve` processes (logbroker.Cluster), the remote tier a file:// store."""

    name = "logbroker"

    def __init__(self, root: Path, n: int):
        from logbroker import Cluster

        self.root = root
        self.remote = root / "remote"
        config: dict[str, object] = {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.url": self.remote.as_uri(),
            **TASK_INTERVALS,
        }
        if n > 1:
            config["min.insync.replicas"] = 2  # as the Kafka cluster (PeerCluster)
        self.cluster = Cluster(n, data_dir=root / "nodes", config=config)

    def start(self) -> None:
        self.cluster.start(timeout=180)

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def node_bootstrap(self, node_id: int) -> str:
        return self.cluster.node(node_id).bootstrap_servers

    def pid(self, node_id: int) -> int:
        pid = self.cluster.node(node_id).pid
        assert pid is not None
        return pid

    def copied_bytes(self, topic: str) -> int:
        """`.log` bytes in the remote tier (<url>/<topic>-<topic id>/<partition>/<base>-<id>.log)."""
        return sum(f.stat().st_size for f in self.remote.glob(f"{topic}-*/*/*.log"))

    def partition_dir(self, node_id: int, topic: str, partition: int) -> Path:
        return self.cluster.node(node_id).data_dir / f"{topic}-{partition}"

    def restart(self, node_id: int) -> None:
        self.cluster.node(node_id).restart(timeout=180)

    def stop_node(self, node_id: int) -> None:
        self.cluster.node(node_id).stop()

    def delete_partition_data(self, node_id: int) -> None:
        """Every partition directory; the metadata log (`__cluster_metadata-0`), meta.properties
        and the checkpoint files stay (the node's data directory is its metadata directory)."""
        for d in self.cluster.node(node_id).data_dir.iterdir():
            topic, sep, partition = d.name.rpartition("-")
            if d.is_dir() and sep and partition.isdigit() and topic != "__cluster_metadata":
                shutil.rmtree(d)

    def start_node(self, node_id: int) -> None:
        self.cluster.node(node_id).start(timeout=180)

    def stop(self) -> None:
        self.cluster.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class KafkaBrokers:
    """n Kafka 4.4 nodes (PeerCluster of KafkaPeer, KRaft combined mode) with LocalTieredStorage
    in one directory shared by every node, as a remote store is."""

    name = "kafka"

    def __init__(self, root: Path, n: int):
        from benches.peers.common import PeerCluster
        from benches.peers.kafka import LOCAL_TIERED_STORAGE, KafkaPeer, install, install_tier

        inst = install()
        install_tier(inst)
        self.root = root
        self.remote = root / "remote"
        extra = {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
            "remote.log.storage.manager.impl.prefix": "rsm.config.",  # Kafka's default, spelled out
            "rsm.config.dir": str(self.remote),  # LocalTieredStorage writes under <dir>/kafka-tiered-storage/
            "remote.log.metadata.manager.listener.name": "PLAINTEXT",
            "rlmm.config.remote.log.metadata.topic.replication.factor": str(min(n, 3)),
            **TASK_INTERVALS,
        }
        self.cluster = PeerCluster(
            KafkaPeer,
            n,
            root,
            replication_factor=min(n, 3),
            min_insync_replicas=min(n, 2),
            install_info=inst,
            extra=extra,
            extra_classpath=[inst.tier_cp],
            metadata_dir=True,
        )

    def start(self) -> None:
        try:
            self.cluster.start(timeout=300)
        except Exception:
            print(self.cluster.log_tail(), file=sys.stderr)
            raise

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def node(self, node_id: int):
        return self.cluster.nodes[node_id - 1]

    def node_bootstrap(self, node_id: int) -> str:
        return self.node(node_id).bootstrap

    def pid(self, node_id: int) -> int:
        return self.node(node_id).pid

    def copied_bytes(self, topic: str) -> int:
        """`.log` bytes in the remote tier (LocalTieredStorage's layout:
        <dir>/kafka-tiered-storage/<topic>-<partition>-<topic id>/<base offset>-<segment id>.log)."""
        return sum(f.stat().st_size for f in (self.remote / "kafka-tiered-storage").glob(f"{topic}-*/*.log"))

    def partition_dir(self, node_id: int, topic: str, partition: int) -> Path:
        return self.node(node_id).data_dir / f"{topic}-{partition}"

    def restart(self, node_id: int) -> None:
        self.stop_node(node_id)
        self.start_node(node_id)

    def stop_node(self, node_id: int) -> None:
        self.node(node_id).stop(keep_data=True)

    def delete_partition_data(self, node_id: int) -> None:
        """Everything in log.dirs but meta.properties: partition directories and checkpoint
        files (the metadata log is in metadata.log.dir)."""
        for f in self.node(node_id).data_dir.iterdir():
            if f.name == "meta.properties":
                continue
            if f.is_dir():
                shutil.rmtree(f)
            else:
                f.unlink()

    def start_node(self, node_id: int) -> None:
        node = self.node(node_id)
        node.proc = node._launch()
        wait_port("127.0.0.1", node.port, time.monotonic() + 300, node.proc)

    def stop(self) -> None:
        self.cluster.stop()
        shutil.rmtree(self.root, ignore_errors=True)


BROKERS = {"logbroker": LogbrokerBrokers, "kafka": KafkaBrokers}


def produce(bs: str, topic: str, values: list[bytes], count: int, partitions: int) -> float:
    """Seconds to produce and acknowledge `count` records (values[i % len(values)] to
    partition i % partitions)."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bs,
            "linger.ms": 5,
            "batch.size": 262144,
            "acks": "all",
            "compression.type": "none",
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    n = len(values)
    t0 = time.monotonic()
    for i in range(count):
        while True:
            try:
                p.produce(topic, values[i % n], partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    assert p.flush(600) == 0
    return time.monotonic() - t0


def consume(bs: str, topic: str, n: int) -> float:
    """Seconds to read n records of the topic's partitions from offset 0, from the first
    record received (the consumer's start and its first round trip left out: they would
    swamp a read of a few hundred MB)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"bench-{topic}-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 8388608,
            "auto.offset.reset": "error",  # an offset out of range fails the run instead of skipping records
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    t0, first = 0.0, 0
    deadline = time.monotonic() + 600
    while got < n:
        assert time.monotonic() < deadline, f"read {got} of {n}"
        batch = c.consume(10000, 1.0)
        for m in batch:
            assert m.error() is None, m.error()
        if batch and not first:
            t0, first = time.monotonic(), len(batch)  # the clock starts after the first batch
        got += len(batch)
    took = time.monotonic() - t0
    c.close()
    return took * n / (n - first)  # as if the first batch had come at the same rate


def offsets(bs: str, topic: str, spec: str, partitions: int = PARTITIONS) -> list[int]:
    """ListOffsets of every partition; "latest_tiered" (-5) and "earliest_local" (-4) are
    KIP-1005's, which Kafka 4.x answers too."""
    from logbroker import Admin, TopicPartition

    with Admin(bs) as admin:
        r = admin.list_offsets({(topic, p): spec for p in range(partitions)})
        return [r[TopicPartition(topic, p)][0] for p in range(partitions)]


def leaders(bs: str, topic: str) -> dict[int, int]:
    """{partition: leader node id} from Metadata."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient(client_conf(bs)).list_topics(topic, timeout=30)
    return {p: m.leader for p, m in md.topics[topic].partitions.items()}


def active_base(d: Path) -> int:
    """The base offset of the partition directory's last (active) segment."""
    return max(int(f.stem) for f in d.glob("*.log"))


def local_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.glob("*.log"))


def wait_for(what: str, ok, timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.2)


def copied_up_to_active(b, topic: str, partitions: int) -> bool:
    """Every rolled segment of every partition's leader is copied: the last offset in the
    remote tier is the one before the active segment (-1 with nothing rolled)."""
    lead = leaders(b.bootstrap, topic)
    tiered = offsets(b.bootstrap, topic, "latest_tiered", partitions)
    return all(tiered[p] + 1 == active_base(b.partition_dir(lead[p], topic, p)) for p in range(partitions))


def create_topic(bs: str, topic: str, partitions: int, rf: int, config: dict[str, str]) -> None:
    """Create the topic and wait until every partition has a leader and all replicas in sync."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_conf(bs))
    admin.create_topics([NewTopic(topic, partitions, rf, config=config)])[topic].result(60)

    def ready() -> bool:
        t = admin.list_topics(topic, timeout=30).topics.get(topic)
        return (
            t is not None
            and t.error is None
            and len(t.partitions) == partitions
            and all(p.leader >= 0 and len(p.isrs) == rf for p in t.partitions.values())
        )

    wait_for(f"{topic} created with every replica in sync", ready, 120)


def workload(b, args, values: list[bytes], mb: float) -> dict[str, float]:
    """Produce and consume on one started broker; the medians of the runs."""
    res: dict[str, list[float]] = {k: [] for k in ("produce_plain", "produce_tiered", "cpu_per_gb_copied")}
    reads: dict[str, list[float]] = {k: [] for k in ("local", "remote_first", "remote_cached")}
    bs = b.bootstrap
    # untimed: the records once to a tiered topic, copied, and read back, so that run 0 and
    # its CPU do not count the JVM's JIT compiling Kafka's produce, copy and fetch paths (the
    # same for logbroker)
    create_topic(bs, "warmup", PARTITIONS, 1, {"segment.bytes": str(SEGMENT), "remote.storage.enable": "true"})
    produce(bs, "warmup", values, len(values), PARTITIONS)
    wait_for("warmup: every rolled segment copied", lambda: copied_up_to_active(b, "warmup", PARTITIONS))
    consume(bs, "warmup", len(values))
    for r in range(args.runs):
        for kind in ("plain", "tiered") if r % 2 == 0 else ("tiered", "plain"):  # neither always first
            topic = f"{kind}_{r}"
            conf = {"segment.bytes": str(SEGMENT), "retention.ms": "-1"}
            if kind == "tiered":
                conf |= {"remote.storage.enable": "true", "local.retention.bytes": "1"}
            create_topic(bs, topic, PARTITIONS, 1, conf)
            cpu0 = cpu_seconds(b.pid(1))
            res[f"produce_{kind}"].append(mb / produce(bs, topic, values, len(values), PARTITIONS))
            if kind == "tiered":
                wait_for(f"{topic}: every rolled segment copied", lambda t=topic: copied_up_to_active(b, t, PARTITIONS))
                copied = b.copied_bytes(topic)
                cpu = cpu_seconds(b.pid(1)) - cpu0
                res["cpu_per_gb_copied"].append(cpu / (copied / 1e9) if copied else float("nan"))
        print(
            f"{b.name} run {r}: produce plain {res['produce_plain'][-1]:.1f} MB/s, tiered "
            f"{res['produce_tiered'][-1]:.1f} MB/s, CPU per GB copied {res['cpu_per_gb_copied'][-1]:.2f} s",
            flush=True,
        )
    for r in range(args.runs):
        reads["local"].append(mb / consume(bs, f"plain_{r}", len(values)))
    tiered_topics = [f"tiered_{r}" for r in range(args.runs)]
    for topic in tiered_topics:  # the local log keeps only the active segment (Kafka: its first
        # retention pass waits log.initial.task.delay.ms, 30 s, after the broker's start)

        def trimmed(t=topic) -> bool:
            tiered, local = offsets(bs, t, "latest_tiered"), offsets(bs, t, "earliest_local")
            return all(lo == ti + 1 for ti, lo in zip(tiered, local))

        wait_for(f"{topic}: only the active segment local", trimmed)
    before = {t: offsets(bs, t, "latest_tiered") for t in tiered_topics}
    b.restart(1)  # nothing remote cached
    bs = b.bootstrap

    def serving() -> bool:
        # leaders elected and each partition's remote log metadata loaded (Kafka: the
        # metadata topic's consumer caught up) before anything is timed
        try:
            return all(offsets(bs, t, "latest_tiered") == v for t, v in before.items())
        except Exception:  # noqa: BLE001 - not serving yet
            return False

    wait_for("the restarted broker serves every tiered partition", serving, 300)
    for r in range(args.runs):
        reads["remote_first"].append(mb / consume(bs, f"tiered_{r}", len(values)))
        reads["remote_cached"].append(mb / consume(bs, f"tiered_{r}", len(values)))
    return {k: statistics.median(v) for k, v in (res | reads).items()}


def replace_once(b, args, pool: list[bytes], tiered: bool) -> tuple[float, float, int]:
    """On a started 3-node cluster: the history, then node VICTIM replaced; (seconds from its
    start to in the ISR of every partition, of those until it listened, `.log` bytes it holds
    then)."""
    topic = "history"
    conf = {"segment.bytes": str(SEGMENT), "retention.ms": "-1"}
    local_per_partition = int(args.local) // REPLACE_PARTITIONS
    if tiered:
        conf |= {"remote.storage.enable": "true", "local.retention.bytes": str(local_per_partition)}
    create_topic(b.bootstrap, topic, REPLACE_PARTITIONS, REPLACE_NODES, conf)
    count = int(args.history) // args.size
    took = produce(b.bootstrap, topic, pool, count, REPLACE_PARTITIONS)
    print(f"{b.name}: {count * args.size / 1e9:.2f} GB produced in {took:.1f} s", flush=True)
    if tiered:

        def settled() -> bool:
            # every rolled segment copied and the leaders' local logs down to local.retention.bytes
            # (Kafka deletes while a whole segment fits above it: at most one segment more)
            lead = leaders(b.bootstrap, topic)
            return copied_up_to_active(b, topic, REPLACE_PARTITIONS) and all(
                local_bytes(b.partition_dir(lead[p], topic, p)) <= local_per_partition + SEGMENT
                for p in range(REPLACE_PARTITIONS)
            )

        wait_for("history copied and local logs trimmed", settled, 3600)
    from confluent_kafka.admin import AdminClient

    # Metadata from node 1 (never the replaced node): its ISRs are what the controller committed
    admin = AdminClient(client_conf(b.node_bootstrap(1)))

    def in_sync(node_id: int) -> bool:
        parts = admin.list_topics(topic, timeout=30).topics[topic].partitions.values()
        return len(parts) == REPLACE_PARTITIONS and all(node_id in p.isrs for p in parts)

    wait_for(f"node {VICTIM} in every ISR before it is replaced", lambda: in_sync(VICTIM), 600)
    b.stop_node(VICTIM)
    b.delete_partition_data(VICTIM)
    t0 = time.monotonic()
    b.start_node(VICTIM)
    listening = time.monotonic() - t0
    wait_for(f"the replaced node {VICTIM} back in every ISR", lambda: in_sync(VICTIM), 3600)
    took = time.monotonic() - t0
    held = sum(local_bytes(b.partition_dir(VICTIM, topic, p)) for p in range(REPLACE_PARTITIONS))
    return took, listening, held


def replace(name: str, args, pool: list[bytes], root: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for kind in ("tiered", "plain"):  # a fresh cluster each: the plain run copies nothing else
        b = BROKERS[name](root / f"{name}-replace-{kind}", REPLACE_NODES)
        b.start()
        try:
            took, listening, held = replace_once(b, args, pool, kind == "tiered")
        finally:
            b.stop()
        print(
            f"{name}: replaced node in sync after {took:.1f} s ({kind}; listening after {listening:.1f} s; "
            f"it holds {held / 1e9:.2f} GB)",
            flush=True,
        )
        out[kind], out[f"{kind}_listening"], out[f"{kind}_gb"] = took, listening, held / 1e9
    return out


def print_workload(name: str, args, mb: float, m: dict[str, float]) -> None:
    print(
        f"\n{name}: {args.records} records of {args.size} B ({mb:.0f} MB), {args.runs} runs, medians:\n"
        f"produce: plain {m['produce_plain']:.1f} MB/s, tiered {m['produce_tiered']:.1f} MB/s "
        f"({m['produce_tiered'] / m['produce_plain']:.2f}x)\n"
        f"broker CPU per GB copied (produce + copy): {m['cpu_per_gb_copied']:.2f} s\n"
        f"consume from offset 0: local {m['local']:.1f} MB/s, remote first read {m['remote_first']:.1f} MB/s "
        f"({m['remote_first'] / m['local']:.2f}x), remote cached {m['remote_cached']:.1f} MB/s "
        f"({m['remote_cached'] / m['local']:.2f}x)",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.bench_tiered_storage")
    ap.add_argument("--broker", choices=("logbroker", "kafka", "both"), default="both")
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--size", type=int, default=500, help="record size in bytes")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--replace", action="store_true", help="measure the replacement broker instead")
    ap.add_argument("--history", type=float, default=1e9, help="--replace: bytes produced")
    ap.add_argument("--local", type=float, default=None, help="--replace: bytes kept locally (default history/10)")
    args = ap.parse_args(argv)
    if args.local is None:
        args.local = args.history / 10
    names = ["logbroker", "kafka"] if args.broker == "both" else [args.broker]
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tiered-") as tmp:
        root = Path(tmp)
        if args.replace:
            # 64 MiB of distinct random values, cycled: incompressible, without 10 GB in memory
            blob = os.urandom(max(args.size, (64 << 20) // args.size * args.size))
            pool = [blob[i : i + args.size] for i in range(0, len(blob), args.size)]
            for name in names:
                results[name] = replace(name, args, pool, root)
        else:
            blob = os.urandom(args.records * args.size)  # incompressible: the bytes on disk are the bytes sent
            values = [blob[i * args.size : (i + 1) * args.size] for i in range(args.records)]
            mb = sum(map(len, values)) / 1e6
            for name in names:
                b = BROKERS[name](root / name, 1)
                b.start()
                try:
                    results[name] = workload(b, args, values, mb)
                finally:
                    b.stop()
    if args.replace:
        print(
            f"\nreplacement broker: {REPLACE_NODES} nodes, {REPLACE_PARTITIONS} partitions with replication "
            f"factor {REPLACE_NODES}, history {args.history / 1e9:.2f} GB, local {args.local / 1e9:.2f} GB, "
            f"time from the replaced node's start to in the ISR of every partition:"
        )
        for name, m in results.items():
            print(
                f"{name}: tiered {m['tiered']:.1f} s (listening after {m['tiered_listening']:.1f} s, holds "
                f"{m['tiered_gb']:.2f} GB), full copy {m['plain']:.1f} s (listening after "
                f"{m['plain_listening']:.1f} s, holds {m['plain_gb']:.2f} GB): {m['tiered'] / m['plain']:.3f}x "
                f"(goal under 0.1)"
            )
    else:
        for name, m in results.items():
            print_workload(name, args, mb, m)
    if len(results) == 2:
        lb, kf = results["logbroker"], results["kafka"]
        ratios = ", ".join(f"{k} {lb[k] / kf[k]:.2f}x" for k in lb if kf.get(k))
        print(f"\nlogbroker / kafka (MB/s: higher is better; CPU, seconds: lower): {ratios}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
