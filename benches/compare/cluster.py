"""Three nodes against three nodes: a logbroker cluster and an Apache Kafka cluster (KRaft,
every node a broker and a controller, a static voter set) on this machine, with replication
factor 3, min.insync.replicas=2 and acks=all.

    python -m benches.compare --cluster            # 3 pairs (~25 min): docs/benchmarks.md, cluster section
    python -m benches.compare --cluster --quick    # 1 pair, small volumes: benches/.results/cluster-quick/

Each pair starts the logbroker cluster fresh, warms it up, runs every workload on it and
stops it; then the same for the Kafka cluster (A B A B ...). The two clusters never run at
the same time: six brokers at once would leave the cluster under test sharing two cores
with three idle ones.

Workloads (the single-node comparison's load generators, benches/compare/loadgen.py):
produce with kafka-producer-perf-test and confluent-kafka (100 B and 1 KiB records, 1 and 8
partitions, acks=all with the idempotent producer), and end-to-end latency with acks=all (a
record is delivered to the consumer only once the ISR has it). A cluster's CPU and RSS are
the sums over its three broker processes; the smallest ISR of the topic right after each
run is recorded, so a run in which a follower fell out of the ISR shows.
"""

from __future__ import annotations

import time
from dataclasses import replace

from benches.compare import loadgen
from benches.compare.run import BROKERS, PARTS, SIZES, Comparison, Profile, Sample, Step
from benches.peers.common import PeerCluster, delete_topic
from benches.peers.kafka import KafkaPeer
from benches.peers.logbroker import LogbrokerPeer

NODES = 3
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2
CLIENTS = ("java", "ck")

CLUSTER_FULL = Profile(
    "cluster",
    pairs=3,
    java_records={100: 2_000_000, 1024: 300_000},
    ck_records={100: 1_000_000, 1024: 300_000},
    consume_bytes=0,
    profile=False,
    warmup_records=300_000,
    e2e_seconds=12.0,
    e2e_skip=5000,
)
CLUSTER_QUICK = replace(
    CLUSTER_FULL,
    name="cluster-quick",
    pairs=1,
    java_records={100: 500_000, 1024: 100_000},
    ck_records={100: 300_000, 1024: 100_000},
    e2e_seconds=4.0,
    e2e_skip=5000,
    idle_wait=2.0,
    warmup_records=100_000,
)


class ClusterComparison(Comparison):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.replication_factor = REPLICATION_FACTOR
        self.e2e_acks = "all"
        self.meta["nodes"] = NODES
        self.meta["replication_factor"] = REPLICATION_FACTOR
        self.meta["min_insync_replicas"] = MIN_INSYNC_REPLICAS

    def _new_peer(self, broker: str) -> PeerCluster:
        kw = {"install_info": self.inst} if broker == "kafka" else {}
        return PeerCluster(
            KafkaPeer if broker == "kafka" else LogbrokerPeer,
            NODES,
            self.data_root,
            self.p.segment_bytes,
            REPLICATION_FACTOR,
            MIN_INSYNC_REPLICAS,
            **kw,
        )

    def plan(self) -> list[Step]:
        p = self.p
        steps = [Step("install Kafka (Maven Central, cached)", self.step_install, 1)]
        for i in range(p.pairs):
            for b in BROKERS:
                steps.append(Step(f"start {NODES} {b} nodes #{i + 1}", lambda b=b, i=i: self.step_start(b, i), 2))
                steps.append(Step(f"warm-up {b} #{i + 1}", lambda b=b: self.step_warmup_cluster(b), 2))
                for client in CLIENTS:
                    for size in SIZES:
                        for parts in PARTS:
                            steps.append(
                                Step(
                                    f"produce {client} {size}B acks=all p={parts}: {b} #{i + 1}",
                                    lambda c=client, s=size, n=parts, b=b, i=i: self.step_produce(c, s, "all", n, b, i),
                                )
                            )
                for variant in ("main", "requests"):
                    steps.append(
                        Step(
                            f"end-to-end latency ({variant}): {b} #{i + 1}",
                            lambda v=variant, b=b, i=i: self.step_e2e(v, b, i),
                            max(1.0, p.e2e_seconds / 3),
                        )
                    )
                steps.append(Step(f"stop {b} nodes #{i + 1}", self.step_stop_both, 1))
        return steps

    def step_install(self) -> None:
        super().step_install()
        for b in BROKERS:  # the settings of node 1, as its voter set names the three
            node = self._new_peer(b).nodes[0]
            node.voters = ",".join(f"{n}@127.0.0.1:<port {n}>" for n in range(1, NODES + 1))
            self.meta[f"{b}_settings"] = node.settings()

    def step_start(self, broker: str, pair: int) -> None:
        """Start the cluster (recorded: spawn -> first acks=all produce to a replication-factor-3
        topic, and the three processes' RSS once idle) and keep it for this pair's runs."""
        self.step_stop_both()
        cluster = self._new_peer(broker)
        cluster.prepare()  # for Kafka: the storage format of every node (timed apart)
        try:
            cold = cluster.start()
        except Exception:
            self.log(cluster.log_tail())
            raise
        self.peers[broker] = cluster
        extra = {"listening_s": cluster.t_listening - cluster.t_spawn, "format_s": cluster.t_format}
        config = f"spawn -> first acked produce, {NODES} nodes"
        self.samples.append(Sample("coldstart", "confluent-kafka", config, broker, pair, cold, "s", extra))
        time.sleep(self.p.idle_wait)
        self.samples.append(
            Sample(
                "idle_rss",
                "-",
                f"{self.p.idle_wait:g} s after ready, sum of {NODES} nodes",
                broker,
                pair,
                cluster.rss() / 1e6,
                "MB",
                {"cpu_s": cluster.cpu()},
            )
        )

    def step_warmup_cluster(self, broker: str) -> None:
        """Untimed: JIT-warm Kafka and both clusters' replication paths (`warmup_records` x
        1 KiB with acks=all, read back), and a short run of each latency workload."""
        peer = self.peers[broker]
        t = self._topic("warm")
        self._create(peer, t, 1)
        loadgen.java_produce(self.inst, peer.bootstrap, t, 1024, self.p.warmup_records, "all")
        loadgen.ck_consume(peer.bootstrap, t, 1, self.p.warmup_records)
        delete_topic(peer.bootstrap, t)
        for variant in ("main", "requests"):
            rate, linger = self._e2e_params(variant)
            t = self._topic("e2e-warm")
            self._create(peer, t, 1)
            try:
                loadgen.e2e(peer.bootstrap, t, rate, 2.0, self.p.e2e_size, 0, acks="all", linger_ms=linger)
            except loadgen.LoadError as e:
                self.log(f"latency warm-up on {broker}: {e}")
            delete_topic(peer.bootstrap, t)
