"""`logbroker produce` and `logbroker consume` run as a user would (subprocesses, stdin and
stdout), checked against another client (confluent-kafka)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def run(bs: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logbroker", *args, "--bootstrap-server", bs],
        input=stdin,
        capture_output=True,
        timeout=60,
    )


def test_produce_lines_with_keys_and_headers(broker, tmp_path):
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("lines", 1, 1)])["lines"].result(10)
    r = run(
        bs,
        "produce",
        "--topic",
        "lines",
        "--key-separator",
        ":",
        "--header",
        "src=cli",
        stdin=b"k1:hello\nk2:world:with:colons\nno key here\n",
    )
    assert r.returncode == 0 and b"3 record(s) sent" in r.stderr, r.stderr
    f = tmp_path / "in.txt"
    f.write_bytes(b"".join(b"line %d\n" % i for i in range(100)))
    r = run(bs, "produce", "--topic", "lines", "--file", str(f), "--compression", "zstd")
    assert r.returncode == 0, r.stderr
    c = Consumer({"bootstrap.servers": bs, "group.id": "chk", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("lines", 0, 0)])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 103 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.key(), m.value(), m.headers()))
    c.close()
    assert got[:3] == [
        (b"k1", b"hello", [("src", b"cli")]),
        (b"k2", b"world:with:colons", [("src", b"cli")]),
        (None, b"no key here", [("src", b"cli")]),
    ]
    assert [v for _, v, _ in got[3:]] == [b"line %d" % i for i in range(100)]
    assert run(bs, "produce", "--topic", "lines", "--header", "bad", stdin=b"x\n").returncode == 2


def test_consume_formats_starts_and_groups(broker, tmp_path):
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("cons", 2, 1)])["cons"].result(10)
    p = Producer({"bootstrap.servers": bs})
    t0 = int(time.time() * 1000)
    for i in range(10):
        p.produce(
            "cons", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2, headers=[("h", b"x")], timestamp=t0 + i * 1000
        )
    p.produce("cons", value=b"\xff\xfe", partition=0, timestamp=t0 + 20_000)
    assert p.flush(10) == 0

    r = run(bs, "consume", "--topic", "cons", "--from-beginning", "--max-messages", "11", "--format", "json")
    assert r.returncode == 0, r.stderr
    docs = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert sorted((d["partition"], d["offset"]) for d in docs) == [(0, i) for i in range(6)] + [
        (1, i) for i in range(5)
    ]
    by_value = {json.dumps(d["value"]): d for d in docs}
    assert by_value['"v3"']["key"] == "k3" and by_value['"v3"']["headers"] == [["h", "x"]]
    assert by_value[json.dumps({"base64": "//4="})]["partition"] == 0

    r = run(
        bs,
        "consume",
        "--topic",
        "cons",
        "--partition",
        "1",
        "--offset",
        "3",
        "--print-key",
        "--print-offset",
        "--timeout",
        "2",
    )
    assert r.stdout.decode().splitlines() == ["1:3\tk7\tv7", "1:4\tk9\tv9"], r.stdout
    r = run(
        bs,
        "consume",
        "--topic",
        "cons",
        "--partition",
        "0",
        "--timestamp",
        str(t0 + 6000),
        "--timeout",
        "2",
        "--format",
        "hex",
    )
    assert r.stdout.decode().splitlines() == [b"v6".hex(), b"v8".hex(), "fffe"], r.stdout
    # from the end by default: nothing old
    r = run(bs, "consume", "--topic", "cons", "--timeout", "2")
    assert r.returncode == 0 and r.stdout == b""

    out = tmp_path / "out.txt"
    r = run(
        bs,
        "consume",
        "--topic",
        "cons",
        "--group",
        "cg",
        "--from-beginning",
        "--max-messages",
        "11",
        "--output",
        str(out),
    )
    assert r.returncode == 0 and len(out.read_text(errors="replace").splitlines()) == 11, r.stderr
    # the group committed: a second run starts after what it read
    r = run(bs, "consume", "--topic", "cons", "--group", "cg", "--timeout", "3")
    assert r.returncode == 0 and r.stdout == b"", r.stdout
    assert run(bs, "consume", "--topic", "nope", "--timeout", "1").returncode == 1
    assert run(bs, "consume", "--topic", "cons", "--offset", "1", "--timeout", "1").returncode == 2


def test_bench_produces_and_consumes_and_cleans_up(broker):
    bs = broker.bootstrap_servers
    r = run(
        bs, "bench", "--records", "3000", "--record-size", "200", "--partitions", "2", "--compression", "lz4", "--json"
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["partitions"] == 2 and doc["produce"]["records"] == 3000 and doc["consume"]["records"] == 3000
    assert (
        doc["produce"]["records_per_s"] > 0 and doc["produce"]["latency_p99_ms"] >= doc["produce"]["latency_median_ms"]
    )
    admin = AdminClient({"bootstrap.servers": bs})
    assert doc["topic"] not in admin.list_topics(timeout=10).topics, "the benchmark topic is deleted"
    r = run(bs, "bench", "--records", "500", "--topic", "kept")
    assert r.returncode == 0 and b"produce" in r.stdout and b"consume" in r.stdout, r.stderr
    assert "kept" in admin.list_topics(timeout=10).topics
    assert run(bs, "bench", "--records", "0").returncode == 2
