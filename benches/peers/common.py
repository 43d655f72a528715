"""What both broker peers share: free ports, /proc readings, readiness probes, and a
base class with the start/stop/pid interface the comparison drives.

A peer is one broker process on loopback with its data in a fresh temp directory. Only
that process is measured: /proc/<pid>/status VmRSS for memory and /proc/<pid>/stat
utime+stime (all its threads) for CPU.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    fields = text[text.rindex(")") + 2:].split()
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


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Create a topic with the admin API (replication factor 1) and wait until every partition
    has a leader in Metadata."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_conf(bootstrap))
    deadline = time.monotonic() + timeout
    while True:
        fut = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=timeout)[topic]
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
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
            p.leader >= 0 for p in t.partitions.values()
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


def first_produce(bootstrap: str, topic: str, deadline: float) -> None:
    """Create `topic` (1 partition) and produce one record with acks=all, retrying until the
    broker accepts it: the readiness test of both peers and the end of a cold start."""
    from confluent_kafka import Producer

    while True:
        try:
            create_topic(bootstrap, topic, 1, timeout=max(1.0, deadline - time.monotonic()))
            break
        except Exception:  # noqa: BLE001 - broker not ready yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    p = Producer({**client_conf(bootstrap), "acks": "all", "linger.ms": 0,
                  "message.timeout.ms": 10000})
    while True:
        result: list = []
        p.produce(topic, b"ready", on_delivery=lambda err, msg: result.append(err))
        p.flush(10)
        if result and result[0] is None:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"first produce to {topic} failed: {result}")
        time.sleep(0.02)


class Peer:
    """One broker process. Subclasses fill in `_launch` and the settings table."""

    name = "peer"

    def __init__(self, data_root: str | os.PathLike | None = None, segment_bytes: int = 268_435_456):
        self.data_root = Path(data_root) if data_root else None
        self.segment_bytes = segment_bytes
        self.proc: subprocess.Popen | None = None
        self.workdir: Path | None = None
        self.port = 0
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

    def prepare(self) -> None:
        """Everything before the broker process starts (temp dir, config, storage format)."""
        if self.data_root is not None:
            self.data_root.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.name}-", dir=self.data_root))
        (self.workdir / "data").mkdir()
        self.port = free_port()

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
    print(f"{peer.name} ready on {peer.bootstrap} (pid {peer.pid}, data {peer.data_dir}) "
          f"after {cold:.2f}s; Ctrl-C stops it", flush=True)
    try:
        while peer.proc is not None and peer.proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        peer.stop()
    return 0
