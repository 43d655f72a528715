"""Streaming pipeline: JSON events from one topic, counted and summed per key per
one-minute event-time window, written as JSON to another topic.

    logbroker serve &                                   # or any Kafka-compatible broker
    python spark/window_counts.py --bootstrap 127.0.0.1:9092 --input events --output event-counts

Input values: {"key": "user-1", "amount": 3.5, "ts": "2026-11-21T10:00:03Z"}.
Output: key = the event key, value = {"key", "window_start", "window_end", "count", "total"}.
Python data-source sinks take append or complete mode; this job uses complete mode, so
every trigger writes the current value of every window and a reader keeps the newest
record per key and window (a compacted output topic does that by itself when the key
includes the window; here the key is the event key, and the test keeps the last one).
--available-now processes what is there and stops.
"""

from __future__ import annotations

import argparse


def build(spark, bootstrap: str, input_topic: str, output_topic: str, checkpoint: str, available_now: bool):
    from pyspark.sql import functions as F

    from logbroker.spark import register

    register(spark)
    events = (
        spark.readStream.format("logbroker")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", input_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    parsed = events.select(
        F.from_json(F.col("value").cast("string"), "key string, amount double, ts timestamp").alias("e")
    ).select("e.*")
    counts = parsed.groupBy(F.col("key"), F.window("ts", "1 minute")).agg(
        F.count(F.lit(1)).alias("count"), F.sum("amount").alias("total")
    )
    out = counts.select(
        F.col("key"),
        F.to_json(
            F.struct(
                F.col("key"),
                F.col("window.start").alias("window_start"),
                F.col("window.end").alias("window_end"),
                "count",
                "total",
            )
        ).alias("value"),
    )
    writer = (
        out.writeStream.outputMode("complete")
        .format("logbroker")
        .option("bootstrap.servers", bootstrap)
        .option("topic", output_topic)
        .option("checkpointLocation", checkpoint)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="5 seconds")
    return writer.start()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--input", default="events")
    p.add_argument("--output", default="event-counts")
    p.add_argument("--checkpoint", default="/tmp/logbroker-window-counts-checkpoint")
    p.add_argument("--available-now", action="store_true")
    a = p.parse_args()
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("logbroker-window-counts").getOrCreate()
    build(spark, a.bootstrap, a.input, a.output, a.checkpoint, a.available_now).awaitTermination()


if __name__ == "__main__":
    main()
