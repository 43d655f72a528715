"""PySpark integration: the `logbroker` data source (read, readStream, write, writeStream).

    from logbroker.spark import register
    register(spark)      # then spark.read.format("logbroker") ...

Needs pyspark >= 4.0 and pyarrow on the driver and the executors (with logbroker
installed there too). See docs/spark.md.
"""

from __future__ import annotations


def register(spark) -> None:
    """Register the `logbroker` format with a SparkSession."""
    from logbroker.spark.source import LogbrokerDataSource

    spark.dataSource.register(LogbrokerDataSource)


__all__ = ["register"]
