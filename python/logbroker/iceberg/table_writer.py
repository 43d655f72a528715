"""One commit of an Iceberg topic's partitions into its table (see logbroker/iceberg for the
exactly-once argument). Blocking (catalog, files, Parquet encoding): the broker runs it in a
thread.

A commit: load the table and its position (`table_offsets`); for each partition this node
leads, read the log from the table's position up to the last stable offset (at most
`max_bytes` of log in all, so memory stays bounded; what is left goes in the next commit);
append the rows and the moved position in one snapshot, conditional on the snapshot read.
With value schemas (iceberg.mode=value_schema_id_prefix), the table's value struct first
grows to hold every registered version's fields, and each batch's values are decoded into it
(value_schema.py). Decoding is Rust's (`arrow_records.log_batches`,
`_core.decode_avro_columns`, for Avro, JSON and Protobuf values); Python handles Arrow batches and buffers, never records.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from logbroker import _core
from logbroker.arrow_records import DecodeStalled, kafka_arrow_schema, log_batches
from logbroker.iceberg import IcebergError
from logbroker.iceberg.catalog import CatalogSettings, load_or_create_table, open_catalog
from logbroker.iceberg.table_offsets import TablePosition, read_position, table_ident
from logbroker.iceberg.table_schema import TABLE_PROPERTIES
from logbroker.iceberg.value_schema import ValueSchema

log = logging.getLogger("logbroker.iceberg")

MAX_COMMIT_BYTES = 64 << 20  # bytes of log one commit reads, over all its partitions


@dataclasses.dataclass
class PartitionSource:
    """A partition this node leads: its log and a check that it still does."""

    partition: int
    log: _core.Log
    still_leader: Callable[[], bool] = lambda: True
    # commit no further than this offset (besides the last stable offset): with value schemas,
    # the last stable offset read before the schemas were, so that every record committed was
    # produced after its schema id was registered and is among them
    upto: int | None = None


@dataclasses.dataclass
class CommitOutcome:
    table: str
    positions: dict[int, int]  # partition -> the table's next offset, after this commit (or as found)
    rows: int = 0
    snapshot_id: int | None = None
    more: bool = False  # stopped at max_bytes with records left below the last stable offset
    lost_race: bool = False  # another writer committed first; nothing of this one landed


class TableWriter:
    """Commits topics' records into their tables in one catalog (one per broker)."""

    def __init__(self, settings: CatalogSettings) -> None:
        self.settings = settings
        self._catalog = None

    def catalog(self):
        if self._catalog is None:
            self._catalog = open_catalog(self.settings)
        return self._catalog

    def table(self, topic: str, value_struct=None):
        table = load_or_create_table(self.catalog(), self.settings, topic, value_struct)
        if table.properties.get("commit.retry.num-retries") != TABLE_PROPERTIES["commit.retry.num-retries"]:
            # Someone changed it: the broker's conditional commits must not be retried by pyiceberg.
            with table.transaction() as tx:
                tx.set_properties({"commit.retry.num-retries": TABLE_PROPERTIES["commit.retry.num-retries"]})
            table = table.refresh()
        return table

    def commit(
        self,
        topic: str,
        topic_id: str,
        sources: Sequence[PartitionSource],
        *,
        max_bytes: int = MAX_COMMIT_BYTES,
        value_schemas: list[ValueSchema] | None = None,
    ) -> CommitOutcome:
        """Append what each source's log holds past the table's position, up to its last
        stable offset, in one conditional snapshot. `value_schemas`: (id, Avro schema text)
        of every version under `<topic>-value`, newest first, for value_schema_id_prefix."""
        import pyarrow as pa
        from pyiceberg.exceptions import CommitFailedException

        values = None
        if value_schemas is not None:
            table, values = self.value_table(topic, value_schemas)
        else:
            table = self.table(topic)
        ident = table_ident(table)
        position = read_position(table)
        schema = kafka_arrow_schema(include_headers=True)
        out_schema = values.arrow_schema(schema) if values is not None else schema
        batches: list = []
        advanced: dict[int, int] = {}
        budget = max_bytes
        more = False
        for src in sources:
            p = src.partition
            start = position.next_offset(topic_id, p)
            log_start, stable = src.log.log_start_offset, src.log.last_stable_offset()
            if src.upto is not None:
                stable = min(stable, src.upto)
            if start is None:
                start = log_start
            elif start < log_start:
                log.warning(
                    "table %s: %s-%d offsets %d..%d left the log before the table had them "
                    "(DeleteRecords, or iceberg.enable turned on late); going on from %d",
                    ident,
                    topic,
                    p,
                    start,
                    log_start - 1,
                    log_start,
                    extra={"topic": topic, "partition": p, "offset": start},
                )
                start = log_start
            elif start > src.log.log_end_offset:
                raise IcebergError(
                    f"table {ident} holds {topic}-{p} up to offset {start - 1}, past the log end "
                    f"offset {src.log.log_end_offset} of this leader; not writing it"
                )
            if start >= stable:
                continue
            if budget <= 0:
                more = True
                break
            taken = 0
            next_offset = start
            try:
                # next_offset is read after the loop (the offset to resume from), hence the noqa
                for next_offset, batch in log_batches(src.log, start, stable, schema, max_bytes=budget):  # noqa: B007
                    if batch is not None:
                        taken += batch.nbytes
                        batches.append(values.decode(batch, out_schema, ident) if values is not None else batch)
            except (_core.LogBrokerError, DecodeStalled) as e:
                raise IcebergError(f"table {ident}: reading {topic}-{p} offsets {start}..{stable - 1}: {e}") from None
            budget -= max(taken, 1)  # Arrow bytes: about the log's, uncompressed
            advanced[p] = next_offset
            more = more or next_offset < stable
        if not advanced:
            return CommitOutcome(ident, _positions(position, topic_id))
        if not all(src.still_leader() for src in sources if src.partition in advanced):
            return CommitOutcome(ident, _positions(position, topic_id), lost_race=True)
        rows = pa.Table.from_batches(batches, out_schema)
        try:
            table.append(rows, snapshot_properties=position.summary(topic_id, advanced))
        except CommitFailedException as e:
            log.info(
                "table %s: commit of %s partitions %s lost a race (%s); the next commit reads the table again",
                ident,
                topic,
                sorted(advanced),
                e,
                extra={"topic": topic},
            )
            return CommitOutcome(ident, _positions(position, topic_id), lost_race=True)
        except Exception as e:
            raise IcebergError(
                f"table {ident} in {self.settings.label()}: committing {topic} partitions "
                f"{ {p: (position.next_offset(topic_id, p), o) for p, o in advanced.items()} }: "
                f"{type(e).__name__}: {e}"
            ) from None
        snapshot = table.current_snapshot()
        after = _positions(position, topic_id)
        after.update(advanced)
        return CommitOutcome(ident, after, rows.num_rows, snapshot.snapshot_id if snapshot else None, more)

    def value_table(self, topic: str, value_schemas: list[ValueSchema]):
        """The table with its value struct grown to every registered version's fields, and
        the decoding of values into it."""
        from pyiceberg.schema import Schema
        from pyiceberg.types import NestedField

        from logbroker.iceberg import value_schema as vs

        if not value_schemas:
            raise IcebergError(
                f"iceberg.mode=value_schema_id_prefix: no Avro, JSON or Protobuf schema is registered under "
                f"{topic}-value yet"
            )
        struct = vs.value_struct(value_schemas)
        table = self.table(topic, struct)
        current = vs.from_iceberg(table.schema().find_field("value").field_type)
        grown = vs.merge_types(current, struct)
        if grown != current:
            ids = iter(range(10_000, 1 << 30))
            wanted = Schema(NestedField(2, "value", vs.iceberg_type(grown, lambda: next(ids)), required=False))
            with table.update_schema() as update:
                update.union_by_name(wanted)
            log.info(
                "table %s: value columns grown to the registered schemas of %s-value: %s",
                table_ident(table),
                topic,
                grown,
                extra={"topic": topic},
            )
            table = table.refresh()
            current = vs.from_iceberg(table.schema().find_field("value").field_type)
        return table, ValueDecoding(topic, current, value_schemas)


class ValueDecoding:
    """Decodes the value column of Kafka-schema batches into the table's value struct."""

    def __init__(self, topic: str, struct, value_schemas: list[ValueSchema]) -> None:
        from logbroker.iceberg import value_schema as vs

        self.topic = topic
        self.tree = vs.ReaderTree(struct)
        self.programs: list[tuple[int, tuple]] = []
        for v in value_schemas:
            try:
                self.programs.append((v.id, vs.program(v, self.tree)))
            except (IcebergError, ValueError, KeyError, TypeError) as e:
                log.warning(
                    "topic %s: schema id %d of %s-value cannot be read into the table (%s); its values go to value_raw",
                    topic,
                    v.id,
                    topic,
                    e,
                    extra={"topic": topic},
                )

    def arrow_schema(self, kafka_schema):
        import pyarrow as pa

        fields = [pa.field("value", self.tree.arrow_type()) if f.name == "value" else f for f in kafka_schema]
        return pa.schema(fields + [pa.field("value_schema_id", pa.int32()), pa.field("value_raw", pa.binary())])

    def decode(self, batch, out_schema, ident: str):
        import pyarrow as pa

        n = batch.num_rows
        values = batch.column("value")
        validity, offsets, data = values.buffers()
        validity = validity if validity is not None else b"\xff" * ((n + 7) // 8)
        got = _core.decode_avro_columns(
            n, validity, offsets, data if data is not None else b"", self.tree.nodes, self.programs
        )
        if got["failures"]:
            row, why = got["first_failure"]
            log.warning(
                "table %s: %d value(s) of %s-%d did not decode and went to value_raw; the first, at offset %d: %s",
                ident,
                got["failures"],
                self.topic,
                batch.column("partition")[0].as_py(),
                batch.column("offset")[row].as_py(),
                why,
                extra={"topic": self.topic},
            )

        def flat(col: dict, typ):
            validity = pa.py_buffer(col["validity"]) if col["nulls"] else None
            if typ == pa.binary():
                return pa.Array.from_buffers(
                    typ, n, [validity, pa.py_buffer(col["offsets"]), pa.py_buffer(col["data"])], null_count=col["nulls"]
                )
            return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(col["values"])], null_count=col["nulls"])

        arrays = [
            self.tree.arrow_array(got["columns"]) if f.name == "value" else batch.column(f.name) for f in batch.schema
        ]
        arrays += [flat(got["schema_id"], pa.int32()), flat(got["raw"], pa.binary())]
        return pa.RecordBatch.from_arrays(arrays, schema=out_schema)


def _positions(position: TablePosition, topic_id: str) -> dict[int, int]:
    return dict(position.offsets) if position.topic_id == topic_id else {}
