"""The machine's own limits, measured by the same harness in the same run:

- loopback TCP: one process sendall()s 1 MiB buffers, another recv_into()s them;
- sendfile: os.sendfile() of a page-cached file to a loopback socket, drained the same way
  (the path a broker's Fetch takes when it serves from the page cache);
- sequential write: 1 MiB os.write()s of a new file in the data directory, reported both
  without and with the final fdatasync.

Rates are in MB/s (10^6 bytes), measured on the receiving side from the first byte to the
last (writes: from open to the last write, and to the end of fdatasync).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import statistics
import time
from pathlib import Path

CHUNK = 1 << 20
SOCKBUF = 4 << 20


def _listener() -> socket.socket:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    return srv


def _drain(port: int, total: int, q) -> None:
    """Child: connect, receive `total` bytes, report (first byte, last byte) times."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKBUF)
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    got = s.recv_into(view)
    t0 = time.perf_counter()
    first = got
    while got < total:
        n = s.recv_into(view)
        if n == 0:
            break
        got += n
    t1 = time.perf_counter()
    s.close()
    q.put((got - first, t1 - t0))


def _run_receiver(total: int, send) -> float:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    srv = _listener()
    child = ctx.Process(target=_drain, args=(srv.getsockname()[1], total, q))
    child.start()
    conn, _ = srv.accept()
    srv.close()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKBUF)
    send(conn)
    conn.close()
    nbytes, secs = q.get(timeout=120)
    child.join()
    return nbytes / secs / 1e6


def loopback_tcp(total: int) -> float:
    data = memoryview(b"\0" * CHUNK)

    def send(conn: socket.socket) -> None:
        left = total
        while left > 0:
            n = min(left, CHUNK)
            conn.sendall(data[:n])
            left -= n

    return _run_receiver(total, send)


def make_cached_file(path: Path, size: int) -> None:
    """Write `size` bytes and read them back once so that they sit in the page cache."""
    block = os.urandom(CHUNK)
    with open(path, "wb") as f:
        for _ in range(size // CHUNK):
            f.write(block)
    with open(path, "rb") as f:
        while f.readinto(bytearray(CHUNK)):
            pass


def sendfile_loopback(path: Path) -> float:
    size = path.stat().st_size

    def send(conn: socket.socket) -> None:
        with open(path, "rb") as f:
            off = 0
            while off < size:
                off += os.sendfile(conn.fileno(), f.fileno(), off, size - off)

    return _run_receiver(size, send)


def sequential_write(path: Path, total: int) -> tuple[float, float]:
    """(MB/s without the final fdatasync, MB/s including it)."""
    block = os.urandom(CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        left = total
        while left > 0:
            left -= os.write(fd, block[: min(left, CHUNK)])
        t1 = time.perf_counter()
        os.fdatasync(fd)
        t2 = time.perf_counter()
    finally:
        os.close(fd)
        path.unlink()
    return total / (t1 - t0) / 1e6, total / (t2 - t0) / 1e6


def measure(data_dir: Path, size: int, repeats: int = 3, step=None) -> dict:
    """All three limits, each the median of `repeats` runs (the runs are kept too)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    out: dict = {"bytes": size, "repeats": repeats}
    tcp = []
    for _ in range(repeats):
        tcp.append(loopback_tcp(size))
        step and step()
    f = data_dir / "limits-sendfile.bin"
    make_cached_file(f, size)
    sf = []
    for _ in range(repeats):
        sf.append(sendfile_loopback(f))
        step and step()
    f.unlink()
    wr, wr_sync = [], []
    for _ in range(repeats):
        a, b = sequential_write(data_dir / "limits-write.bin", size)
        wr.append(a)
        wr_sync.append(b)
        step and step()
    out["loopback_tcp"] = {"median": statistics.median(tcp), "runs": tcp}
    out["sendfile"] = {"median": statistics.median(sf), "runs": sf}
    out["write_buffered"] = {"median": statistics.median(wr), "runs": wr}
    out["write_fdatasync"] = {"median": statistics.median(wr_sync), "runs": wr_sync}
    return out


if __name__ == "__main__":
    import json
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as td:
        print(json.dumps(measure(Path(td), int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 30), indent=1))
