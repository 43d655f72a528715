"""A fault-injecting TCP proxy in front of every node of a `Cluster` (its `front` hook): the
nodes advertise the proxy's ports, so clients and the other nodes reach a node through it,
and the proxy can cut the network between groups of nodes (a partition).

Who is talking: a connection's source is found from its source port: /proc/net/tcp gives
the socket's inode, and the node whose process holds that inode (in /proc/<pid>/fd) is the
source; anything else (the test's own clients) is the client side, which partitions leave
alone, as Jepsen's do (its clients run on the control node).

A partition (`partition([{1}, {2, 3}])`) stops moving bytes between nodes of different
groups, in both directions, on connections open at the time and on new ones, without
closing anything: bytes wait in the kernel's buffers as they would behind a lost link, the
endpoints' own timeouts fire, and when `heal()` is called whatever is still connected flows
again. This is what a dropped link does to TCP; no RST is sent.

The proxy runs in a process of its own (`FaultProxy` is the handle; calls go over a pipe),
so the test process's clients and their callbacks never hold up its copying: a proxy that
stalls would itself be a fault (late Raft heartbeats, follower fetches timing out). Each
connection is two threads (one per direction) copying through 64 KiB reads.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading

from socket_close import shut_and_close

from logbroker.cluster import free_port

CLIENT = 0  # the source id of connections from outside the cluster


class FaultProxy:
    """The handle the tests hold: starts the proxy process and forwards calls to it."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._lock = threading.Lock()
        self._proc = ctx.Process(target=_serve, args=(child,), daemon=True, name="fault-proxy")
        self._proc.start()
        child.close()

    def _call(self, *msg):
        with self._lock:
            self._conn.send(msg)
            ok, value = self._conn.recv()
        if not ok:
            raise RuntimeError(f"fault proxy: {msg[0]} failed: {value}")
        return value

    def front(self, node_id: int, kind: str, bound_port: int) -> int:
        """`Cluster(front=proxy.front)`: a proxy port for `node_id`'s `kind` listener. The port is
        chosen here, in the test's process, so it is never one that process has handed to a node
        not yet started (the proxy process choosing its own could take such a port first)."""
        return self._call("front", node_id, kind, bound_port, free_port())

    def partition(self, groups: list[set[int]]) -> None:
        """Nodes in different groups stop reaching each other (nodes in no group are
        unaffected); replaces any earlier partition."""
        self._call("partition", [sorted(g) for g in groups])

    def heal(self) -> None:
        self.partition([])

    @property
    def connections(self) -> int:
        """Connections accepted so far."""
        return self._call("connections")

    def close(self) -> None:
        try:
            self._call("close")
        except (OSError, EOFError, RuntimeError):
            pass
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()


def _serve(conn) -> None:
    """The proxy process: answers the handle's calls until it closes."""
    server = _ProxyServer()
    while True:
        try:
            op, *args = conn.recv()
        except (EOFError, OSError):
            break
        try:
            if op == "front":
                result = server.front(*args)
            elif op == "partition":
                result = server.partition([set(g) for g in args[0]])
            elif op == "connections":
                result = server.connections
            elif op == "close":
                server.close()
                conn.send((True, None))
                break
            else:
                raise ValueError(f"unknown call {op!r}")
            conn.send((True, result))
        except Exception as e:  # noqa: BLE001 - reported to the caller
            conn.send((False, repr(e)))
    server.close()


class _ProxyServer:
    def __init__(self) -> None:
        self._listeners: list[socket.socket] = []
        self._routes: dict[int, tuple[int, int]] = {}  # proxy port -> (node, bound port)
        self._lock = threading.Condition()
        self._groups: list[set[int]] = []
        self._conns: set[socket.socket] = set()
        self._closed = False
        self.connections = 0

    # --- set-up ----------------------------------------------------------------------

    def front(self, node_id: int, kind: str, bound_port: int, port: int) -> int:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(128)
        self._listeners.append(s)
        self._routes[port] = (node_id, bound_port)
        threading.Thread(target=self._accept, args=(s, port), daemon=True, name=f"proxy-{node_id}-{kind}").start()
        return port

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._groups = []
            self._lock.notify_all()
            conns = list(self._conns)
        for s in self._listeners + conns:
            try:
                s.close()
            except OSError:
                pass

    # --- faults ------------------------------------------------------------------------

    def partition(self, groups: list[set[int]]) -> None:
        with self._lock:
            self._groups = [set(g) for g in groups]
            self._lock.notify_all()

    def blocked(self, src: int, dst: int) -> bool:
        if src == CLIENT or src == dst:
            return False
        gs = next((i for i, g in enumerate(self._groups) if src in g), None)
        gd = next((i for i, g in enumerate(self._groups) if dst in g), None)
        return gs is not None and gd is not None and gs != gd

    # --- the proxy -------------------------------------------------------------------

    def _accept(self, listener: socket.socket, port: int) -> None:
        dst, bound = self._routes[port]
        while True:
            try:
                down, peer = listener.accept()
            except OSError:
                return
            src = self._source(peer[1], port)
            try:
                up = socket.create_connection(("127.0.0.1", bound), timeout=5)
                up.settimeout(None)
            except OSError:
                down.close()  # the node is down: refuse, as its port would
                continue
            for s in (down, up):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._conns.update((down, up))
                self.connections += 1
            threading.Thread(target=self._pump, args=(down, up, src, dst), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, down, dst, src), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket, src: int, dst: int) -> None:
        """Copy a -> b, holding bytes (not reading more) while src and dst are cut off."""
        try:
            while True:
                data = a.recv(65536)
                with self._lock:
                    while self.blocked(src, dst) and not self._closed:
                        self._lock.wait(0.5)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            shut_and_close(a, b)
            with self._lock:
                self._conns.discard(a)
                self._conns.discard(b)

    def _source(self, peer_port: int, proxy_port: int) -> int:
        """The node whose process owns the connecting socket (CLIENT if none): the process
        holding the socket's inode, if it is a `logbroker serve --node-id N`."""
        inode = _socket_inode(peer_port, proxy_port)
        if inode is None:
            return CLIENT
        target = f"socket:[{inode}]"
        for pid, node in _node_processes().items():
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return node
                except OSError:
                    continue
        return CLIENT


def _node_processes() -> dict[int, int]:
    """pid -> node id of every `logbroker serve` process on this machine."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"logbroker" in args and b"serve" in args and b"--node-id" in args:
            try:
                out[int(entry)] = int(args[args.index(b"--node-id") + 1])
            except (ValueError, IndexError):
                continue
    return out


def _socket_inode(local_port: int, remote_port: int) -> int | None:
    """The inode of the loopback TCP socket from `local_port` to `remote_port`."""
    want_local = f"0100007F:{local_port:04X}"
    want_remote = f"0100007F:{remote_port:04X}"
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                parts = line.split()
                if parts[1] == want_local and parts[2] == want_remote:
                    return int(parts[9])
    except OSError:
        return None
    return None
