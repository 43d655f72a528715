"""sendfile vs a plain pread+write copy loop, from a segment file in the page cache to
a loopback TCP socket drained by another thread (on loopback the copy can win)."""

from __future__ import annotations

import select
import socket
import threading

import pytest
from batches import build_batch

from logbroker._core import Log

TOTAL = 256 * 1024 * 1024


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    log = Log.open(str(tmp_path_factory.mktemp("xfer") / "t-0"), "t", 0, {}, None, 0)
    b = build_batch([b"q" * 1000] * 1000)  # ~1 MB batches
    for _ in range(TOTAL // len(b)):
        log.append_as_leader(b, 0, 1)
    log.update_high_watermark(log.log_end_offset)
    r = log.read(0, 2**31 - 1, None, True)
    yield r
    log.close()


def _pair():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    a = socket.create_connection(srv.getsockname())
    b, _ = srv.accept()
    srv.close()
    return a, b


def _drain(sock, n):
    buf = bytearray(1 << 20)
    got = 0
    while got < n:
        k = sock.recv_into(buf)
        if not k:
            break
        got += k


def _transfer(region, method: str) -> None:
    a, b = _pair()
    a.setblocking(False)
    t = threading.Thread(target=_drain, args=(b, len(region)))
    t.start()
    fn = region.send if method == "sendfile" else region.write_to
    off, remaining = 0, len(region)
    while remaining:
        try:
            n = fn(a.fileno(), off, remaining)
        except BlockingIOError:
            select.select([], [a], [])
            continue
        off += n
        remaining -= n
    t.join()
    a.close()
    b.close()


@pytest.mark.parametrize("method", ["sendfile", "copy"])
def test_region_to_loopback(benchmark, region, method):
    region.read  # noqa: B018 (keep region warm in the page cache)
    benchmark.pedantic(_transfer, args=(region, method), rounds=5, iterations=1)
    benchmark.extra_info["MB_per_s"] = len(region) / benchmark.stats.stats.median / 1e6
