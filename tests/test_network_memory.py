"""Request memory is bounded under abuse (rust/src/server): a frame's buffer grows only as
its bytes arrive, and all request buffers together stay within `queued.max.request.bytes`;
when that is used up the broker stops reading from the connections that want more, and
keeps serving everyone else."""

from __future__ import annotations

import socket
import struct
import time

import logbroker
from logbroker import Admin, NewTopic, Producer, _core
from logbroker.protocol import REQUESTS, encode_request


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_announced_frames_do_not_allocate_and_others_are_served(broker_process):
    """100 connections each announce a 100 MiB frame and send 70 KB of it: the broker's RSS
    barely moves (it once grew from 33 MB to about 2 GB), and a producer and a consumer on
    other connections work meanwhile."""
    b = broker_process()
    pid = b.proc.pid
    with Admin(b.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("mem", 1)])
    before = rss_mib(pid)
    socks = []
    try:
        chunk = b"\x00" * 70_000
        for _ in range(100):
            s = socket.create_connection(("127.0.0.1", b.port))
            s.sendall(struct.pack(">i", 100 << 20) + chunk)
            socks.append(s)
        time.sleep(1.0)
        during = rss_mib(pid)
        with Producer(b.bootstrap_servers, linger_ms=0) as p:
            for i in range(100):
                p.send("mem", f"v{i}".encode())
            p.flush(30)
        with logbroker.Consumer(b.bootstrap_servers, auto_offset_reset="earliest") as c:
            c.assign([("mem", 0)])
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 100 and time.monotonic() < deadline:
                got += c.poll(0.5)
        assert [r.value for r in got] == [f"v{i}".encode() for i in range(100)]
    finally:
        for s in socks:
            s.close()
    # 100 x 70 KB received is 7 MB; allow for buffers rounding up and allocator slack.
    print(f"broker RSS {before:.0f} MiB before, {during:.0f} MiB with 100 announced 100 MiB frames")
    assert during - before < 64, f"RSS grew from {before:.0f} MiB to {during:.0f} MiB"


def produce_frame(topic: str, partition: int, value_size: int, correlation_id: int) -> bytes:
    """A whole Produce v9 request frame (size prefix included) with one batch of 10 records."""
    batch = _core.encode_batch([(None, b"x" * (value_size // 10), i, []) for i in range(10)], base_timestamp=1)
    Produce = REQUESTS[0]
    req = Produce(
        transactional_id=None,
        acks=1,
        timeout_ms=30000,
        topic_data=[
            Produce.TopicProduceData(
                name=topic, partition_data=[Produce.PartitionProduceData(index=partition, records=batch)]
            )
        ],
    )
    return b"".join(bytes(c) for c in encode_request(0, 9, correlation_id, "mem-test", req))


def test_pool_full_pauses_readers_and_every_request_completes(tmp_path):
    """With queued.max.request.bytes=2 MiB, eight connections each send the first 600 KB of
    a 900 KB Produce request: the pool cannot hold them all, so some connections are paused
    (not failed); once every frame is completed, every request is appended and answered."""
    with logbroker.Broker(data_dir=tmp_path / "d", queued_max_request_bytes=2 << 20) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("pool", 8)])
        frames = [produce_frame("pool", n, 900_000, n + 1) for n in range(8)]
        socks = [socket.create_connection(("127.0.0.1", b.port)) for _ in frames]
        try:
            for s, f in zip(socks, frames):
                s.sendall(f[:600_000])
            net = b.server.server.net
            deadline = time.monotonic() + 10
            while net.stats()["pool_refusals"] == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            stats = net.stats()
            assert stats["pool_refusals"] > 0, stats
            assert stats["pool_used"] <= 2 << 20, stats
            for s, f in zip(socks, frames):
                s.sendall(f[600_000:])
            for n, s in enumerate(socks):
                s.settimeout(30)
                (size,) = struct.unpack(">i", recv_exact(s, 4))
                body = recv_exact(s, size)
                assert struct.unpack_from(">i", body)[0] == n + 1  # correlation id
        finally:
            for s in socks:
                s.close()
        with Admin(b.bootstrap_servers) as admin:
            ends = admin.list_offsets({("pool", n): "latest" for n in range(8)})
        assert sorted(off for off, _ in ends.values()) == [10] * 8, ends
        assert net.stats()["pool_used"] == 0


def test_a_long_burst_of_pipelined_requests_is_served(tmp_path):
    """20,000 Produce requests (acks=0, so nothing is written back) sent in one burst, then
    2,000 with acks=1: the network thread serves each as it reads it, in a loop (once it
    recursed per request and a burst like this overflowed its stack and killed the broker)."""
    with logbroker.Broker(data_dir=tmp_path / "d") as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("burst", 1)])
        Produce = REQUESTS[0]
        batch = _core.encode_batch([(None, b"v", 0, [])], base_timestamp=1)

        def frame(acks: int, cid: int) -> bytes:
            req = Produce(
                transactional_id=None,
                acks=acks,
                timeout_ms=30000,
                topic_data=[
                    Produce.TopicProduceData(
                        name="burst", partition_data=[Produce.PartitionProduceData(index=0, records=batch)]
                    )
                ],
            )
            return b"".join(bytes(c) for c in encode_request(0, 9, cid, "burst", req))

        with socket.create_connection(("127.0.0.1", b.port)) as s:
            s.sendall(b"".join(frame(0, i) for i in range(20_000)))
            burst = b"".join(frame(1, 100_000 + i) for i in range(2_000))
            import threading

            sender = threading.Thread(target=s.sendall, args=(burst,))
            sender.start()
            s.settimeout(30)
            for i in range(2_000):
                (size,) = struct.unpack(">i", recv_exact(s, 4))
                body = recv_exact(s, size)
                assert struct.unpack_from(">i", body)[0] == 100_000 + i  # in order
            sender.join()
        with Admin(b.bootstrap_servers) as admin:
            ends = admin.list_offsets({("burst", 0): "latest"})
        assert [off for off, _ in ends.values()] == [22_000]
