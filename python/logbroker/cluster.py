"""`logbroker.Cluster(n)`: N `logbroker serve` nodes (combined broker and controller) as
subprocesses on free loopback ports, for tests and notebooks; `broker_only=k` adds k
broker-only nodes (process.roles=broker, ids n+1..n+k) that follow the quorum as observers;
`controller_only=True` makes the N voters controller-only nodes (process.roles=controller,
Kafka's production shape: `Cluster(3, broker_only=2, controller_only=True)`), which have no
client listener (`node.port` is 0, `bootstrap_servers` names the brokers).

    with logbroker.Cluster(3) as cluster:
        admin = logbroker.Admin(bootstrap_servers=cluster.bootstrap_servers)
        cluster.node(2).kill()          # kill -9; .stop() is a clean SIGTERM
        cluster.node(2).start()         # same ports and data directory

`front(node_id, "client" | "controller", bound_port) -> port` puts something in front of
each node's listeners (the fault suite's TCP proxy): nodes advertise the returned ports
(`advertised.listeners`, and in `controller.quorum.voters`), so clients and the other
nodes reach a node through it; `node.port` is the advertised port, `node.bound_port` the
node's own.

Each node gets its own data directory (under `data_dir`, or a temporary directory removed
on `stop()`), its stderr in `<node dir>.log`, and the same `config` keys (`--set k=v`).
`start()` returns once every node prints its ready line and every node's Metadata lists
every running node; a node that does not start raises with the tail of its log. Exiting
the `with` block stops every node; a failed start kills every node it started, and nodes
still running when the interpreter exits are stopped then (no orphans).
"""

from __future__ import annotations

import atexit
import os
import random
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["Cluster", "ClusterNode"]


_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _port_range() -> tuple[int, int]:
    """The ports `free_port` chooses from: outside the kernel's ephemeral range, and under
    pytest-xdist (PYTEST_XDIST_WORKER=gw<i> of PYTEST_XDIST_WORKER_COUNT) this worker's own
    slice of it, so two workers (and the processes they start, which inherit the variables)
    can never be handed the same port."""
    lo, hi = _ephemeral_range()
    first, last = (10000, lo - 1) if lo > 12000 else (hi + 1, 65535)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    except ValueError:
        count = 1
    if count > 1 and worker.startswith("gw") and worker[2:].isdigit() and int(worker[2:]) < count:
        size = (last - first + 1) // count
        first += int(worker[2:]) * size
        last = first + size - 1
    return first, last


def free_port() -> int:
    """A loopback port nothing listens on, chosen outside the kernel's ephemeral range: a port
    the kernel hands out for outgoing connections (the brokers' own connections to each other)
    could be taken between this check and the node binding it ("Address already in use").
    Under pytest-xdist each worker chooses from a slice of its own (`_port_range`)."""
    candidates = _port_range()
    for _ in range(200):
        port = random.randint(*candidates)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as s:  # give up on the range: any free port
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ClusterNode:
    """One `logbroker serve` process of a `Cluster`."""

    def __init__(
        self,
        node_id: int,
        port: int,
        controller_port: int | None,
        data_dir: Path,
        args: list[str],
        bound_port: int | None = None,
        metrics_port: int | None = None,
        console_port: int | None = None,
        registry_port: int | None = None,
    ) -> None:
        self.node_id = node_id
        self.registry_port = registry_port
        self.metrics_port = metrics_port
        self.console_port = console_port
        self.port = port
        self.bound_port = port if bound_port is None else bound_port
        self.controller_port = controller_port
        self.data_dir = data_dir
        self.log_dirs = [data_dir]  # every log directory (Cluster(log_dirs=...)); the first is data_dir
        self.listener_ports: dict[str, int] = {}  # the extra client listeners' ports (Cluster(listeners=...))
        self.log_path = data_dir.with_name(data_dir.name + ".log")
        self._args = args
        self._ready_line = ""
        self.proc: subprocess.Popen | None = None

    @property
    def metrics_url(self) -> str:
        """The node's Prometheus endpoint (`Cluster(metrics=True)`)."""
        assert self.metrics_port is not None, "the cluster was started without metrics=True"
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def console_url(self) -> str:
        """The node's web console (`Cluster(console=True)`)."""
        assert self.console_port is not None, "the cluster was started without console=True"
        return f"http://127.0.0.1:{self.console_port}/"

    @property
    def schema_registry_url(self) -> str:
        """The node's schema registry (`Cluster(schema_registry=True)`)."""
        assert self.registry_port is not None, "the cluster was started without schema_registry=True"
        return f"http://127.0.0.1:{self.registry_port}"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    @property
    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 60.0) -> ClusterNode:
        """Start the process (same ports and data directory as before) and wait for its ready line."""
        self.spawn()
        self.wait_started(timeout)
        return self

    def spawn(self) -> None:
        """Start the process without waiting for it (`wait_started` waits)."""
        if self.is_running:
            return
        self._end(signal.SIGKILL, 5.0)  # a process that exited on its own: close its pipe
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "logbroker", "serve", *self._args],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
            )
        finally:
            log.close()
        self._ready_line = ""

    def wait_started(self, timeout: float = 60.0) -> None:
        """Until the spawned process prints its ready line; kills it and raises (with the log
        tail) if it exits first or does not print it within `timeout` seconds."""
        if self._ready_line:
            return
        if self.proc is None:
            raise RuntimeError(f"node {self.node_id} (port {self.port}) was not started")
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()  # read unbuffered: a stuck node must not block us past the timeout
        buf = b""
        closed = False
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    break
                chunk = os.read(fd, 4096)
                if not chunk:
                    closed = True
                    break
                buf += chunk
        line = buf.split(b"\n")[0].decode(errors="replace").strip()
        if line.startswith("logbroker ready:"):
            self._ready_line = line
            return
        if closed:
            try:
                why = f"exited with code {self.proc.wait(5)}"
            except subprocess.TimeoutExpired:
                why = "closed its stdout without a ready line"
        else:
            why = f"printed no ready line within {timeout:.0f} s"
        self.kill()
        raise RuntimeError(
            f"node {self.node_id} (port {self.port}, controller port {self.controller_port}, "
            f"data dir {self.data_dir}) did not start: {why}"
            + (f", stdout {line!r}" if line else "")
            + f"; log {self.log_path}:\n{self.log_text()[-3000:]}"
        )

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM: a controlled shutdown (leaderships move first); returns the exit code."""
        return self._end(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        self._end(signal.SIGKILL, 30.0)

    def restart(self, timeout: float = 60.0) -> ClusterNode:
        """Stop (SIGTERM) and start again on the same ports and data directory."""
        self.stop()
        return self.start(timeout)

    def _end(self, sig: int, timeout: float) -> int | None:
        proc, self.proc = self.proc, None
        self._ready_line = ""
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        return rc

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class Cluster:
    """N combined broker+controller nodes and `broker_only` broker-only nodes (see the module doc)."""

    def __init__(
        self,
        n: int = 3,
        *,
        data_dir: str | Path | None = None,
        config: dict[str, object] | None = None,
        racks: list[str] | None = None,
        log_level: str = "INFO",
        log_format: str = "text",
        broker_only: int = 0,
        front: Callable[[int, str, int], int] | None = None,
        metrics: bool = False,
        console: bool = False,
        listeners: list[str] | None = None,
        controller_only: bool = False,
        log_dirs: int = 1,
        schema_registry: bool = False,
    ) -> None:
        """`listeners`: names of client listeners beside PLAINTEXT (the inter-broker one),
        each on a free port per node; their security protocols come from `config`'s
        listener.security.protocol.map; `bootstrap(name)` gives their addresses.
        `log_dirs`: log directories per node (log.dirs: node<i>, node<i>-2, ...; JBOD).
        `schema_registry`: each broker serves the schema registry on a port of its own."""
        if n < 1:
            raise ValueError(f"a cluster needs at least one node, got {n}")
        if broker_only < 0:
            raise ValueError(f"broker_only must be >= 0, got {broker_only}")
        if controller_only and broker_only < 1:
            raise ValueError("controller_only needs broker_only >= 1: controller-only nodes host no partitions")
        if racks is not None and len(racks) != n + broker_only:
            raise ValueError(f"racks names {len(racks)} racks for {n + broker_only} nodes")
        self._tmp = None if data_dir is not None else tempfile.mkdtemp(prefix="logbroker-cluster-")
        root = Path(data_dir if data_dir is not None else self._tmp)
        ports = {i: (free_port(), free_port()) for i in range(1, n + 1 + broker_only)}

        def advertised(i: int, kind: str, port: int) -> int:
            return port if front is None else front(i, kind, port)

        adv = {
            i: (advertised(i, "client", p), advertised(i, "controller", c) if i <= n else None)
            for i, (p, c) in ports.items()
        }
        voters = ",".join(f"{i}@127.0.0.1:{adv[i][1]}" for i in range(1, n + 1))
        sets = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in (config or {}).items()]
        self._root, self._sets, self._log_args = root, sets, ["--log-level", log_level, "--log-format", log_format]
        self.nodes: list[ClusterNode] = []
        for i, (p, c) in ports.items():
            voter = i <= n
            dirs = [root / f"node{i}"] + [root / f"node{i}-{k}" for k in range(2, log_dirs + 1)]
            args = [
                "--node-id",
                str(i),
                "--data-dir",
                ",".join(map(str, dirs)),
                "--voters",
                voters,
                "--log-level",
                log_level,
                "--log-format",
                log_format,
            ]
            extra = {name.upper(): free_port() for name in listeners or []}
            more = "".join(f",{name}://127.0.0.1:{port}" for name, port in extra.items())
            if voter and controller_only:
                args += ["--roles", "controller", "--listen", f"CONTROLLER://127.0.0.1:{c}"]
            elif voter:
                args += ["--listen", f"PLAINTEXT://127.0.0.1:{p}{more},CONTROLLER://127.0.0.1:{c}"]
            else:
                args += ["--roles", "broker", "--listen", f"PLAINTEXT://127.0.0.1:{p}{more}"]
            if front is not None:
                a = (f"PLAINTEXT://127.0.0.1:{adv[i][0]}," if not (voter and controller_only) else "") + (
                    f"CONTROLLER://127.0.0.1:{adv[i][1]}" if voter else ""
                )
                a = a.rstrip(",")
                args += ["--set", f"advertised.listeners={a}"]
            for kv in sets + ([f"broker.rack={racks[i - 1]}"] if racks else []):
                args += ["--set", kv]
            metrics_port = free_port() if metrics else None
            if metrics_port is not None:
                args += ["--set", f"metrics.listen=127.0.0.1:{metrics_port}"]
            console_port = free_port() if console else None
            if console_port is not None:
                args += ["--set", f"console.listen=127.0.0.1:{console_port}"]
            broker = not (voter and controller_only)
            registry_port = free_port() if schema_registry and broker else None
            if registry_port is not None:
                args += ["--set", f"schema.registry.listen=127.0.0.1:{registry_port}"]
            self.nodes.append(
                ClusterNode(
                    i,
                    adv[i][0] if broker else 0,
                    adv[i][1],
                    root / f"node{i}",
                    args,
                    bound_port=p if broker else 0,
                    metrics_port=metrics_port,
                    console_port=console_port,
                    registry_port=registry_port,
                )
            )
            self.nodes[-1].listener_ports = extra
            self.nodes[-1].log_dirs = dirs

    def add_controller(self, node_id: int, timeout: float = 60.0) -> ClusterNode:
        """Start a new controller-only node that joins the running quorum through
        `controller.quorum.bootstrap.servers` (the voters' controller listeners) as an
        observer (KIP-853); it becomes a voter once AddRaftVoter adds it
        (`kafka-metadata-quorum add-controller`, `logbroker cluster add-voter`). Returns
        once it has started; `node.data_dir`'s meta.properties has its directory id."""
        if any(n.node_id == node_id for n in self.nodes):
            raise ValueError(f"node {node_id} is already in this cluster")
        first = next(n for n in self.nodes if n.controller_port)
        meta = dict(
            line.split("=", 1)
            for line in (first.data_dir / "meta.properties").read_text().splitlines()
            if "=" in line and not line.startswith("#")
        )
        bootstrap = ",".join(f"127.0.0.1:{n.controller_port}" for n in self.nodes if n.controller_port)
        c = free_port()
        args = [
            "--node-id",
            str(node_id),
            "--data-dir",
            str(self._root / f"node{node_id}"),
            *self._log_args,
            "--roles",
            "controller",
            "--listen",
            f"CONTROLLER://127.0.0.1:{c}",
            "--set",
            f"controller.quorum.bootstrap.servers={bootstrap}",
            "--set",
            f"cluster.id={meta['cluster.id']}",
        ]
        for kv in self._sets:
            args += ["--set", kv]
        node = ClusterNode(node_id, 0, c, self._root / f"node{node_id}", args, bound_port=0)
        self.nodes.append(node)
        node.start(timeout)
        return node

    @property
    def brokers(self) -> list[ClusterNode]:
        """The nodes that are brokers (every node, unless the voters are controller-only)."""
        return [n for n in self.nodes if n.port]

    @property
    def bootstrap_servers(self) -> str:
        """Every node's client listener, comma-separated (for bootstrap.servers)."""
        return ",".join(n.bootstrap_servers for n in self.brokers)

    def bootstrap(self, listener: str) -> str:
        """Every broker's address on the client listener `listener` (see `listeners`)."""
        return ",".join(f"127.0.0.1:{n.listener_ports[listener.upper()]}" for n in self.brokers)

    def node(self, node_id: int) -> ClusterNode:
        """The node with id `node_id`."""
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"no node {node_id} in this cluster (nodes {[n.node_id for n in self.nodes]})")

    def start(self, timeout: float = 60.0) -> Cluster:
        """Start every node (all at once) and wait until each lists every node as a broker.
        On any failure every node is killed (and a temporary data directory removed)."""
        atexit.register(self.stop)
        try:
            for n in self.nodes:
                n.spawn()
            for n in self.nodes:
                n.wait_started(timeout)
            self.wait_ready(timeout)
            for n in self.nodes:  # wait_ready looks at running nodes only
                if not n.is_running:
                    raise RuntimeError(
                        f"node {n.node_id} (port {n.port}) exited with code "
                        f"{n.proc.poll() if n.proc else None} while the cluster started; "
                        f"log {n.log_path}:\n{n.log_text()[-3000:]}"
                    )
        except BaseException:
            for n in self.nodes:
                n.kill()
            self.stop()
            raise
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until every running broker's Metadata lists every running broker."""
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            running = [n for n in self.brokers if n.is_running]
            want = sorted(n.node_id for n in running)
            views = {}
            for n in running:
                try:
                    views[n.node_id] = self._brokers(n)
                except Exception as e:  # noqa: BLE001 - a node may still be starting
                    views[n.node_id] = str(e)
            if all(v == want for v in views.values()):
                return
            last = "; ".join(f"node {k} lists {v}" for k, v in views.items())
            if time.monotonic() > deadline:
                raise TimeoutError(f"cluster not ready after {timeout:.0f} s: want brokers {want}; {last}")
            time.sleep(0.1)

    def controller_id(self, timeout: float = 30.0) -> int:
        """The active controller, as a running node reports it."""
        from logbroker.client.connection import BrokerConnection
        from logbroker.protocol import REQUESTS

        deadline = time.monotonic() + timeout
        while True:
            for n in self.brokers:
                if not n.is_running:
                    continue
                try:
                    with BrokerConnection(n.bootstrap_servers, timeout=5) as c:
                        cid = c.send(REQUESTS[60](), version=0).controller_id
                    if cid >= 0:
                        return cid
                except Exception:  # noqa: BLE001 - try the next node
                    pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"no active controller reported within {timeout:.0f} s")
            time.sleep(0.1)

    @staticmethod
    def _brokers(n: ClusterNode) -> list[int]:
        from logbroker.client.connection import BrokerConnection
        from logbroker.protocol import REQUESTS

        with BrokerConnection(n.bootstrap_servers, timeout=5) as c:
            r = c.send(REQUESTS[3](topics=[], allow_auto_topic_creation=False))
        return sorted(b.node_id for b in r.brokers)

    def stop(self) -> None:
        """Stop every node (SIGTERM; SIGKILL if one does not exit) and remove a temporary data directory."""
        for n in self.nodes:  # all at once: each moves what it can while the others go
            if n.is_running and n.proc is not None:
                n.proc.send_signal(signal.SIGTERM)
        for n in self.nodes:
            n.stop()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
        atexit.unregister(self.stop)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
