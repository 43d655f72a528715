"""Iceberg topics (`iceberg.enable=true`): a topic that is also an Apache Iceberg table.

The table `<iceberg.namespace>.<topic>` (a '.' in the topic name written '_', which Kafka
already treats as colliding with '.') lives in the catalog of `iceberg.catalog.*` and the
warehouse `iceberg.warehouse`; the embedded default is a SQL catalog in a SQLite file
(Iceberg's JDBC catalog layout, so Spark's JdbcCatalog and pyiceberg's SqlCatalog both read
it) and a local warehouse directory, both under DATA_DIR/__iceberg.

Columns (`table_schema.TABLE_SCHEMA`): Spark's Kafka source schema, so a query over the
table reads as one over `spark.read.format("kafka")`: key, value (binary), topic,
partition, offset, timestamp (timestamptz), timestampType, headers
(list<struct<key string, value binary>>). Partitioned by day(timestamp).

What goes in: every record a read_committed consumer reads (below the last stable offset;
no control records, none of aborted transactions), each exactly once. The argument:
- Each snapshot the broker commits records, in its summary, the table's position per
  partition (`table_offsets`): `logbroker.topic-id` (the topic incarnation) and
  `logbroker.offsets`, the next offset to write of every partition written so far. The
  table's position is the newest snapshot in the current snapshot's ancestry that carries
  them (another writer's snapshot, e.g. a compaction by Spark, carries none).
- A partition's leader reads the position, reads the log from there up to the last stable
  offset, writes the rows and commits data files and the new position in one snapshot, on
  the condition that the table's main branch is still the snapshot it read
  (AssertRefSnapshotId: the catalog's compare-and-set of the metadata location). A commit
  that loses that race changes nothing; the writer reads the position again.
- So the rows of a partition in the table are exactly offsets [first written, position),
  whichever node wrote them: a deposed leader still writing loses the race to the new one,
  and a crash between writing files and committing leaves only unreferenced files.
- Retention (the engine only plans for these topics, like `retention.archive`) deletes a
  segment only once the table's position is past it, so expired records stay in the
  table and none is lost between the log and the table.
The broker's own commits never retry inside pyiceberg (`commit.retry.num-retries=0` on the
tables it creates): a retried append would carry a position computed before the race.

Modules: `catalog` (the catalog and tables from broker keys), `table_schema` (columns and
partition spec), `table_offsets` (the position in snapshot summaries), `table_writer` (one
commit of a topic's led partitions). The broker's periodic task is
logbroker/broker/iceberg_committer.py.
"""


class IcebergError(Exception):
    """An Iceberg table failure, naming the table, topic, partitions and offsets involved."""
