"""The control plane at scale, logbroker beside Apache Kafka (issue 29): how the cost of
metadata work grows with the partitions that exist.

    python -m benches.compare.scale                       # 10,000 partitions, one node, both brokers
    python -m benches.compare.scale --partitions 50000 --nodes 3 --brokers logbroker,kafka
    python -m benches.compare.scale --quick               # 2,000 partitions (the CI smoke)
    python -m benches.compare.scale --growth --partitions 3000 --nodes 1,3 --brokers logbroker
                                                          # the growth ratios only (the CI guard)

Per broker and shape (one node; or three with replication factor 3), on a fresh data
directory:
- CreateTopics: confluent-kafka's AdminClient creates topics of `--partitions-per-topic`
  partitions in batches of `--batch-topics` until `--partitions` exist; the time of every
  batch is kept, and the table shows the first and the last batch per topic created and
  their ratio (1.0: the cost does not grow with what exists).
- a full Metadata response (AdminClient.list_topics of every topic), median of 3;
- RSS and open file descriptors of the broker process(es) with every partition created;
- idle CPU: the share of one core the broker process(es) use together over `--idle-seconds`
  (20), starting `--idle-after` (15) seconds after the last CreateTopics, with no client
  traffic (follower fetch loops, ISR checks, checkpoints, heartbeats; a JVM just started
  still compiles and collects for a while, hence the wait);
- restart to every partition writable: SIGTERM (the clean shutdown waited for up to
  STOP_SECONDS, its time kept apart), start again, then one acks=1 record to every partition
  in Produce requests of 1,000 partitions (`produce_everywhere`, a probe whose cost per
  partition does not grow); the time from the spawn until the last is acknowledged (and,
  apart, until the client port accepts connections);
- on three nodes, controller failover: SIGKILL the metadata quorum's leader (DescribeQuorum),
  then the time until a CreateTopics sent to the survivors succeeds (the killed node is
  started again afterwards and the cluster waits for it);
- on three nodes, a new broker catching up: a fourth node, broker only, joins through the
  voters; the time from its spawn until its own Metadata response lists every topic and
  itself, and (apart) until another node's lists it (registered and unfenced).

Before each run the harness waits (up to `--settle-seconds`) until a probe of 300 mkdirs runs
at the file system's quiet speed again: on this machine a burst of file creation and
deletion slows later mkdirs tenfold for minutes, which would charge one broker for the
previous one's run. Results go to benches/.results/scale-<shape>.json and are printed as a markdown table for
docs/benchmarks.md. Kafka is installed by benches.peers.kafka (Maven Central).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from benches.peers.common import PeerCluster, client_conf, wait_port
from benches.peers.kafka import KafkaPeer
from benches.peers.logbroker import LogbrokerPeer
from logbroker import _core
from logbroker.client.connection import BrokerConnection
from logbroker.protocol import REQUESTS

RESULTS = Path(__file__).resolve().parents[1] / ".results"
PEERS = {"logbroker": LogbrokerPeer, "kafka": KafkaPeer}
# growth: the node a round restarts snapshots its metadata this long after records come
# (Kafka's metadata.log.max.snapshot.interval.ms), longer than a restart takes, and the round
# waits for that snapshot (the line the node logs) before restarting it again
# restart_to_writable: how long a node's clean shutdown is waited for before SIGKILL (longer
# than the harness's usual 30 s: at 50,000 partitions logbroker's takes about a minute on this
# machine, docs/benchmarks.md, and a kill would turn the restart into a recovery of every log)
STOP_SECONDS = 180
SNAPSHOT_INTERVAL = ("metadata.log.max.snapshot.interval.ms", "10000")
SNAPSHOT_LOGGED = b"the log before it is dropped"  # the line a snapshot taken logs (metadata_quorum.py)


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def thread_cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of every live thread of the processes `pids`, from each thread's schedstat
    (nanoseconds; /proc/<pid>/stat counts 10 ms ticks, too coarse for a batch that costs
    tens of ms). A thread that exits takes its time with it: for the broker's long-lived
    threads only."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # the thread exited meanwhile
    return total / 1e9


def create_batches(
    bootstrap: str, total: int, per_topic: int, batch_topics: int, rf: int, made: int = 0, cpu=None
) -> list[tuple[int, float]]:
    """Create topics until `total` partitions exist (`made` already do); (topics in the batch,
    seconds) per batch: wall-clock seconds, or with `cpu` (a function returning the broker
    processes' CPU seconds) the CPU seconds the batch cost them."""
    admin = AdminClient({**client_conf(bootstrap), "socket.timeout.ms": 120_000})
    clock = cpu or time.monotonic
    out = []
    while made < total:
        n = min(batch_topics, (total - made) // per_topic) or 1
        base = made // per_topic
        topics = [NewTopic(f"scale-{base + i:06d}", per_topic, rf) for i in range(n)]
        t0 = clock()
        futures = admin.create_topics(topics, operation_timeout=120, request_timeout=180)
        for f in futures.values():
            f.result(timeout=240)
        out.append((n, clock() - t0))
        made += n * per_topic
    return out


def metadata_seconds(bootstrap: str, topics: int) -> float:
    """A full Metadata response's time, median of 3, once every topic shows (Kafka's brokers
    apply the controller's records after CreateTopics answers, so they may lag a moment)."""
    admin = AdminClient(client_conf(bootstrap))
    deadline = time.monotonic() + 120
    while len([t for t in admin.list_topics(timeout=120).topics if t.startswith("scale-")]) < topics:
        if time.monotonic() > deadline:
            raise TimeoutError(f"not every one of {topics} topics shows in Metadata after 120 s")
        time.sleep(0.5)
    times = []
    for _ in range(3):
        t0 = time.monotonic()
        md = admin.list_topics(timeout=120)
        times.append(time.monotonic() - t0)
        assert len([t for t in md.topics if t.startswith("scale-")]) == topics, len(md.topics)
    return statistics.median(times)


def wait_led(bootstrap: str, topics: int, per_topic: int, deadline: float) -> None:
    """Until a full Metadata response shows a leader for every partition of the `scale-`
    topics: a producer started before a restarting broker serves them retries with
    librdkafka's back-off per topic, and with thousands of topics its own metadata handling
    (not the broker) then sets the time to writable."""
    admin = AdminClient(client_conf(bootstrap))
    while True:
        try:
            md = admin.list_topics(timeout=max(1.0, deadline - time.monotonic()))
            led = sum(
                1
                for name, t in md.topics.items()
                if name.startswith("scale-")
                for q in t.partitions.values()
                if q.leader >= 0
            )
        except KafkaException:
            led = -1
        if led >= topics * per_topic:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{led} of {topics * per_topic} partitions led in time")
        time.sleep(0.2)


def produce_everywhere(
    bootstrap: str, topics: int, per_topic: int, deadline: float, first: int = 0, per_request: int = 1000
) -> None:
    """One record to every partition of topics `first`..`topics`-1 (acks=1), retried until
    each is acknowledged. The probe speaks the protocol itself: Produce v12 requests of up to
    `per_request` partitions each, to each partition's leader from a full Metadata response,
    one connection per broker, so the probe's cost per partition does not grow with the
    topics that exist (librdkafka's does: at 25,000 partitions one record to each took 48 s
    on a warm broker that spent 7.5 s of CPU on it, docs/benchmarks.md). The same bytes go
    to both brokers: one record batch, no producer id."""
    records = _core.encode_batch([(None, b"x", 0, [])], base_timestamp=int(time.time() * 1000))
    pending = {(f"scale-{t:06d}", q) for t in range(first, topics) for q in range(per_topic)}
    conns: dict[int, BrokerConnection] = {}
    try:
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} partition(s) not writable in time, e.g. {min(pending)}")
            leaders, addresses = _leaders(bootstrap, {t for t, _ in pending})
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for tp in sorted(pending):
                leader = leaders.get(tp, -1)
                if leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            for leader, tps in by_leader.items():
                if leader not in conns:
                    conns[leader] = BrokerConnection(addresses[leader], client_id="scale-probe", timeout=120)
                for i in range(0, len(tps), per_request):
                    pending -= _produce_one_each(conns[leader], tps[i : i + per_request], records)
            if pending:
                time.sleep(0.2)
    finally:
        for conn in conns.values():
            conn.close()


def _leaders(bootstrap: str, topics: set[str]) -> tuple[dict[tuple[str, int], int], dict[int, str]]:
    """((topic, partition) -> leader id, broker id -> "host:port") from one full Metadata
    response (v12, topic names)."""
    with BrokerConnection(bootstrap, client_id="scale-probe", timeout=120) as conn:
        md = conn.send(REQUESTS[3](topics=None, allow_auto_topic_creation=False), version=12)
    addresses = {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}
    leaders = {(t.name, q.partition_index): q.leader_id for t in md.topics if t.name in topics for q in t.partitions}
    return leaders, addresses


def _produce_one_each(conn: BrokerConnection, tps: list[tuple[str, int]], records: bytes) -> set[tuple[str, int]]:
    """One Produce request with `records` for each of `tps`: the partitions acknowledged."""
    Produce = REQUESTS[0]
    by_topic: dict[str, list[int]] = {}
    for topic, q in tps:
        by_topic.setdefault(topic, []).append(q)
    req = Produce(
        transactional_id=None,
        acks=1,
        timeout_ms=30_000,
        topic_data=[
            Produce.TopicProduceData(
                name=topic, partition_data=[Produce.PartitionProduceData(index=q, records=records) for q in qs]
            )
            for topic, qs in by_topic.items()
        ],
    )
    resp = conn.send(req, version=12)
    return {(t.name, q.index) for t in resp.responses for q in t.partition_responses if q.error_code == 0}


def mkdir_micros(probe_dir: Path, n: int = 300) -> float:
    """Mean µs of a mkdir in `probe_dir` (a fresh subdirectory, removed afterwards)."""
    d = probe_dir / f"mkdir-probe-{os.getpid()}"
    d.mkdir(parents=True)
    t0 = time.monotonic()
    for i in range(n):
        (d / f"p{i}").mkdir()
    us = (time.monotonic() - t0) / n * 1e6
    for i in range(n):
        (d / f"p{i}").rmdir()
    d.rmdir()
    return us


def settle_disk(probe_dir: Path, limit_s: float, fast_us: float = 100.0) -> float:
    """Wait, up to `limit_s`, until the file system creates directories at its quiet speed
    again: a burst of file creation and deletion (the previous broker's run) slows every
    later mkdir on this machine for minutes, and the next broker would pay for it. Returns
    the last probe's µs per mkdir."""
    os.sync()
    deadline = time.monotonic() + limit_s
    us = mkdir_micros(probe_dir)
    while us > fast_us and time.monotonic() < deadline:
        time.sleep(5)
        us = mkdir_micros(probe_dir)
    return us


def idle_cpu_share(peer, seconds: float, after: float = 15) -> float:
    """The share of one core the broker process(es) use over `seconds` with no client traffic,
    from `after` seconds on."""
    time.sleep(after)
    before = peer.cpu()
    time.sleep(seconds)
    return (peer.cpu() - before) / seconds


def quorum_leader(bootstrap: str) -> int:
    """The metadata quorum's leader (DescribeQuorum, as `logbroker cluster status` asks it;
    a Kafka broker forwards it to the controllers)."""
    from logbroker.admin_views import describe_quorum
    from logbroker.client import BrokerConnection

    with BrokerConnection(bootstrap.split(",")[0], client_id="scale-bench", timeout=10) as conn:
        return describe_quorum(conn)["leader_id"]


def controller_failover_seconds(peer, deadline_s: float = 300) -> float:
    """SIGKILL the quorum leader; seconds until a CreateTopics to the survivors succeeds. Each
    attempt uses a new client: librdkafka sends CreateTopics to the controller its cached
    Metadata names (a Kafka broker names a random live broker, possibly the killed one until
    it is fenced) and refreshes that cache only every 5 minutes."""
    leader = quorum_leader(peer.bootstrap)
    victim = next(n for n in peer.nodes if n.node_id == leader)
    survivors = ",".join(n.bootstrap for n in peer.nodes if n is not victim)
    t0 = time.monotonic()
    victim.proc.kill()
    victim.proc.wait()
    i = 0
    while time.monotonic() - t0 < deadline_s:
        i += 1
        admin = AdminClient(client_conf(survivors))
        try:
            admin.create_topics([NewTopic(f"failover-{i}", 1, 1)], request_timeout=5)[f"failover-{i}"].result(10)
            took = time.monotonic() - t0
            break
        except Exception:  # noqa: BLE001 - not yet: no controller, or the request timed out
            time.sleep(0.05)
    else:
        raise TimeoutError(f"no CreateTopics succeeded within {deadline_s} s of killing node {leader}")
    victim.t_spawn = time.monotonic()
    victim.proc = victim._launch()
    wait_port("127.0.0.1", victim.port, time.monotonic() + 600, victim.proc)
    return took


def new_broker_seconds(peer, topics: int, deadline_s: float = 600) -> tuple[float, float]:
    """A fourth node, broker only, joins: (spawn to its own Metadata listing every topic and
    itself, spawn to another node's Metadata listing it)."""
    node = peer.add_broker()
    others = AdminClient(client_conf(peer.nodes[0].bootstrap))
    registered = caught_up = None
    own = None
    while time.monotonic() - node.t_spawn < deadline_s and (registered is None or caught_up is None):
        try:
            if registered is None and node.node_id in others.list_topics(timeout=5).brokers:
                registered = time.monotonic() - node.t_spawn  # when the answer listing it came
            if caught_up is None:
                if own is None:
                    wait_port("127.0.0.1", node.port, time.monotonic() + 600, node.proc)
                    own = AdminClient(client_conf(node.bootstrap))
                md = own.list_topics(timeout=5)
                if node.node_id in md.brokers and len(md.topics) >= topics:
                    caught_up = time.monotonic() - node.t_spawn
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.05)
    if registered is None or caught_up is None:
        raise TimeoutError(f"the new broker did not catch up within {deadline_s} s")
    return caught_up, registered


def _wait_exit(proc, deadline: float) -> bool:
    """Whether `proc` exited before `deadline`."""
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
        return True
    except subprocess.TimeoutExpired:
        return False


def restart_to_writable(peer, nodes: int, topics: int, per_topic: int, deadline_s: float = 600) -> tuple[float, float]:
    """SIGTERM every node, start them again on the same data, then one acks=1 record to every
    partition: (seconds from the first spawn until the last is acknowledged, CPU seconds the
    node processes used in that time). The shutdown is waited for up to `STOP_SECONDS` (a
    SIGKILL would make the restart a recovery of every log); each node keeps its time as
    `t_shutdown` and whether it had to be killed as `shutdown_killed`."""
    members = peer.nodes if nodes > 1 else [peer]
    t_term = time.monotonic()
    for node in members:  # signal every node first: they shut down together
        node.proc.terminate()
    for node in members:
        node.shutdown_killed = not _wait_exit(node.proc, t_term + STOP_SECONDS)
        node.t_shutdown = time.monotonic() - t_term
        node.stop(keep_data=True)
    t0 = time.monotonic()
    for node in members:
        node.t_spawn = time.monotonic()
        node.proc = node._launch()
    for node in members:
        wait_port("127.0.0.1", node.port, t0 + deadline_s, node.proc)
        node.t_listening = time.monotonic()
    wait_led(peer.bootstrap, topics, per_topic, t0 + deadline_s)
    produce_everywhere(peer.bootstrap, topics, per_topic, t0 + deadline_s)
    return time.monotonic() - t0, peer.cpu()


def rolling_restart_to_in_sync(peer, topics: int, per_topic: int, deadline_s: float = 600) -> tuple[float, float]:
    """SIGTERM the last node of a cluster, start it again on the same data, and wait until
    every partition of the `topics` scale topics has it in its ISR again (Metadata from the
    first node): (seconds from the spawn, CPU seconds of the restarted node in that time)."""
    node = peer.nodes[-1]
    node.stop(keep_data=True)
    admin = AdminClient(client_conf(peer.nodes[0].bootstrap))
    t0 = time.monotonic()
    node.t_spawn = t0
    node.proc = node._launch()
    while True:
        cpu = node.cpu()
        md = admin.list_topics(timeout=60)
        parts = [p for name, t in md.topics.items() if name.startswith("scale-") for p in t.partitions.values()]
        if len(parts) == topics * per_topic and all(node.node_id in p.isrs for p in parts):
            return time.monotonic() - t0, cpu
        if time.monotonic() - t0 > deadline_s:
            raise TimeoutError(f"node {node.node_id} not back in every ISR within {deadline_s} s")
        time.sleep(0.2)


def wait_snapshot(node, deadline: float) -> None:
    """Until the logbroker node has logged a metadata snapshot since it last started (its log
    files start anew at each launch)."""
    while not any(SNAPSHOT_LOGGED in f.read_bytes() for f in node.workdir.glob("*.log")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"node {node.node_id}: no metadata snapshot logged since it started\n{node.log_tail()}")
        time.sleep(0.2)


def growth(
    name: str, nodes: int, total: int, per_topic: int = 5, batch_topics: int = 20, edge: int = 5, repeat: int = 5
) -> dict:
    """How the cost of metadata work grows with what exists, as ratios measured within one run
    (noise on a shared machine moves times, much less ratios of neighbouring times):
    - create: topics are created in batches until `total` partitions exist; the CPU seconds
      per topic the broker processes spend on a batch (`thread_cpu_seconds`), the median of
      the last `edge` batches over that of the first `edge`. 1.0: a new topic costs the same
      whatever exists; a per-partition cost that grows with the partitions that exist (a
      placement that counts every replica) shows as a ratio well above 1. CPU, not wall
      time: under parallel tests the wall time of a batch follows the machine's load.
    - restart: the CPU seconds a restart costs with a tenth, half and all of `total`
      partitions, each size in a cluster of its own: on one node, to every partition
      writable again (`restart_to_writable`); on three, a rolling restart of one node until
      it is back in every ISR (`rolling_restart_to_in_sync`, the restarted node's CPU; a
      restart of all three at once spends a varying time, and CPU, on elections). One
      restart after creating is not counted: it replays the creation's records, and from it
      logbroker's restarting node snapshots its metadata some seconds after each restart,
      and each round waits for that snapshot before restarting it (`SNAPSHOT_INTERVAL`).
      Without it every restart replayed all the records earlier ones left (about two
      PartitionChange records a partition a restart, 13 us each): the cost of a round grew
      by a third over five rounds (a rolling restart of 3,000 partitions 0.80-1.07 CPU s,
      0.70-0.78 with snapshots). A snapshot a second after records, as first tried, fell
      inside the measured restarts of the larger sizes only under load (1.7 once). The restarts go round the sizes `repeat` times (tenth, half, all, tenth,
      ...): a burst of load on the machine (another test starting a JVM) lasts seconds to a
      minute, and restarts of one size back to back would all fall in it and charge that
      size alone. The ratio is the CPU per partition from half to all over that from a tenth to
      half, each slope taken within a round and the median over rounds kept: one run far off
      either way (a rolling restart at half the size once cost 0.38 CPU s against 0.53 and
      0.54, and the least of three made the ratio 2.5) moves a median not at all, and slopes
      within a round carry none of the drift from round to round. CPU, not wall time: what a
      restart costs, unmoved by whatever else the machine runs. 1.0: a restart costs a fixed
      part plus the same per partition.
    `python -m benches.compare.scale --growth` prints them; tests/test_scale_growth.py, in CI,
    fails when either exceeds 1.5."""
    rf = 3 if nodes == 3 else 1
    batch = per_topic * batch_topics
    sizes = (max(total // 10 // batch, 1) * batch, max(total // 2 // batch, 2) * batch, total)
    peers: dict[int, object] = {}
    runs: dict[int, list[tuple[float, float]]] = {size: [] for size in sizes}
    batches: list[tuple[int, float]] = []

    def restarted(peer):
        return peer.nodes[-1] if nodes > 1 else peer

    def restart(size: int) -> tuple[float, float]:
        if nodes == 1:
            return restart_to_writable(peers[size], nodes, size // per_topic, per_topic)
        return rolling_restart_to_in_sync(peers[size], size // per_topic, per_topic)

    try:
        for size in sizes:
            peer = peers[size] = PeerCluster(PEERS[name], nodes) if nodes > 1 else PEERS[name]()
            peer.start()
            pids = peer.pids if nodes > 1 else [peer.pid]
            made = create_batches(
                peer.bootstrap,
                size,
                per_topic,
                batch_topics,
                rf,
                cpu=lambda pids=pids: thread_cpu_seconds(pids),
            )
            if size == total:
                batches = made
            # the node that restarts snapshots its metadata after each restart (SNAPSHOT_INTERVAL;
            # an hour by default): the next restart then loads the image, not every record the
            # earlier ones left; not while creating, where a snapshot of the whole image every
            # few seconds would be a cost that grows
            if name == "logbroker":
                key, value = SNAPSHOT_INTERVAL
                restarted(peer).extra[key] = value
            restart(size)  # uncounted: replays the new topics' records, starts with the setting
        for _ in range(repeat):
            for size in sizes:
                if name == "logbroker":
                    wait_snapshot(restarted(peers[size]), time.monotonic() + 120)
                runs[size].append(restart(size))
    finally:
        for peer in peers.values():
            peer.stop()
    per_topic_ms = [1000 * s / n for n, s in batches]
    # medians of the edge batches, not their sums: one batch that a burst of load (or a full
    # garbage collection) caught once made 5.46 ms among neighbours of 1.0-1.5 and a ratio of
    # 1.95 on an unchanged broker, while a cost that grows moves every late batch
    head = statistics.median(per_topic_ms[:edge])
    tail = statistics.median(per_topic_ms[-edge:])
    restarts = [
        (size, statistics.median(w for w, _ in runs[size]), statistics.median(c for _, c in runs[size]))
        for size in sizes
    ]
    n0, n1, n2 = sizes
    # slopes within each round, then the median round's: whatever drift from round to round
    # is left stays out of the ratio
    slopes = [
        ((c1 - c0) / (n1 - n0), (c2 - c1) / (n2 - n1))
        for (_, c0), (_, c1), (_, c2) in zip(*(runs[size] for size in sizes))
    ]
    early = statistics.median(e for e, _ in slopes)
    late = statistics.median(lt for _, lt in slopes)
    # the CPU per partition of the whole restart, all over half, each round's, median: the
    # fixed part keeps it under 1 for a cost linear in the partitions, a cost growing in
    # proportion to them makes up to 2; no difference of neighbouring runs in it, so a far
    # less noisy figure than the slopes' ratio (for a node of three, whose slopes are small)
    whole = statistics.median((c2 / n2) / (c1 / n1) for (_, c1), (_, c2) in zip(runs[n1], runs[n2]))
    return {
        "broker": name,
        "nodes": nodes,
        "partitions": total,
        "batches": len(batches),
        "create_first_cpu_ms_per_topic": head,
        "create_last_cpu_ms_per_topic": tail,
        "create_ratio": tail / head,
        "batches_cpu_ms_per_topic": [round(x, 2) for x in per_topic_ms],
        "restart_seconds": {n: round(w, 3) for n, w, _ in restarts},
        "restart_cpu_seconds": {n: round(c, 3) for n, _, c in restarts},
        "restart_cpu_seconds_every_run": {size: [round(c, 3) for _, c in runs[size]] for size in sizes},
        "restart_cpu_ms_per_partition_every_round": [[round(1000 * e, 3), round(1000 * lt, 3)] for e, lt in slopes],
        "restart_cpu_ms_per_partition_early": 1000 * early,
        "restart_cpu_ms_per_partition_late": 1000 * late,
        "restart_ratio": late / early if early > 0 else float("inf"),
        "restart_per_partition_ratio": whole,
    }


def run_one(
    name: str,
    nodes: int,
    total: int,
    per_topic: int,
    batch_topics: int,
    settle_s: float = 0,
    idle_s: float = 20,
    idle_after: float = 15,
) -> dict:
    rf = 3 if nodes == 3 else 1
    settled_us = settle_disk(RESULTS, settle_s) if settle_s else None
    peer = PeerCluster(PEERS[name], nodes) if nodes > 1 else PEERS[name]()
    peer.start()
    try:
        pids = peer.pids if nodes > 1 else [peer.pid]
        batches = create_batches(peer.bootstrap, total, per_topic, batch_topics, rf)
        topics = sum(n for n, _ in batches)
        per_topic_ms = [1000 * s / n for n, s in batches]
        result = {
            "broker": name,
            "nodes": nodes,
            "partitions": topics * per_topic,
            "topics": topics,
            "create_seconds": sum(s for _, s in batches),
            "first_batch_ms_per_topic": per_topic_ms[0],
            "last_batch_ms_per_topic": per_topic_ms[-1],
            "median_ms_per_topic": statistics.median(per_topic_ms),
            "batches_ms_per_topic": [round(x, 2) for x in per_topic_ms],
            "metadata_seconds": metadata_seconds(peer.bootstrap, topics),
            "rss_mb": peer.rss() / 1e6,
            "open_fds": sum(open_fds(p) for p in pids),
            "mkdir_us_before": settled_us,
        }
        result["idle_cpu_share"] = idle_cpu_share(peer, idle_s, idle_after)
        if nodes == 3:
            result["controller_failover_seconds"] = controller_failover_seconds(peer)
            result["new_broker_catch_up_seconds"], result["new_broker_registered_seconds"] = new_broker_seconds(
                peer, topics
            )
        # restart to every partition writable
        if nodes == 1:
            result["restart_to_writable_seconds"], _ = restart_to_writable(peer, nodes, topics, per_topic)
            result["restart_to_listening_seconds"] = peer.t_listening - peer.t_spawn
            result["shutdown_seconds"] = peer.t_shutdown
            result["shutdown_killed"] = peer.shutdown_killed
            result["rss_mb_after_restart"] = peer.rss() / 1e6
        return result
    finally:
        peer.stop()


def table(results: list[dict]) -> str:
    rows = [
        "| broker | nodes | partitions | CreateTopics ms/topic, first batch | last batch | last/first | "
        "full Metadata s | restart to all writable s | RSS MB | open fds | idle CPU, share of a core | "
        "controller failover s | new broker caught up s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rows.append(
            f"| {r['broker']} | {r['nodes']} | {r['partitions']:,} | {r['first_batch_ms_per_topic']:.1f} | "
            f"{r['last_batch_ms_per_topic']:.1f} | "
            f"{r['last_batch_ms_per_topic'] / r['first_batch_ms_per_topic']:.2f} | "
            f"{r['metadata_seconds']:.2f} | {r.get('restart_to_writable_seconds', float('nan')):.1f} | "
            f"{r['rss_mb']:.0f} | {r['open_fds']:,} | {r.get('idle_cpu_share', float('nan')):.3f} | "
            f"{r.get('controller_failover_seconds', float('nan')):.1f} | "
            f"{r.get('new_broker_catch_up_seconds', float('nan')):.1f} |"
        )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", default="10000", help="comma-separated totals (default 10000)")
    ap.add_argument("--nodes", default="1", help="1, 3 or 1,3")
    ap.add_argument("--brokers", default="logbroker,kafka")
    ap.add_argument("--partitions-per-topic", type=int, default=5)
    ap.add_argument("--batch-topics", type=int, default=None, help="topics per CreateTopics (100; 20 with --growth)")
    ap.add_argument("--quick", action="store_true", help="2,000 partitions, logbroker only unless --brokers")
    ap.add_argument(
        "--growth",
        action="store_true",
        help="only the growth ratios of creation and restart (growth(); the CI check's measurement)",
    )
    ap.add_argument(
        "--settle-seconds",
        type=float,
        default=180,
        help="before each run, wait up to this long for mkdir to be fast again (0: do not wait)",
    )
    ap.add_argument("--idle-seconds", type=float, default=20, help="the idle CPU window")
    ap.add_argument("--idle-after", type=float, default=15, help="seconds from the last CreateTopics to the window")
    args = ap.parse_args()
    totals = [2000] if args.quick else [int(x) for x in args.partitions.split(",")]
    results = []
    if args.growth:
        for nodes in (int(x) for x in args.nodes.split(",")):
            for total in totals:
                for name in args.brokers.split(","):
                    r = growth(name, nodes, total, args.partitions_per_topic, args.batch_topics or 20)
                    print(json.dumps(r), flush=True)
        return
    for nodes in (int(x) for x in args.nodes.split(",")):
        for total in totals:
            for name in args.brokers.split(","):
                r = run_one(
                    name,
                    nodes,
                    total,
                    args.partitions_per_topic,
                    args.batch_topics or 100,
                    0 if args.quick else args.settle_seconds,
                    args.idle_seconds,
                    args.idle_after,
                )
                print(json.dumps(r), flush=True)
                results.append(r)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"scale-{int(time.time())}.json").write_text(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
