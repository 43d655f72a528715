"""PySpark integration: the `logbroker` data source (read, readStream, write, writeStream).

    from logbroker.spark import register
    register(spark)      # then spark.read.format("logbroker") ...

Needs pyspark >= 4.0 and pyarrow on the driver and the executors (with logbroker
installed there too). See docs/spark.md.
"""

from __future__ import annotations

import importlib.util

SPARK_EXTRA = ("pyspark", "pyarrow")


def require_spark_extra() -> None:
    """Raise a clear ImportError when the `spark` extra is not installed (checked on the
    driver when the source or sink module is imported, before any executor runs)."""
    missing = [m for m in SPARK_EXTRA if importlib.util.find_spec(m) is None]
    if missing:
        raise ModuleNotFoundError(
            f"logbroker.spark needs {' and '.join(missing)}: pip install 'logbroker[spark]'", name=missing[0])


def register(spark) -> None:
    """Register the `logbroker` format with a SparkSession."""
    from logbroker.spark.source import LogbrokerDataSource

    spark.dataSource.register(LogbrokerDataSource)


__all__ = ["register"]
