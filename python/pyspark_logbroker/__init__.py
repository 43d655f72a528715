"""Zero-call registration of the `logbroker` Spark data source: PySpark 4 registers the
`DefaultSource` of every importable top-level `pyspark_*` module when a session starts,
so `spark.read.format("logbroker")` works without `logbroker.spark.register(spark)`."""

from logbroker.spark.source import LogbrokerDataSource as DefaultSource

__all__ = ["DefaultSource"]
