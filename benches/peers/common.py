"""What both broker peers share: free ports, /proc readings, readiness probes, and a
base class with the start/stop/pid interface the comparison drives.

A peer is one broker process on loopback with its data in a fresh temp directory. Only
that process is measured: /proc/<pid>/status VmRSS for memory and /proc/<pid>/stat
utime+stime (all its threads) for CPU. A PeerCluster is n such processes of one kind forming
one cluster (every node a broker and a controller, a static voter set), measured as the sum
over its processes.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from logbroker.cluster import free_port


def one_at_a_time(lock_path):
    """Decorator: the function runs under an exclusive file lock (`lock_path()`, a Path), so
    parallel test workers (pytest-xdist) that all find a cache cold build or download it once:
    the first does the work, the others wait and then find it done."""

    def wrap(fn):
        @functools.wraps(fn)
        def locked(*args, **kwargs):
            path = lock_path()
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                return fn(*args, **kwargs)

        return locked

    return wrap


CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes(pid: int) -> int:
    """Resident set size (VmRSS) of one process, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (all of its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    # the command name (field 2) may hold spaces: split after its closing paren
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / CLK_TCK


def wait_port(host: str, port: int, deadline: float, proc: subprocess.Popen | None = None) -> None:
    """Poll a TCP connect every 10 ms until it succeeds (or the process dies / time runs out)."""
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{host}:{port} not listening in time") from None
            time.sleep(0.01)


def client_conf(bootstrap: str) -> dict:
    """librdkafka settings for short-lived control clients: reconnect fast, no group."""
    return {
        "bootstrap.servers": bootstrap,
        "reconnect.backoff.ms": 10,
        "reconnect.backoff.max.ms": 100,
        "socket.connection.setup.timeout.ms": 2000,
    }


def create_topic(
    bootstrap: str, topic: str, partitions: int, timeout: float = 30.0, replication_factor: int = 1
) -> None:
    """Create a topic with the admin API and wait until every partition has a leader and at
    least `replication_factor` replicas in the ISR in Metadata (the topic may exist already,
    with more: a restarted node of a PeerCluster finds its cluster's readiness topic)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_conf(bootstrap))
    deadline = time.monotonic() + timeout
    while True:
        fut = admin.create_topics([NewTopic(topic, partitions, replication_factor)], operation_timeout=timeout)[topic]
        try:
            fut.result(timeout=timeout)
            break
        except KafkaException as e:
            err = e.args[0]
            if err.name() == "TOPIC_ALREADY_EXISTS":
                break
            if not err.retriable() or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    while True:
        md = admin.list_topics(topic, timeout=timeout)
        t = md.topics.get(topic)
        if (
            t is not None
            and t.error is None
            and len(t.partitions) == partitions
            and all(p.leader >= 0 and len(p.isrs) >= replication_factor for p in t.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {topic} has no leaders after {timeout}s")
        time.sleep(0.05)


def delete_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_conf(bootstrap))
    try:
        admin.delete_topics([topic], operation_timeout=timeout)[topic].result(timeout=timeout)
    except Exception:  # noqa: BLE001 - best effort cleanup between runs
        pass


def min_isr_size(bootstrap: str, topic: str, timeout: float = 30.0) -> int:
    """The smallest ISR over the topic's partitions, as Metadata shows it now."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient(client_conf(bootstrap)).list_topics(topic, timeout=timeout)
    t = md.topics[topic]
    return min(len(p.isrs) for p in t.partitions.values())


def first_produce(bootstrap: str, topic: str, deadline: float, replication_factor: int = 1) -> None:
    """Create `topic` (1 partition) and produce one record with acks=all, retrying until the
    broker accepts it: the readiness test of both peers and the end of a cold start."""
    from confluent_kafka import Producer

    while True:
        try:
            create_topic(
                bootstrap,
                topic,
                1,
                timeout=max(1.0, deadline - time.monotonic()),
                replication_factor=replication_factor,
            )
            break
        except Exception:  # noqa: BLE001 - broker not ready yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    p = Producer({**client_conf(bootstrap), "acks": "all", "linger.ms": 0, "message.timeout.ms": 10000})
    while True:
        result: list = []
        p.produce(topic, b"ready", on_delivery=lambda err, msg, result=result: result.append(err))
        p.flush(10)
        if result and result[0] is None:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"first produce to {topic} failed: {result}")
        time.sleep(0.02)


class Peer:
    """One broker process (node `node_id`). Subclasses fill in `_launch` and the settings table."""

    name = "peer"

    def __init__(
        self,
        data_root: str | os.PathLike | None = None,
        segment_bytes: int = 268_435_456,
        *,
        node_id: int = 1,
        replication_factor: int = 1,
        min_insync_replicas: int = 1,
        extra: dict[str, str] | None = None,
        log_dirs: int = 1,
    ):
        self.data_root = Path(data_root) if data_root else None
        self.log_dir_count = log_dirs  # log.dirs: data_dir, then data2, data3, ... (JBOD)
        self.segment_bytes = segment_bytes
        self.node_id = node_id
        self.replication_factor = replication_factor
        self.min_insync_replicas = min_insync_replicas
        # broker settings on top of the peer's own (tests/compat: what a suite's test.conf asks for)
        self.extra = dict(extra or {})
        self.proc: subprocess.Popen | None = None
        self.workdir: Path | None = None
        self.port = 0
        self.cport = 0  # the CONTROLLER listener's port
        self.voters = ""  # controller.quorum.voters; set by a PeerCluster, else this node alone
        self.roles = "broker,controller"  # process.roles; "broker" for PeerCluster.add_broker
        self.cluster_id = ""  # set by a PeerCluster (shared by its nodes)
        self.t_spawn = 0.0
        self.t_listening = 0.0
        self.t_ready = 0.0

    # -- interface -------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not started"
        return self.proc.pid

    @property
    def data_dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "data"

    @property
    def log_dirs(self) -> list[Path]:
        """Every log directory (log.dirs); the first is `data_dir`."""
        return [self.data_dir] + [self.workdir / f"data{i}" for i in range(2, self.log_dir_count + 1)]

    @property
    def log_dirs_setting(self) -> str:
        return ",".join(map(str, self.log_dirs)) if self.workdir else "<temp dir>/data"

    def allocate(self) -> None:
        """The temp dir and the ports (a PeerCluster needs every node's ports before any
        node's configuration is written)."""
        if self.workdir is not None:
            return
        if self.data_root is not None:
            self.data_root.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.name}-{self.node_id}-", dir=self.data_root))
        (self.workdir / "data").mkdir()
        self.port = free_port()
        self.cport = free_port()

    def prepare(self) -> None:
        """Everything before the broker process starts (temp dir, config, storage format)."""
        self.allocate()

    def start(self, timeout: float = 120.0, ready_topic: str = "_ready") -> float:
        """Start the broker and wait until a client can create a topic and produce to it.
        Returns the cold-start time: process spawn to first acknowledged produce (seconds)."""
        if self.workdir is None:
            self.prepare()
        deadline = time.monotonic() + timeout
        self.t_spawn = time.monotonic()
        self.proc = self._launch()
        try:
            wait_port("127.0.0.1", self.port, deadline, self.proc)
            self.t_listening = time.monotonic()
            first_produce(self.bootstrap, ready_topic, deadline)
        except BaseException:
            self.stop()
            raise
        self.t_ready = time.monotonic()
        return self.t_ready - self.t_spawn

    def stop(self, timeout: float = 30.0, keep_data: bool = False) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self._close_logs()
        if not keep_data and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def rss(self) -> int:
        return rss_bytes(self.pid)

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def settings(self) -> dict[str, str]:
        """The settings this peer runs with, for the docs table."""
        raise NotImplementedError

    def log_tail(self, n: int = 40) -> str:
        out = []
        if self.workdir is not None:
            for f in sorted(self.workdir.glob("*.log")):
                lines = f.read_text(errors="replace").splitlines()[-n:]
                out.append(f"--- {f.name}\n" + "\n".join(lines))
        return "\n".join(out)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- for subclasses ------------------------------------------------------------------
    _logs: list = []

    def _open_log(self, name: str):
        assert self.workdir is not None
        f = open(self.workdir / name, "wb")  # noqa: SIM115 - closed in stop()
        self._logs = [*self._logs, f]
        return f

    def _close_logs(self) -> None:
        for f in self._logs:
            f.close()
        self._logs = []

    def _launch(self) -> subprocess.Popen:
        raise NotImplementedError


class PeerCluster:
    """`n` nodes of one peer class forming one cluster, driven like one Peer: bootstrap is
    every node's listener, cpu() and rss() are sums over the node processes."""

    def __init__(
        self,
        peer_cls,
        n: int = 3,
        data_root=None,
        segment_bytes: int = 268_435_456,
        replication_factor: int = 3,
        min_insync_replicas: int = 2,
        **kw,
    ):
        self.name = peer_cls.name
        self.n = n
        self.replication_factor = replication_factor
        self.nodes = [
            peer_cls(
                data_root,
                segment_bytes,
                node_id=i + 1,
                replication_factor=replication_factor,
                min_insync_replicas=min_insync_replicas,
                **kw,
            )
            for i in range(n)
        ]
        self.prepared = False
        self.t_spawn = self.t_listening = self.t_ready = 0.0

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def pids(self) -> list[int]:
        return [node.pid for node in self.nodes]

    @property
    def t_format(self) -> float:
        return sum(getattr(node, "t_format", 0.0) for node in self.nodes)

    def prepare(self) -> None:
        for node in self.nodes:
            node.allocate()
        voters = ",".join(f"{node.node_id}@127.0.0.1:{node.cport}" for node in self.nodes)
        cluster_id = self.nodes[0].new_cluster_id() if hasattr(self.nodes[0], "new_cluster_id") else ""
        for node in self.nodes:
            node.voters = voters
            node.cluster_id = cluster_id
            node.prepare()
        self.prepared = True

    def start(self, timeout: float = 180.0, ready_topic: str = "_ready") -> float:
        """Start every node and wait until a client can create a topic with the cluster's
        replication factor and produce to it with acks=all. Returns spawn -> that produce."""
        if not self.prepared:
            self.prepare()
        deadline = time.monotonic() + timeout
        self.t_spawn = time.monotonic()
        try:
            for node in self.nodes:
                node.t_spawn = time.monotonic()
                node.proc = node._launch()
            for node in self.nodes:
                wait_port("127.0.0.1", node.port, deadline, node.proc)
            self.t_listening = time.monotonic()
            first_produce(self.bootstrap, ready_topic, deadline, self.replication_factor)
        except BaseException:
            self.stop()
            raise
        self.t_ready = time.monotonic()
        return self.t_ready - self.t_spawn

    def add_broker(self):
        """Starts one more node, broker only (`process.roles=broker`, node id n+1), joining
        through the cluster's voters; returns it once spawned (not waiting for anything)."""
        first = self.nodes[0]
        node = type(first)(
            first.data_root,
            first.segment_bytes,
            node_id=len(self.nodes) + 1,
            replication_factor=self.replication_factor,
            min_insync_replicas=first.min_insync_replicas,
            extra=first.extra,
            log_dirs=first.log_dir_count,
        )
        for attr in ("inst", "extra_classpath", "metadata_dir"):  # the Kafka peer's own options
            if hasattr(first, attr):
                setattr(node, attr, getattr(first, attr))
        node.allocate()
        node.roles = "broker"
        node.voters = first.voters
        node.cluster_id = first.cluster_id
        node.prepare()
        node.t_spawn = time.monotonic()
        node.proc = node._launch()
        self.nodes.append(node)
        return node

    def stop(self, timeout: float = 60.0) -> None:
        for node in self.nodes:  # signal every node first: they shut down together
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node.stop(timeout)
        self.prepared = False

    def cpu(self) -> float:
        return sum(node.cpu() for node in self.nodes)

    def cpu_by_node(self) -> list[float]:
        return [node.cpu() for node in self.nodes]

    def rss(self) -> int:
        return sum(node.rss() for node in self.nodes)

    def settings(self) -> dict[str, str]:
        return self.nodes[0].settings()

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(node.log_tail(n) for node in self.nodes)


def run_cli(peer_cls, argv: list[str] | None = None) -> int:
    """`python -m benches.peers.X run`: start one peer, print its bootstrap, stop on Ctrl-C."""
    import argparse

    ap = argparse.ArgumentParser(prog=f"python -m benches.peers.{peer_cls.name}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run", help="start the broker (temp data dir), wait until ready, stop on Ctrl-C")
    sub.add_parser("settings", help="print the settings the benchmark runs this broker with")
    if peer_cls.name == "kafka":
        i = sub.add_parser("install", help="download Kafka from Maven Central into the cache (idempotent)")
        i.add_argument("--refresh", action="store_true", help="probe Maven Central again for a newer 4.x")
    args = ap.parse_args(argv)
    if args.cmd == "install":
        from benches.peers.kafka import install

        inst = install(refresh=args.refresh, verbose=True)
        print(f"kafka {inst.version} installed in {inst.home}")
        return 0
    peer = peer_cls()
    if args.cmd == "settings":
        for k, v in peer.settings().items():
            print(f"{k} = {v}")
        return 0
    cold = peer.start()
    print(
        f"{peer.name} ready on {peer.bootstrap} (pid {peer.pid}, data {peer.data_dir}) "
        f"after {cold:.2f}s; Ctrl-C stops it",
        flush=True,
    )
    try:
        while peer.proc is not None and peer.proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        peer.stop()
    return 0
