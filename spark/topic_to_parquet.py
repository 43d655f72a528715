"""Batch pipeline: load a topic (all partitions, earliest to latest) into Parquet,
partitioned by topic partition, with the Kafka metadata columns kept.

    python spark/topic_to_parquet.py --bootstrap 127.0.0.1:9092 --topic events --out /tmp/events.parquet
"""

from __future__ import annotations

import argparse


def run(spark, bootstrap: str, topic: str, out: str, min_partitions: int | None = None) -> int:
    from logbroker.spark import register

    register(spark)
    reader = spark.read.format("logbroker").option("bootstrap.servers", bootstrap).option("subscribe", topic)
    if min_partitions:
        reader = reader.option("minPartitions", str(min_partitions))
    df = reader.option("includeHeaders", "true").load()
    df.write.mode("overwrite").partitionBy("partition").parquet(out)
    return spark.read.parquet(out).count()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--topic", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--min-partitions", type=int)
    a = p.parse_args()
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("logbroker-topic-to-parquet").getOrCreate()
    print(f"wrote {run(spark, a.bootstrap, a.topic, a.out, a.min_partitions)} rows to {a.out}")


if __name__ == "__main__":
    main()
