"""Batch read of 1 M records of 100 B: our Spark source against Spark's own Kafka source,
same broker (in-process logbroker), same SparkSession (local[2]), alternating A B A B.

    python benches/bench_spark.py [--records 1000000] [--pairs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--pairs", type=int, default=3)
    a = ap.parse_args()
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from jars import connector_jars
    from pyspark.sql import SparkSession

    from logbroker import Broker
    from logbroker.spark import register

    with Broker() as b:
        bs = b.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("bench", 4, 1)])["bench"].result(10)
        p = Producer(
            {
                "bootstrap.servers": bs,
                "linger.ms": 20,
                "batch.size": 1_000_000,
                "queue.buffering.max.messages": 2_000_000,
            }
        )
        v = b"x" * 100
        for i in range(a.records):
            while True:
                try:
                    p.produce("bench", v, partition=i % 4)
                    break
                except BufferError:
                    p.poll(0.01)
        p.flush(120)
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.jars", ",".join(connector_jars()))
            .getOrCreate()
        )
        register(spark)

        def ours():
            return spark.read.format("logbroker").option("bootstrap.servers", bs).option("subscribe", "bench").load()

        def theirs():
            return (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", bs)
                .option("subscribe", "bench")
                .option("startingOffsets", "earliest")
                .load()
            )

        def run(make) -> float:
            t0 = time.perf_counter()
            n = make().selectExpr("sum(length(value)) AS s", "count(*) AS c").collect()[0].c
            dt = time.perf_counter() - t0
            assert n == a.records, n
            return a.records / dt

        run(ours), run(theirs)  # warm-up (JVM, Python workers, page cache)
        rows = []
        for _ in range(a.pairs):
            rows.append((run(ours), run(theirs)))
        spark.stop()
    o = statistics.median(r[0] for r in rows)
    t = statistics.median(r[1] for r in rows)
    ratios = [r[0] / r[1] for r in rows]
    print(f"records={a.records} pairs={a.pairs}")
    print(
        f"logbroker source rows/s median {o:,.0f}; Spark Kafka source rows/s median {t:,.0f}; "
        f"ratio median {statistics.median(ratios):.2f} (per pair {', '.join(f'{x:.2f}' for x in ratios)})"
    )


if __name__ == "__main__":
    main()
