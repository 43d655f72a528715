"""What topic `compression.type` costs on the produce path: one broker (logbroker, and Apache
Kafka beside it from benches/peers), one topic per setting, a confluent-kafka producer sending
N records of S bytes (text-like values that compress about 4:1) compressed with the client's
codec, acks=all. Reported per (broker, client codec, topic codec): produce MB/s (uncompressed
record bytes over the time from first send to last ack), broker CPU seconds per GB produced
(/proc utime+stime of the broker process over the same interval), and the bytes stored on
disk; median of the runs.

    python -m benches.bench_recompression [--records 300000] [--size 200] [--runs 3] [--brokers logbroker,kafka]

The cases: the client's lz4 stored as is (`producer`), recompressed to zstd and to gzip,
decompressed (`uncompressed`); and an uncompressed client recompressed to zstd. Not in CI.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benches.peers.common import cpu_seconds  # noqa: E402

CASES = [
    ("lz4", "producer"),
    ("lz4", "zstd"),
    ("lz4", "gzip"),
    ("lz4", "uncompressed"),
    ("none", "zstd"),
    ("none", "producer"),
]


def payloads(n: int, size: int) -> list[bytes]:
    words = [
        b"offset",
        b"partition",
        b"leader",
        b"epoch",
        b"replica",
        b"segment",
        b"index",
        b"batch",
        b"record",
        b"timestamp",
        b"producer",
        b"consumer",
        b"group",
        b"commit",
    ]
    out = []
    for i in range(n):
        v = bytearray(f"{i:010d} ".encode())
        j = i
        while len(v) < size:
            v += words[j % len(words)] + b" "
            j = j * 1103515245 + 12345 & 0x7FFFFFFF
        out.append(bytes(v[:size]))
    return out


def stored_bytes(data_dir: Path, topic: str) -> int:
    return sum(f.stat().st_size for f in data_dir.glob(f"{topic}-*/*.log"))


def one_run(peer, topic: str, client_codec: str, topic_codec: str, values: list[bytes]) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": peer.bootstrap})
    config = {} if topic_codec == "producer" else {"compression.type": topic_codec}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    p = Producer(
        {
            "bootstrap.servers": peer.bootstrap,
            "compression.type": client_codec,
            "linger.ms": 5,
            "batch.size": 262144,
            "acks": "all",
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    p.produce(topic, b"warm")
    p.flush(30)
    cpu0, t0 = cpu_seconds(peer.pid), time.monotonic()
    for v in values:
        while True:
            try:
                p.produce(topic, v)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    elapsed, cpu = time.monotonic() - t0, cpu_seconds(peer.pid) - cpu0
    mb = sum(map(len, values)) / 1e6
    return {
        "mb_s": mb / elapsed,
        "cpu_s_per_gb": cpu / (mb / 1000),
        "stored_mb": stored_bytes(peer.data_dir, topic) / 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.bench_recompression")
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--brokers", default="logbroker,kafka")
    args = ap.parse_args(argv)
    values = payloads(args.records, args.size)
    results = []
    for broker in args.brokers.split(","):
        if broker == "kafka":
            from benches.peers.kafka import KafkaPeer, install

            peer = KafkaPeer(tempfile.mkdtemp(prefix="bench-recompress-"), install_info=install())
        else:
            from benches.peers.logbroker import LogbrokerPeer

            peer = LogbrokerPeer(tempfile.mkdtemp(prefix="bench-recompress-"))
        peer.start()
        try:
            for client_codec, topic_codec in CASES:
                runs = [
                    one_run(peer, f"t-{client_codec}-{topic_codec}-{r}", client_codec, topic_codec, values)
                    for r in range(args.runs)
                ]
                row = {
                    "broker": broker,
                    "client": client_codec,
                    "topic": topic_codec,
                    **{k: statistics.median(r[k] for r in runs) for k in runs[0]},
                }
                results.append(row)
                print(
                    f"{broker:10} client {client_codec:5} topic {topic_codec:12} {row['mb_s']:7.1f} MB/s "
                    f"{row['cpu_s_per_gb']:6.1f} CPU s/GB  stored {row['stored_mb']:6.1f} MB",
                    flush=True,
                )
        finally:
            peer.stop()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
