"""A broker that runs out of file descriptors (RLIMIT_NOFILE) while partitions are created:
every CreateTopics is answered and committed, the broker keeps running, the metadata stays
as committed, the partitions whose logs could not be opened are logged (topic, partition,
file) and stay offline on this broker, and once descriptors are free again (topics deleted)
they come online by themselves and take writes."""

from __future__ import annotations

import os
import resource
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import BrokerProcess, wait_until


def deliver(bs: str, topics: list[str], partitions: int, timeout_ms: int) -> list:
    """One record to every partition of `topics`; the delivery errors (None: delivered)."""
    p = Producer({"bootstrap.servers": bs, "message.timeout.ms": timeout_ms, "linger.ms": 5})
    out: list = []
    for t in topics:
        for i in range(partitions):
            p.produce(t, b"x", partition=i, on_delivery=lambda err, _m: out.append(err))
    p.flush(timeout_ms / 1000 + 10)
    return out


def test_running_out_of_descriptors_keeps_the_broker_and_the_metadata(tmp_path):
    bp = BrokerProcess(tmp_path / "data").start()
    try:
        pid = bp.proc.pid
        baseline = len(os.listdir(f"/proc/{pid}/fd"))
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (baseline + 60, baseline + 60))  # lowering is allowed
        bs = bp.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        names = [f"t{i:03d}" for i in range(60)]
        for f in admin.create_topics([NewTopic(n, 5, 1) for n in names]).values():
            f.result(60)  # committed and answered, even where a log could not be opened
        errors = deliver(bs, names, 5, 3000)  # writes reach the partitions that opened; not all can
        assert bp.proc.poll() is None, "the broker died when descriptors ran out"
        assert sorted(t for t in admin.list_topics(timeout=10).topics if t.startswith("t")) == names
        assert any(e is not None for e in errors), "300 partitions fit in 60 descriptors?"
        text = bp.log_text()
        assert "too many open files (raise the open files limit, RLIMIT_NOFILE)" in text, text[-3000:]
        assert "Traceback" not in text

        keep = names[:2]
        for f in admin.delete_topics(names[2:]).values():
            f.result(60)
        # the descriptors of the deleted logs are free: what was offline opens by itself
        wait_until(
            lambda: all(e is None for e in deliver(bs, keep, 5, 5000)),
            60,
            "every partition of the kept topics writable",
        )
        assert bp.proc.poll() is None
    finally:
        bp.stop()
        time.sleep(0.1)
