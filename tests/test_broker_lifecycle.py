"""The broker as a user runs it: `logbroker serve`, SIGTERM, restart, kill -9, and a
torn tail repaired by recovery; plus the in-process Broker and its pytest fixture."""

from __future__ import annotations

import os
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from conftest import check_partition_records, make_records
from test_client_confluent_kafka import consume_all, produce

from logbroker import Broker


def _create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(10)


def test_in_process_broker_starts_fast(tmp_path):
    t0 = time.perf_counter()
    with Broker(data_dir=tmp_path / "d") as b:
        started = time.perf_counter() - t0
        assert b.bootstrap_servers.startswith("127.0.0.1:")
    assert started < 1.0, f"in-process start took {started:.3f}s"


def test_pytest_fixture(logbroker_broker):
    records = make_records(20, 1)
    produce(logbroker_broker.bootstrap_servers, "fixture-topic", records)
    check_partition_records(records, consume_all(logbroker_broker.bootstrap_servers, "fixture-topic", 1, 20))


def test_in_process_restart_keeps_data(tmp_path):
    records = make_records(300, 4)
    with Broker(data_dir=tmp_path / "d") as b:
        _create(b.bootstrap_servers, "keep", 4)
        produce(b.bootstrap_servers, "keep", records)
        b.restart()
        check_partition_records(records, consume_all(b.bootstrap_servers, "keep", 4, len(records)))
        # and appends continue at the right offsets after the restart
        more = make_records(300 + 40, 4)[300:]
        produce(b.bootstrap_servers, "keep", more)
        got = consume_all(b.bootstrap_servers, "keep", 4, 340)
        check_partition_records(records + more, got)


def test_serve_sigterm_restart(broker_process, tmp_path):
    bp = broker_process()
    assert "ready" in bp.ready_line and str(bp.port) in bp.ready_line
    _create(bp.bootstrap_servers, "t", 3)
    records = make_records(400, 3)
    produce(bp.bootstrap_servers, "t", records)
    assert bp.stop() == 0
    log_text = bp.log_text()
    assert "stopped" in log_text
    part_dir = tmp_path / "data" / "t-0"
    assert any(p.suffix == ".log" for p in part_dir.iterdir())
    bp2 = broker_process(port=bp.port)
    check_partition_records(records, consume_all(bp2.bootstrap_servers, "t", 3, len(records)))


def test_kill9_recovers_everything_acknowledged(broker_process, tmp_path):
    bp = broker_process()
    _create(bp.bootstrap_servers, "k9", 2)
    records = make_records(500, 2)
    produce(bp.bootstrap_servers, "k9", records, acks="all")
    bp.kill()
    bp2 = broker_process(port=bp.port)
    # page cache survives a process kill: every acknowledged record is there
    check_partition_records(records, consume_all(bp2.bootstrap_servers, "k9", 2, len(records)))


def test_kill9_with_torn_tail(broker_process, tmp_path):
    bp = broker_process()
    _create(bp.bootstrap_servers, "torn", 1)
    first = make_records(200, 1, tag="a")
    produce(bp.bootstrap_servers, "torn", first, **{"linger.ms": 0, "batch.num.messages": 10})
    second = make_records(200, 1, tag="b")
    produce(bp.bootstrap_servers, "torn", second, **{"linger.ms": 0, "batch.num.messages": 10})
    bp.kill()
    seg = sorted((tmp_path / "data" / "torn-0").glob("*.log"))[-1]
    size = seg.stat().st_size
    # tear the last batch: cut 7 bytes off its end and append garbage
    with open(seg, "r+b") as f:
        f.truncate(size - 7)
        f.seek(0, os.SEEK_END)
        f.write(b"\x13" * 3)
    bp2 = broker_process(port=bp.port)
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bp2.bootstrap_servers, "group.id": "x", "enable.auto.commit": False})
    lo, hi = c.get_watermark_offsets(TopicPartition("torn", 0), timeout=10)
    c.close()
    assert lo == 0 and 390 <= hi < 400, (lo, hi)  # the torn batch (<= 10 records) is gone, nothing else
    got = consume_all(bp2.bootstrap_servers, "torn", 1, hi)
    expected = (first + second)[:hi]
    check_partition_records(expected, got)
    assert "truncat" in bp2.log_text().lower() or "recover" in bp2.log_text().lower()
    # new writes continue densely after the truncation point
    produce(bp2.bootstrap_servers, "torn", make_records(5, 1, tag="c"))
    got = consume_all(bp2.bootstrap_servers, "torn", 1, hi + 5)
    assert [o for o, _ in got[0]] == list(range(hi + 5))


def test_bad_config_is_refused(tmp_path):
    import subprocess
    import sys

    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "logbroker",
            "serve",
            "--data-dir",
            str(tmp_path / "d"),
            "--set",
            "log.segment.bytes=banana",
        ],
        capture_output=True,
        timeout=30,
    )
    assert res.returncode == 2
    assert b"log.segment.bytes" in res.stderr and b"banana" in res.stderr
    res = subprocess.run(
        [sys.executable, "-m", "logbroker", "serve", "--data-dir", str(tmp_path / "d"), "--set", "no.such.key=1"],
        capture_output=True,
        timeout=30,
    )
    assert res.returncode == 2 and b"no.such.key" in res.stderr
    assert not Path(tmp_path / "d").exists()
