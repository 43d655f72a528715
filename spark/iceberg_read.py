"""A PySpark job reading an Iceberg topic's table (docs/lakehouse.md) with Iceberg's own Spark
runtime, through a JdbcCatalog on the broker's SQLite catalog; prints the rows as JSON.

    python spark/iceberg_read.py --catalog logbroker --db DATA_DIR/__iceberg/catalog.db \
        --warehouse DATA_DIR/__iceberg/warehouse --table logbroker.clicks \
        [--select partition,offset,value] [--version-as-of SNAPSHOT_ID] \
        [--kafka-bootstrap HOST:PORT --kafka-topic TOPIC] [--time-scans N]

Output: one JSON object {"table": [rows], "kafka": [rows]} (binary values base64); with
--kafka-*, "kafka" holds the same columns read by Spark's Kafka source (read_committed).
With --time-scans N (and --kafka-*), no rows: N timed scans of each (the sum of the values'
lengths, every row read), after one untimed pair: {"scan_s": {"table": [...], "kafka": [...]}}.
Iceberg publishes its Spark runtime for Spark 4.1 at newest (none for 4.2 yet), so this job
runs on pyspark 4.1 (tests/conftest.py makes that environment); `python spark/jars.py` under
that pyspark fetches the matching jars.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def plain(v):
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def time_scans(spark, a) -> dict:
    import time

    from pyspark.sql import functions as F

    def table() -> int:
        return spark.read.table(f"{a.catalog}.{a.table}").select(F.sum(F.length("value"))).first()[0]

    def kafka() -> int:
        df = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", a.kafka_bootstrap)
            .option("subscribe", a.kafka_topic)
            .option("kafka.isolation.level", "read_committed")
            .load()
        )
        return df.select(F.sum(F.length("value"))).first()[0]

    times: dict[str, list[float]] = {"table": [], "kafka": []}
    sums = {}
    for i in range(a.time_scans + 1):
        for name, fn in (("table", table), ("kafka", kafka)):
            t0 = time.monotonic()
            sums[name] = fn()
            if i:
                times[name].append(time.monotonic() - t0)
    if sums["table"] != sums["kafka"]:
        raise SystemExit(f"the table and the Kafka source read different bytes: {sums}")
    return {"scan_s": times, "bytes": sums["table"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--catalog", default="logbroker")
    ap.add_argument("--db", required=True)
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--table", required=True, help="NAMESPACE.TABLE")
    ap.add_argument("--select", default="partition,offset,key,value,headers")
    ap.add_argument("--version-as-of", type=int)
    ap.add_argument("--kafka-bootstrap")
    ap.add_argument("--kafka-topic")
    ap.add_argument("--time-scans", type=int, default=0)
    a = ap.parse_args(argv)
    from jars import connector_jars
    from pyspark.sql import SparkSession

    prefix = f"spark.sql.catalog.{a.catalog}"
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("logbroker-iceberg-read")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.jars", ",".join(connector_jars()))
        .config(prefix, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{prefix}.type", "jdbc")
        .config(f"{prefix}.uri", f"jdbc:sqlite:{Path(a.db).resolve()}")
        .config(f"{prefix}.warehouse", Path(a.warehouse).resolve().as_uri())
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if a.time_scans:
            print(json.dumps(time_scans(spark, a)))
            return 0
        reader = spark.read
        if a.version_as_of is not None:
            reader = reader.option("versionAsOf", a.version_as_of)
        cols = a.select.split(",")
        df = reader.table(f"{a.catalog}.{a.table}").select(*cols)
        out = {"columns": df.columns, "table": [plain(r.asDict(recursive=True)) for r in df.collect()]}
        if a.kafka_bootstrap:
            kafka = (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", a.kafka_bootstrap)
                .option("subscribe", a.kafka_topic)
                .option("kafka.isolation.level", "read_committed")
                .option("includeHeaders", "true")
                .load()
                .select(*[c for c in cols if "." not in c])
            )
            out["kafka"] = [plain(r.asDict(recursive=True)) for r in kafka.collect()]
        print(json.dumps(out))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
