"""One commit of an Iceberg topic's partitions into its table (see logbroker/iceberg for the
exactly-once argument). Blocking (catalog, files): the broker runs it in a thread.

A commit: load the table and its position (`table_offsets`); for each partition this node
leads, have Rust (`_core.TableDataFiles`, rust/src/table/) read the log from the table's
position up to the last stable offset (at most `max_bytes` of log in all, so memory stays
bounded; what is left goes in the next commit), decode it and write Parquet data files, one
per day partition, with the GIL released; read each file's footer for the table's column
statistics (pyiceberg's `parquet_file_to_data_file`); append the files and the moved
position in one snapshot, conditional on the snapshot read. Files of a commit that does not
land are deleted. An upsert table (iceberg.upsert.enable) keeps one row per key: Rust writes
each key's latest record of every decoded stretch of log (1 MiB) and position deletes of the
rows it replaces, found in the partition's key index (upsert_index.py), including rows
written earlier in the same commit; all are committed with the data files in one snapshot
(position_deletes.py). With value schemas (iceberg.mode=value_schema_id_prefix), the table's
value struct first grows to hold every registered version's fields, and Rust decodes each
value into it (value_schema.py compiles the programs). Python handles files and metadata,
never records.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Sequence

from logbroker import _core
from logbroker.iceberg import IcebergError
from logbroker.iceberg.catalog import CatalogSettings, load_or_create_table, open_catalog
from logbroker.iceberg.table_offsets import TablePosition, read_position, table_ident
from logbroker.iceberg.table_schema import TABLE_PROPERTIES, spec_fields, table_schema, writer_arrow_schema
from logbroker.iceberg.upsert_index import UPSERT_PARTITIONS, UpsertIndexes
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
    base_snapshot_id: int | None = None  # the snapshot the commit read (and was conditional on)
    # the files it added: {"path", "partition", "min_offset", "max_offset", "rows", "deletes", ...}
    files: list[dict] = dataclasses.field(default_factory=list)
    loaded: object = None  # the pyiceberg Table it read (updated in place by its commit)


class TableWriter:
    """Commits topics' records into their tables in one catalog (one per broker)."""

    def __init__(self, settings: CatalogSettings) -> None:
        self.settings = settings
        self._catalog = None

    def catalog(self):
        if self._catalog is None:
            self._catalog = open_catalog(self.settings)
        return self._catalog

    def table(self, topic: str, value_struct=None, key_struct=None, spec: str | None = None):
        table = load_or_create_table(self.catalog(), self.settings, topic, value_struct, key_struct, spec)
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
        upsert: UpsertIndexes | None = None,
        key_schemas: list[ValueSchema] | None = None,
        dead_letters: bool = False,
        partition_spec: str | None = None,
    ) -> CommitOutcome:
        """Append what each source's log holds past the table's position, up to its last
        stable offset, in one conditional snapshot. `value_schemas`: (id, Avro schema text)
        of every version under `<topic>-value`, newest first, for value_schema_id_prefix;
        `key_schemas` the same of `<topic>-key` (keys decoded into `key_struct`).
        `upsert`: the key indexes of an upsert table (iceberg.upsert.enable): one row per
        key, the rows replaced deleted by position in the same snapshot (upsert_index.py).
        `dead_letters`: values that do not decode go to the dead-letter table, committed
        first (dead_letters.py), instead of `value_raw`. `partition_spec`: iceberg.partition.spec,
        for a table created now (rows go by the table's current spec)."""
        try:
            return self._commit(
                topic, topic_id, sources, max_bytes, value_schemas, upsert, key_schemas, dead_letters, partition_spec
            )
        finally:
            if upsert is not None:
                upsert.settle_open(topic_id)

    def _commit(
        self,
        topic: str,
        topic_id: str,
        sources: Sequence[PartitionSource],
        max_bytes: int,
        value_schemas: list[ValueSchema] | None,
        upsert: UpsertIndexes | None,
        key_schemas: list[ValueSchema] | None = None,
        dead_letters: bool = False,
        partition_spec: str | None = None,
    ) -> CommitOutcome:
        from pyiceberg.exceptions import CommitFailedException

        from logbroker.iceberg.dead_letters import SUFFIX, DeadLettersLostRace, commit_dead_letters

        values = keys = None
        if value_schemas is not None:
            table, values, keys = self.value_table(topic, value_schemas, key_schemas or [], partition_spec)
        else:
            table = self.table(topic, spec=partition_spec)
        ident = table_ident(table)
        position = read_position(table)
        dead_letters = dead_letters and values is not None  # only values decoded by schema can fail
        files = data_files_of(table, values, keys, dead_letters)
        advanced: dict[int, int] = {}
        rows = 0
        budget = max_bytes
        more = False
        try:
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
                try:
                    index = upsert.for_commit(table, topic_id, p) if upsert is not None else None
                    got = files.write_log(src.log, start, stable, budget, index)
                except (_core.LogBrokerError, _core.TableDataFileError) as e:
                    raise IcebergError(
                        f"table {ident}: reading {topic}-{p} offsets {start}..{stable - 1}: {e}"
                    ) from None
                if got["failures"]:
                    at, why = got["first_failure"]
                    log.warning(
                        "table %s: %d value(s) of %s-%d did not decode and went to %s; the first, at offset %d: %s",
                        ident,
                        got["failures"],
                        topic,
                        p,
                        f"the dead-letter table {ident}{SUFFIX}" if dead_letters else "value_raw",
                        at,
                        why,
                        extra={"topic": topic, "partition": p, "offset": at},
                    )
                budget -= max(got["read_bytes"], 1)
                rows += got["rows"]
                advanced[p] = got["next_offset"]
                more = more or got["next_offset"] < stable
            if not advanced:
                files.abort()
                return CommitOutcome(
                    ident, _positions(position, topic_id), base_snapshot_id=position.snapshot_id, loaded=table
                )
            if not all(src.still_leader() for src in sources if src.partition in advanced):
                files.abort()
                return CommitOutcome(
                    ident, _positions(position, topic_id), lost_race=True, base_snapshot_id=position.snapshot_id
                )
            try:
                dead = files.take_dead_letters()
                written = files.close()
            except _core.TableDataFileError as e:
                raise IcebergError(
                    f"table {ident}: writing the data files of {topic} {sorted(advanced)}: {e}"
                ) from None
        except BaseException:
            files.abort()
            raise
        try:
            if dead is not None:
                try:
                    commit_dead_letters(self.catalog(), table, topic_id, dead, advanced)
                except BaseException:
                    delete_files(table, written)
                    raise
            added = [data_file(table, w) for w in written if not w["deletes"]]
            summary = position.summary(topic_id, advanced)
            with table.transaction() as tx:
                if upsert is not None:
                    from logbroker.iceberg.position_deletes import UpsertCommit, delete_file

                    summary[UPSERT_PARTITIONS] = ",".join(str(p) for p in sorted(advanced))
                    with UpsertCommit(tx, table.io, summary) as append:
                        for f in added:
                            append.append_data_file(f)
                        for w in written:
                            if w["deletes"]:
                                append.append_delete_file(delete_file(table, w))
                else:
                    with tx.update_snapshot(snapshot_properties=summary).merge_append() as append:
                        for f in added:
                            append.append_data_file(f)
        except (CommitFailedException, DeadLettersLostRace) as e:
            if not isinstance(e, DeadLettersLostRace):
                delete_files(table, written)
            log.info(
                "table %s: commit of %s partitions %s lost a race (%s); the next commit reads the table again",
                ident,
                topic,
                sorted(advanced),
                e,
                extra={"topic": topic},
            )
            return CommitOutcome(
                ident, _positions(position, topic_id), lost_race=True, base_snapshot_id=position.snapshot_id
            )
        except IcebergError:
            raise
        except Exception as e:
            raise IcebergError(
                f"table {ident} in {self.settings.label()}: committing {topic} partitions "
                f"{ {p: (position.next_offset(topic_id, p), o) for p, o in advanced.items()} }: "
                f"{type(e).__name__}: {e}"
            ) from None
        snapshot = table.current_snapshot()  # the transaction's commit updated `table` in place
        if upsert is not None:
            upsert.landed(topic_id, advanced, snapshot.snapshot_id if snapshot else None)
        after = _positions(position, topic_id)
        after.update(advanced)
        return CommitOutcome(
            ident,
            after,
            rows,
            snapshot.snapshot_id if snapshot else None,
            more,
            base_snapshot_id=position.snapshot_id,
            files=[{k: v for k, v in w.items() if k != "contents"} for w in written],
            loaded=table,
        )

    def value_table(
        self,
        topic: str,
        value_schemas: list[ValueSchema],
        key_schemas: Sequence[ValueSchema] = (),
        spec: str | None = None,
    ):
        """The table with its value struct grown to every registered version's fields, and
        the decoding of values into it; with `key_schemas` (`<topic>-key`'s versions) the same
        for its `key_struct` (None: the table has no key columns)."""
        from logbroker.iceberg import value_schema as vs

        if not value_schemas:
            raise IcebergError(
                f"iceberg.mode=value_schema_id_prefix: no Avro, JSON or Protobuf schema is registered under "
                f"{topic}-value yet"
            )
        struct = vs.value_struct(value_schemas)
        key_struct = None
        if key_schemas:
            try:
                key_struct = vs.value_struct(list(key_schemas))
            except IcebergError:
                pass  # a key schema without fields (a string, a long): keys stay raw
        table = self.table(topic, struct, key_struct, spec)
        have = _struct_columns(table)
        want = (
            vs.merge_types(have[0], struct),
            have[1] if key_struct is None else key_struct if have[1] is None else vs.merge_types(have[1], key_struct),
        )
        if want != have:
            # Iceberg schema evolution: new optional fields, and the key columns if new
            with table.update_schema() as update:
                update.union_by_name(table_schema(*want))
            log.info(
                "table %s: columns grown to the registered schemas of %s-value and %s-key: value %s, key %s",
                table_ident(table),
                topic,
                topic,
                want[0],
                want[1],
                extra={"topic": topic},
            )
            table = table.refresh()
            have = _struct_columns(table)
        keys = ValueDecoding(topic, have[1], list(key_schemas), "key") if have[1] is not None else None
        return table, ValueDecoding(topic, have[0], value_schemas), keys


def _struct_columns(table) -> tuple:
    """The abstract types of the table's `value` and `key_struct` columns (None: no key columns)."""
    from logbroker.iceberg import value_schema as vs

    fields = {f.name: f for f in table.schema().fields}
    key = fields.get("key_struct")
    return vs.from_iceberg(fields["value"].field_type), vs.from_iceberg(key.field_type) if key is not None else None


class ValueDecoding:
    """Decodes the value column of Kafka-schema batches into the table's value struct."""

    def __init__(self, topic: str, struct, value_schemas: list[ValueSchema], subject: str = "value") -> None:
        from logbroker.iceberg import value_schema as vs

        self.topic = topic
        self.tree = vs.ReaderTree(struct)
        self.programs: list[tuple[int, tuple]] = []
        for v in value_schemas:
            try:
                self.programs.append((v.id, vs.program(v, self.tree)))
            except (IcebergError, ValueError, KeyError, TypeError) as e:
                log.warning(
                    "topic %s: schema id %d of %s-%s cannot be read into the table (%s); such %ss stay undecoded "
                    "(values in value_raw, keys in key)",
                    topic,
                    v.id,
                    topic,
                    subject,
                    e,
                    subject,
                    extra={"topic": topic},
                )


def data_files_of(
    table, values: ValueDecoding | None, keys: ValueDecoding | None = None, dead_letters: bool = False
) -> _core.TableDataFiles:
    """The Rust writer of one commit's data files, with the table's schema and write.* properties."""
    props = table.properties
    location = props.get("write.data.path") or f"{table.location().rstrip('/')}/data"
    level = props.get("write.parquet.compression-level")
    try:
        return _core.TableDataFiles(
            writer_arrow_schema(table.schema()).serialize().to_pybytes(),
            location,
            uuid.uuid4().hex,
            props.get("write.parquet.compression-codec", TABLE_PROPERTIES["write.parquet.compression-codec"]),
            int(level) if level not in (None, "") else None,
            int(props.get("write.parquet.row-group-size-bytes", 128 << 20)),
            int(props.get("write.target-file-size-bytes", 512 << 20)),
            values.tree.nodes if values is not None else None,
            values.programs if values is not None else None,
            keys.tree.nodes if keys is not None else None,
            keys.programs if keys is not None else None,
            dead_letters,
            spec_fields(table),
        )
    except (ValueError, _core.TableDataFileError) as e:
        raise IcebergError(
            f"table {table_ident(table)}: its data files cannot be written as its properties say: {e}"
        ) from None


def data_file(table, written: dict):
    """The DataFile of a file the Rust writer closed (put to object storage first when it was
    kept in memory): the column statistics of its footer, as pyiceberg's
    `parquet_file_to_data_file` reads them, and the partition the writer put it in (which a
    bucket cannot be told from the footer's bounds)."""
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import (
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    if written["contents"] is not None:
        with table.io.new_output(written["path"]).create(overwrite=True) as out:
            out.write(written["contents"])
    meta = table.metadata
    schema = meta.schema()
    with table.io.new_input(written["path"]).open() as stream:
        footer = pq.read_metadata(stream)
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=footer,
        stats_columns=compute_statistics_plan(schema, meta.properties),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=written["path"],
        file_format=FileFormat.PARQUET,
        partition=Record(*written["partition_values"]),
        file_size_in_bytes=written["bytes"],
        sort_order_id=None,
        spec_id=meta.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )


def delete_files(table, written: list[dict]) -> None:
    """Removes the files of a commit that did not land (no snapshot refers to them)."""
    for w in written:
        try:
            table.io.delete(w["path"])
        except Exception as e:  # best effort: an orphan file costs space, not correctness
            log.info("table %s: leaving unreferenced data file %s: %s", table_ident(table), w["path"], e)


def _positions(position: TablePosition, topic_id: str) -> dict[int, int]:
    return dict(position.offsets) if position.topic_id == topic_id else {}
