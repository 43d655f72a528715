"""Spark reads what `retention.archive` archived: the logbroker source with the option
`archive.location` reads a topic from its first archived offset, the archive and then the
live log, every record exactly once; Spark's own Parquet reader reads the archive files."""

from __future__ import annotations

from pathlib import Path

from test_archive import SMALL, log_start, produce_model, settled_log_start, wait_for

import logbroker
from logbroker import Admin, NewTopic


def test_spark_source_reads_archive_then_log(spark, tmp_path: Path) -> None:
    location = str(tmp_path / "archive")
    with logbroker.Broker(
        data_dir=tmp_path / "d", log_retention_check_interval_ms=200, config={"archive.location": location}
    ) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("hist", 2, 1, dict(SMALL))])
        model = produce_model(bs, "hist", 2, 400, aborted_every=100)
        wait_for(lambda: all(log_start(bs, "hist", p) > 0 for p in (0, 1)), what="archive")
        # retention goes on archiving after the first segment: read each log start once settled
        starts = [settled_log_start(bs, "hist", p, tmp_path / "d") for p in (0, 1)]

        def load(**options: str):
            reader = spark.read.format("logbroker").option("bootstrap.servers", bs).option("subscribe", "hist")
            for k, v in options.items():
                reader = reader.option(k, v)
            return reader.load()

        df = load(**{"archive.location": location, "includeHeaders": "true", "kafka.isolation.level": "read_committed"})
        assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
        got = {
            (r.partition, r.offset): (
                bytes(r.key),
                bytes(r.value),
                [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers],
            )
            for r in df.collect()
        }
        assert len(got) == df.count() == len(model), "every committed record once"
        assert got == {k: v[:3] for k, v in model.items()}
        assert min(o for (p, o) in got if p == 0) == 0 < starts[0]
        # Without the archive the same read starts at the log start (failOnDataLoss off).
        live = load(failOnDataLoss="false", **{"kafka.isolation.level": "read_committed"})
        assert live.count() == sum(1 for (p, o) in model if o >= starts[p])
        # An explicit starting offset below the log start is served from the archive too.
        part = load(
            **{
                "archive.location": location,
                "startingOffsets": '{"hist": {"0": 5, "1": -2}}',
                "endingOffsets": '{"hist": {"0": 25, "1": 10}}',
                "kafka.isolation.level": "read_committed",
            }
        )
        rows = sorted((r.partition, r.offset) for r in part.collect())
        assert rows == sorted(k for k in model if (k[0] == 0 and 5 <= k[1] < 25) or (k[0] == 1 and k[1] < 10))
    # Spark's Parquet reader reads the files as they are.
    files = spark.read.option("recursiveFileLookup", "true").parquet(f"{location}/hist")
    archived = files.collect()
    assert {(r.partition, r.offset) for r in archived} == {k for k in model if k[1] < starts[k[0]]}
    assert files.schema.simpleString() == df.schema.simpleString()
