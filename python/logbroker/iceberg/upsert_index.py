"""The key indexes of an upsert table's partitions (`iceberg.upsert.enable`; the index itself
and the rows it writes: rust/src/table/key_index.rs, rust/src/table/data_files.rs).

A commit to an upsert table needs, for each partition it writes, an index of that
partition's live keys as of the snapshot it commits on. This node keeps the index of each
partition it has committed, with the snapshot it is true at (`as_of`): its own last commit
of the partition, or the snapshot a rebuild read. Before a commit the index is checked
against the table: every snapshot after `as_of` must be the broker's (summary
`logbroker.upsert.partitions`: the Kafka partitions whose rows it wrote or moved, a commit's
or a compaction's) and not name this partition; otherwise (another node led the partition
meanwhile, a compaction rewrote its files, someone else wrote, `as_of` is no longer in the
history) the index is rebuilt from the table: each live data file of the
partition, in offset order, read for its key column, less the positions its position
deletes name. Building costs one read of the partition's key column; a leader keeps its
index, so that is paid once per leadership, not per commit.

The commit's changes to an index stand only once the snapshot lands (`TableKeyIndex.settle`):
a commit that loses a race or fails leaves the index as it was.
"""

from __future__ import annotations

import logging
import time

from logbroker import _core
from logbroker.iceberg import IcebergError
from logbroker.iceberg.table_offsets import table_ident

log = logging.getLogger("logbroker.iceberg")

# summary property of the broker's snapshots of an upsert table: the Kafka partitions whose
# rows they wrote (a commit) or moved (a compaction), "0,3,7"
UPSERT_PARTITIONS = "logbroker.upsert.partitions"
PARTITION_COLUMN = "partition"
KEY_COLUMN = "key"
OFFSET_FIELD_ID = 5  # table_schema.py: the offset column, whose bounds order a partition's files
DAY_FIELD = "timestamp_day"


def written_partitions(snapshot) -> set[int] | None:
    """The partitions a broker upsert commit wrote; None: not such a commit."""
    props = snapshot.summary.additional_properties if snapshot.summary is not None else {}
    raw = props.get(UPSERT_PARTITIONS)
    if raw is None:
        return None
    try:
        return {int(p) for p in raw.split(",") if p}
    except ValueError:
        return None  # not ours to read: as if another writer's


class UpsertIndexes:
    """The key indexes of the upsert partitions this node commits, by topic id and partition."""

    def __init__(self) -> None:
        # topic id -> partition -> (index, the snapshot it is true at)
        self._indexes: dict[str, dict[int, tuple[_core.TableKeyIndex, int | None]]] = {}

    def for_commit(self, table, topic_id: str, partition: int) -> _core.TableKeyIndex:
        """The partition's index, true as of the table's current snapshot (rebuilt if not)."""
        mine = self._indexes.setdefault(topic_id, {})
        have = mine.get(partition)
        current = table.current_snapshot()
        current_id = current.snapshot_id if current is not None else None
        if have is not None and _unchanged_since(table, have[1], current_id, partition):
            return have[0]
        index = rebuild(table, partition)
        mine[partition] = (index, current_id)
        return index

    def landed(self, topic_id: str, partitions, snapshot_id: int | None) -> None:
        """A commit that wrote `partitions` landed as `snapshot_id`."""
        mine = self._indexes.get(topic_id, {})
        for p in partitions:
            have = mine.get(p)
            if have is not None:
                have[0].settle(True)
                mine[p] = (have[0], snapshot_id)

    def settle_open(self, topic_id: str) -> None:
        """After a commit of the topic, landed or not: an index it changed and `landed` did
        not settle is put back as it was (the commit did not land)."""
        for index, _ in self._indexes.get(topic_id, {}).values():
            index.settle(False)

    def keep(self, led: dict[str, set[int]]) -> None:
        """Keep only the indexes of `led` (topic id -> the upsert partitions this node leads
        now): those of a deleted topic, a topic no longer upsert and a partition led
        elsewhere go (a partition that comes back is rebuilt)."""
        for topic_id in [t for t in self._indexes if t not in led]:
            del self._indexes[topic_id]
        for topic_id, partitions in led.items():
            mine = self._indexes.get(topic_id)
            if mine is not None and not mine.keys() <= partitions:
                for p in [p for p in mine if p not in partitions]:
                    del mine[p]

    def __len__(self) -> int:
        return sum(len(m) for m in self._indexes.values())


def _unchanged_since(table, as_of: int | None, current: int | None, partition: int) -> bool:
    """Every snapshot after `as_of` up to `current` is a broker upsert commit of other
    partitions (so the partition's rows are as the index has them)."""
    snapshot = table.snapshot_by_id(current) if current is not None else None
    while True:
        at = snapshot.snapshot_id if snapshot is not None else None
        if at == as_of:
            return True
        if snapshot is None:
            return False  # as_of is not in the history (expired, or a table made again)
        wrote = written_partitions(snapshot)
        if wrote is None or partition in wrote:
            return False
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None


def rebuild(table, partition: int) -> _core.TableKeyIndex:
    """The partition's index from the table as loaded: its live data files' keys, less
    their position deletes."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pyiceberg.expressions import EqualTo

    started = time.monotonic()
    index = _core.TableKeyIndex()
    ident = table_ident(table)
    try:
        tasks = list(table.scan(row_filter=EqualTo(PARTITION_COLUMN, partition)).plan_files())
    except Exception as e:  # pyiceberg, the catalog, the files: name the table
        raise IcebergError(f"table {ident}: listing partition {partition}'s files for its key index: {e}") from None

    def first_offset(task) -> int:
        lo = (task.file.lower_bounds or {}).get(OFFSET_FIELD_ID)
        return int.from_bytes(lo, "little", signed=True) if lo is not None else -1

    superseded = 0
    deletes_read: dict[str, object] = {}
    for task in sorted(tasks, key=first_offset):
        f = task.file
        try:
            with table.io.new_input(f.file_path).open() as stream:
                keys = pq.read_table(stream, columns=[KEY_COLUMN]).column(KEY_COLUMN).combine_chunks()
            deleted = [pa.array([], pa.int64())]
            for d in task.delete_files:
                if d.file_path not in deletes_read:
                    with table.io.new_input(d.file_path).open() as stream:
                        deletes_read[d.file_path] = pq.read_table(stream, columns=["file_path", "pos"])
                rows = deletes_read[d.file_path]
                mine = rows.filter(pc.equal(rows.column("file_path"), f.file_path))  # type: ignore[attr-defined]
                deleted.extend(mine.column("pos").cast(pa.int64()).chunks)
            positions = pa.concat_arrays(deleted)
        except Exception as e:
            raise IcebergError(
                f"table {ident}: reading {f.file_path} for partition {partition}'s key index: {e}"
            ) from None
        validity, offsets, data = keys.buffers()
        day = int(f.partition[0]) if len(f.partition) else 0
        pos_buffer = positions.buffers()[1]
        superseded += index.add_file(
            f.file_path,
            day,
            validity,
            offsets,
            data,
            keys.offset,
            len(keys),
            pos_buffer[positions.offset * 8 : (positions.offset + len(positions)) * 8] if pos_buffer else b"",
        )
    if superseded:
        log.warning(
            "table %s: partition %d held %d row(s) under keys a later row holds; the next commit deletes them",
            ident,
            partition,
            superseded,
            extra={"partition": partition},
        )
    log.info(
        "table %s: key index of partition %d rebuilt: %d live key(s) in %d data file(s), %.2f s",
        ident,
        partition,
        len(index),
        len(tasks),
        time.monotonic() - started,
        extra={"partition": partition},
    )
    return index
