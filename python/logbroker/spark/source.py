"""The `logbroker` PySpark data source (batch and streaming read; write).

    from logbroker.spark import register
    register(spark)
    df = (spark.read.format("logbroker")
          .option("bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .load())

Options follow Spark's Kafka source (`kafka.bootstrap.servers` is accepted too):
subscribe | subscribePattern | assign (JSON {"t": [0, 1]}), startingOffsets /
endingOffsets (earliest, latest, or JSON {"t": {"0": 23, "1": -2}}), startingTimestamp /
endingTimestamp and startingOffsetsByTimestamp / endingOffsetsByTimestamp (ms),
includeHeaders, minPartitions, maxOffsetsPerTrigger (streaming), failOnDataLoss.
The schema is Spark's Kafka source schema, so a job can switch between the two; with
`value.format=registry` / `key.format=registry` the value / key is a struct column decoded
through the schema registry (logbroker/spark/registry.py).

Each Spark input partition is one topic-partition offset range (split into several
when minPartitions asks for more tasks); executors fetch it straight from the partition
leader and get Arrow record batches decoded in Rust.
"""

from __future__ import annotations

import json

from logbroker.spark.extra import require_spark_extra
from logbroker.spark.kafka_io import EARLIEST, LATEST, Cluster, SparkSourceError, read_range
from logbroker.spark.registry import Column, RegistryOptions
from logbroker.spark.security import connection_settings

require_spark_extra()

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition  # noqa: E402

from logbroker.archive import STORE_KEYS, ArchiveStore  # noqa: E402

COLUMNS = [
    "key binary",
    "value binary",
    "topic string",
    "partition int",
    "offset long",
    "timestamp timestamp",
    "timestampType int",
]
HEADERS_COLUMN = "headers array<struct<key: string, value: binary>>"
SCHEMA = ", ".join(COLUMNS)
HEADERS = ", " + HEADERS_COLUMN


def _topics(o: dict) -> list[str] | None:
    """The topics named by subscribe or assign (None for subscribePattern)."""
    if o.get("subscribe"):
        return [t.strip() for t in o["subscribe"].split(",") if t.strip()]
    if o.get("assign"):
        return sorted(json.loads(o["assign"]))
    return None


class OffsetRange(InputPartition):
    """One Spark task's work: offsets [start, end) of topic-partition; with registry columns,
    `programs` (column name -> the programs of its subject's versions, planned on the driver)."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end
        self.programs: dict[str, list] | None = None


class Options:
    """Parsed, validated options (plain data: picklable)."""

    def __init__(self, options: dict, streaming: bool) -> None:
        o = {k.lower(): v for k, v in options.items()}
        self.bootstrap = o.get("bootstrap.servers") or o.get("kafka.bootstrap.servers")
        if not self.bootstrap:
            raise SparkSourceError("option bootstrap.servers (or kafka.bootstrap.servers) is required")
        modes = [k for k in ("subscribe", "subscribepattern", "assign") if o.get(k)]
        if len(modes) != 1:
            raise SparkSourceError("exactly one of subscribe, subscribePattern and assign must be set")
        self.subscribe = [t.strip() for t in o["subscribe"].split(",") if t.strip()] if o.get("subscribe") else None
        self.pattern = o.get("subscribepattern")
        self.assign = (
            {t: [int(p) for p in ps] for t, ps in json.loads(o["assign"]).items()} if o.get("assign") else None
        )
        self.include_headers = str(o.get("includeheaders", "false")).lower() == "true"
        # value.format / key.format=registry: struct columns (spark/registry.py)
        self.registry = RegistryOptions(o, _topics(o))
        self.fail_on_data_loss = str(o.get("failondataloss", "true")).lower() == "true"
        isolation = str(o.get("kafka.isolation.level", "read_uncommitted")).lower()
        if isolation not in ("read_uncommitted", "read_committed"):
            raise SparkSourceError(
                f"kafka.isolation.level must be read_uncommitted or read_committed, not {isolation!r}"
            )
        self.read_committed = isolation == "read_committed"
        self.min_partitions = int(o["minpartitions"]) if o.get("minpartitions") else None
        self.max_per_trigger = int(o["maxoffsetspertrigger"]) if o.get("maxoffsetspertrigger") else None
        # archive.location (+ archive.s3.*): offsets below the log start are read from what
        # retention.archive wrote, and "earliest" means the first archived offset.
        self.archive = {k: str(o[k]) for k in STORE_KEYS if o.get(k)} if o.get("archive.location") else None
        self.starting = self._spec(o, "starting", "latest" if streaming else "earliest")
        self.ending = self._spec(o, "ending", "latest")
        # kafka.security.protocol, kafka.sasl.*, kafka.ssl.*; with delegationToken=true a
        # token made here, on the driver, and only it shipped to the executors (spark/security.py)
        self.client, self.token = connection_settings(o, self.bootstrap)

    def cluster(self) -> Cluster:
        """A driver-side connection; a streaming reader's token is renewed first when due."""
        if self.token is not None and self.token.due():
            self.token.refresh()
            self.client = self.token.settings
        return Cluster(self.bootstrap, self.read_committed, self.client)

    @staticmethod
    def _spec(o: dict, which: str, default: str):
        if o.get(f"{which}offsetsbytimestamp"):
            return ("by_timestamp", json.loads(o[f"{which}offsetsbytimestamp"]))
        if o.get(f"{which}timestamp"):
            return ("timestamp", int(o[f"{which}timestamp"]))
        raw = o.get(f"{which}offsets", default)
        if raw in ("earliest", "latest"):
            return (raw, None)
        return ("json", json.loads(raw))

    def resolve(self, cluster: Cluster, spec, parts: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        kind, value = spec
        if kind == "earliest":
            return self._earliest(cluster, parts)
        if kind == "latest":
            return cluster.list_offsets({tp: LATEST for tp in parts})
        if kind == "timestamp":
            found = cluster.list_offsets({tp: value for tp in parts})
            latest = cluster.list_offsets({tp: LATEST for tp in parts})
            return {tp: (o if o >= 0 else latest[tp]) for tp, o in found.items()}
        if kind == "by_timestamp":
            want = {(t, int(p)): int(ts) for t, ps in value.items() for p, ts in ps.items()}
            found = cluster.list_offsets({tp: ts for tp, ts in want.items() if tp in parts})
            latest = cluster.list_offsets({tp: LATEST for tp in found})
            return {tp: (o if o >= 0 else latest[tp]) for tp, o in found.items()}
        # json: explicit offsets, -2 earliest, -1 latest; unnamed partitions from the default
        explicit = {(t, int(p)): int(off) for t, ps in value.items() for p, off in ps.items()}
        out = {}
        special = {tp: explicit.get(tp, LATEST if spec is self.ending else EARLIEST) for tp in parts}
        lookup = cluster.list_offsets({tp: v for tp, v in special.items() if v == LATEST})
        lookup.update(self._earliest(cluster, [tp for tp, v in special.items() if v == EARLIEST]))
        for tp in parts:
            v = special[tp]
            out[tp] = lookup[tp] if v < 0 else v
        return out

    def _earliest(self, cluster: Cluster, parts: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The log start offsets, or with an archive its first offset where that is lower."""
        found = cluster.list_offsets({tp: EARLIEST for tp in parts}) if parts else {}
        if self.archive is not None and parts:
            store = ArchiveStore.from_keys(self.archive)
            ids = cluster.topic_ids([t for t, _ in parts])  # the live incarnation of each topic
            for tp in parts:
                files = store.files(tp[0], tp[1], ids.get(tp[0], ""))
                if files:
                    found[tp] = min(found[tp], files[0].first_offset)
        return found


def _split(topic: str, partition: int, start: int, end: int, pieces: int) -> list[OffsetRange]:
    pieces = max(1, min(pieces, end - start))
    size = -(-(end - start) // pieces) if end > start else 0
    return [OffsetRange(topic, partition, s, min(s + size, end)) for s in range(start, end, size)] if size else []


class LogbrokerDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "logbroker"

    def schema(self) -> str:
        o = {k.lower(): v for k, v in self.options.items()}
        include = str(o.get("includeheaders", "false")).lower() == "true"
        registry = RegistryOptions(o, _topics(o))
        if not registry.names:
            return SCHEMA + (HEADERS if include else "")
        return registry.ddl(COLUMNS + ([HEADERS_COLUMN] if include else []), registry.plan())

    def reader(self, schema):
        return LogbrokerBatchReader(Options(dict(self.options), streaming=False), schema)

    def streamReader(self, schema):
        return LogbrokerStreamReader(Options(dict(self.options), streaming=True), schema)

    def writer(self, schema, overwrite: bool):
        from logbroker.spark.sink import LogbrokerWriter

        return LogbrokerWriter(dict(self.options), schema)

    def streamWriter(self, schema, overwrite: bool):
        from logbroker.spark.sink import LogbrokerStreamWriter

        return LogbrokerStreamWriter(dict(self.options), schema)


def _arrow_schema(schema):
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


class _Reading:
    opts: Options
    schema: object
    _columns: list[Column] | None = None

    def _registry_columns(self) -> list[Column]:
        """The registry columns of this query (their structs as its schema has them)."""
        if self._columns is None:
            self._columns = self.opts.registry.from_schema(self.schema)
        return self._columns

    def _programs(self) -> dict[str, list] | None:
        """Driver side, as each batch is planned: the programs of every version registered
        by now, for the executors."""
        columns = self._registry_columns()
        if not columns:
            return None
        for c in columns:
            c.refresh(self.opts.registry.registry)
        return {c.name: c.programs for c in columns}

    def _with_programs(self, ranges: list[OffsetRange]) -> list[OffsetRange]:
        programs = self._programs() if ranges else None
        for r in ranges:
            r.programs = programs
        return ranges

    def read(self, partition: OffsetRange):
        if not isinstance(partition, OffsetRange):
            return  # no range to read: Spark hands one placeholder partition when partitions() is empty
        from logbroker.arrow_records import kafka_arrow_schema

        columns = self._registry_columns()
        arrow = _arrow_schema(self.schema)
        batches = read_range(
            self.opts.bootstrap,
            partition.topic,
            partition.partition,
            partition.start,
            partition.end,
            kafka_arrow_schema(self.opts.include_headers) if columns else arrow,
            self.opts.include_headers,
            self.opts.fail_on_data_loss,
            read_committed=self.opts.read_committed,
            archive=self.opts.archive,
            config=self.opts.client,
        )
        if not columns:
            yield from batches
            return
        for c in columns:
            c.programs = (partition.programs or {}).get(c.name, [])
        for batch in batches:
            yield self._decoded(batch, columns, arrow, partition)

    def _decoded(self, batch, columns: list[Column], arrow, partition: OffsetRange):
        """A Kafka-schema batch with its registry columns decoded (Rust, no row in Python)."""
        import pyarrow as pa

        where = (partition.topic, partition.partition, batch.column("offset"))
        decoded = {}
        for c in columns:
            struct, ids, raw = c.decode(batch.column(c.name), arrow, self.opts.registry.fail_fast, where)
            decoded.update({c.name: struct, f"{c.name}_schema_id": ids, f"{c.name}_raw": raw})
        arrays = [decoded[f.name] if f.name in decoded else batch.column(f.name) for f in arrow]
        return pa.RecordBatch.from_arrays(arrays, schema=arrow)


class LogbrokerBatchReader(_Reading, DataSourceReader):
    def __init__(self, opts: Options, schema) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self):
        o = self.opts
        with o.cluster() as cluster:
            parts = sorted(cluster.partitions(o.subscribe, o.pattern, o.assign))
            starts = o.resolve(cluster, o.starting, parts)
            ends = o.resolve(cluster, o.ending, parts)
        ranges = [(tp, starts[tp], ends[tp]) for tp in parts if ends[tp] > starts[tp]]
        total = sum(e - s for _, s, e in ranges)
        out: list[OffsetRange] = []
        for (t, p), s, e in ranges:
            pieces = 1
            if o.min_partitions and total and o.min_partitions > len(ranges):
                pieces = max(1, round(o.min_partitions * (e - s) / total))
            out.extend(_split(t, p, s, e, pieces))
        return self._with_programs(out)


try:  # Spark 4.2+: Trigger.AvailableNow freezes a target offset
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # Spark 4.0/4.1
    _AvailableNow = object


class LogbrokerStreamReader(_Reading, DataSourceStreamReader, _AvailableNow):
    """Offsets in the checkpoint: {"topic": {"partition": next offset to read}}."""

    def __init__(self, opts: Options, schema) -> None:
        self.opts = opts
        self.schema = schema
        self._frozen: dict | None = None

    @staticmethod
    def _to_json(offsets: dict[tuple[str, int], int]) -> dict:
        out: dict = {}
        for (t, p), o in sorted(offsets.items()):
            out.setdefault(t, {})[str(p)] = o
        return out

    @staticmethod
    def _from_json(d: dict) -> dict[tuple[str, int], int]:
        return {(t, int(p)): int(o) for t, ps in d.items() for p, o in ps.items()}

    def initialOffset(self) -> dict:
        o = self.opts
        with o.cluster() as cluster:
            parts = sorted(cluster.partitions(o.subscribe, o.pattern, o.assign))
            return self._to_json(o.resolve(cluster, o.starting, parts))

    def _latest(self) -> dict[tuple[str, int], int]:
        o = self.opts
        with o.cluster() as cluster:
            parts = sorted(cluster.partitions(o.subscribe, o.pattern, o.assign))
            return cluster.list_offsets({tp: LATEST for tp in parts})

    def getDefaultReadLimit(self):
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        return ReadMaxRows(self.opts.max_per_trigger) if self.opts.max_per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._frozen = self._to_json(self._latest())

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        latest = self._from_json(self._frozen) if self._frozen is not None else self._latest()
        if start is None:
            return self._to_json(latest)
        begin = self._from_json(start)
        for tp in latest:
            begin.setdefault(tp, 0)  # a new partition is read from its start
        max_rows = getattr(limit, "max_rows", None)
        if max_rows is None:
            return self._to_json({tp: max(latest[tp], begin[tp]) for tp in latest})
        # spread the limit over partitions in proportion to what each has waiting
        waiting = {tp: max(0, latest[tp] - begin[tp]) for tp in latest}
        total = sum(waiting.values())
        if total <= max_rows:
            return self._to_json({tp: begin[tp] + waiting[tp] for tp in latest})
        out, budget = {}, max_rows
        for tp in sorted(latest):
            share = min(waiting[tp], (waiting[tp] * max_rows) // total)
            out[tp] = begin[tp] + share
            budget -= share
        for tp in sorted(latest):  # hand out what rounding left
            extra = min(budget, begin[tp] + waiting[tp] - out[tp])
            out[tp] += extra
            budget -= extra
        return self._to_json(out)

    def partitions(self, start: dict, end: dict):
        s, e = self._from_json(start), self._from_json(end)
        out = []
        for tp, last in sorted(e.items()):
            first = s.get(tp, 0)
            if last < first and self.opts.fail_on_data_loss:
                raise SparkSourceError(f"{tp[0]}-{tp[1]}: end offset {last} is before start offset {first}")
            if last > first:
                out.append(OffsetRange(tp[0], tp[1], first, last))
        return self._with_programs(out)

    def commit(self, end: dict) -> None:
        pass  # Spark's checkpoint is the source of truth, as with Spark's Kafka source

    def stop(self) -> None:
        pass
