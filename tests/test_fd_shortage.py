"""A broker with few file descriptors (RLIMIT_NOFILE), as a user runs it:
- writing to many more partitions than it may open files is no shortage: the process-wide
  budget of segment files (half the soft limit, `rust/src/open_log_files.rs`) closes the least
  recently used, so every record is acknowledged and the broker stays within its limit;
- when descriptors do run out (here: connections take them all), the broker keeps running,
  a write it cannot open a file for is refused per partition (logged with the topic, the
  partition, the file and "raise the open files limit"), a client connecting meanwhile waits
  in the listener's backlog, and once descriptors are free again that client is answered
  without any other connecting (the listener retries its accept) and every partition takes
  writes."""

from __future__ import annotations

import os
import resource
import socket
import struct
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import BrokerProcess, wait_until


def deliver(p: Producer, topics: list[str], partitions: int) -> list:
    """One record to every partition of `topics` through `p`; the delivery errors (None:
    delivered)."""
    out: list = []
    for t in topics:
        for i in range(partitions):
            p.produce(t, b"x", partition=i, on_delivery=lambda err, _m: out.append(err))
    p.flush(30)
    return out


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def api_versions_v0() -> bytes:
    """An ApiVersions v0 request frame (api key 18, correlation id 7, client id "late")."""
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"late"
    return struct.pack(">i", len(body)) + body


def test_more_partitions_than_descriptors_and_a_real_shortage(tmp_path):
    bp = BrokerProcess(tmp_path / "data").start()
    hogs: list[socket.socket] = []
    try:
        pid = bp.proc.pid
        limit = fds(pid) + 60
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))  # lowering is allowed
        bs = bp.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        names = [f"t{i:03d}" for i in range(60)]
        for f in admin.create_topics([NewTopic(n, 5, 1) for n in names]).values():
            f.result(60)
        p = Producer({"bootstrap.servers": bs, "message.timeout.ms": 3000, "linger.ms": 5})

        # 300 partitions, each written twice, under a limit 60 above what the broker held.
        for _ in range(2):
            errors = deliver(p, names, 5)
            assert errors == [None] * 300, [e for e in errors if e is not None][:3]
            assert fds(pid) <= limit
        text = bp.log_text()
        assert "too many open files" not in text, text[-3000:]

        # A real shortage: connections take every descriptor left.
        while fds(pid) < limit and len(hogs) < 400:
            hogs.append(socket.create_connection(("127.0.0.1", bp.port)))
            time.sleep(0.005)
        wait_until(lambda: "accepting a connection failed" in bp.log_text(), 20, "the broker out of descriptors")
        late = socket.create_connection(("127.0.0.1", bp.port))  # waits in the backlog
        late.sendall(api_versions_v0())
        errors = deliver(p, names, 5)  # partitions whose file the budget closed cannot reopen it
        assert bp.proc.poll() is None, "the broker died when descriptors ran out"
        assert any(e is not None for e in errors), "a write reopened a file with no descriptor left?"
        text = bp.log_text()
        assert "too many open files (raise the open files limit, RLIMIT_NOFILE)" in text, text[-3000:]
        assert "Traceback" not in text

        for s in hogs:
            s.close()
        hogs.clear()
        # The late client is answered with no other connection arriving to wake the listener.
        late.settimeout(20)
        size = struct.unpack(">i", late.recv(4))[0]
        assert size > 0
        late.close()
        wait_until(lambda: all(e is None for e in deliver(p, names, 5)), 60, "every partition writable again")
        assert sorted(t for t in admin.list_topics(timeout=10).topics if t.startswith("t")) == names
        assert bp.proc.poll() is None
    finally:
        for s in hogs:
            s.close()
        bp.stop()
