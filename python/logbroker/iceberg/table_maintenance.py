"""Upkeep of an Iceberg topic's table: small files compacted, old snapshots expired. Run by
the node that leads partition 0 of the topic, after its commits (blocking: in a thread).

Compaction. Every commit adds at least one data file per Kafka partition and day partition
it touches, so a table committed every few seconds gathers many small files. When one day
partition of the table has MIN_SMALL_FILES files of one Kafka partition under
SMALL_FILE_BYTES, up to MAX_REWRITE_BYTES of them are read, sorted by offset, written again
as few files (each still of one Kafka partition), and swapped in by one
overwrite snapshot that deletes the old files and adds the new (rows unchanged, so readers
see the same table). That snapshot carries the table's position forward unchanged
(logbroker/iceberg/table_offsets.py), and is conditional on the snapshot it read, like every
commit of the broker's: losing a race to a commit changes nothing, the next round tries again.

Expiry. Snapshots older than the table's `history.expire.max-snapshot-age-ms` (Iceberg's
property; default 5 days) are removed from the metadata, except the main branch's head and
the snapshot holding the position. Time travel reaches back that far. Then the files only
the expired snapshots reached are deleted, as Iceberg's own ExpireSnapshots does: their
manifest lists, the manifests no kept snapshot lists, and the data files compactions
replaced. The broker's tables have one line of history (main, each snapshot the child of the
one before), and expiry takes its oldest part, so what the expired snapshots reached and the
oldest kept one does not is reached by no kept snapshot: files are checked against the
oldest kept snapshot's manifests and live data files, not every kept one's. A table with
other branches or tags is left to Iceberg's tools (nothing is deleted), and nothing outside
the table's location is ever deleted.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging

from logbroker.iceberg.table_offsets import read_position, table_ident
from logbroker.iceberg.upsert_index import UPSERT_PARTITIONS

log = logging.getLogger("logbroker.iceberg")

PARTITION_FIELD_ID = 4  # table_schema.py
SMALL_FILE_BYTES = 16 << 20
MIN_SMALL_FILES = 16
MAX_REWRITE_BYTES = 256 << 20
# an upsert table's files are rewritten with their position deletes applied once these
# (may) delete this share of their rows
DELETED_SHARE = 0.1
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 3600 * 1000


@dataclasses.dataclass
class Compaction:
    files_before: int
    files_after: int
    rows: int
    snapshot_id: int | None


def small_file_groups(table, upsert: bool = False, tasks: list | None = None) -> list[list]:
    """FileScanTasks of small files, grouped by table partition and Kafka partition (a data
    file holds one Kafka partition, which the table as the tier relies on:
    logbroker/iceberg/table_tier.py), largest groups first. `upsert`: files with position
    deletes are taken too, whatever their size, and their groups first (upsert_groups).
    `tasks`: the table's planned files, if the caller has them."""
    groups: dict[tuple, list] = {}
    for task in tasks if tasks is not None else table.scan().plan_files():
        f = task.file
        if (f.file_size_in_bytes < SMALL_FILE_BYTES and not task.delete_files) or (upsert and task.delete_files):
            groups.setdefault((f.spec_id, repr(f.partition), kafka_partition(f)), []).append(task)
    return sorted(groups.values(), key=lambda g: (upsert and _deleted_share(g) >= DELETED_SHARE, len(g)), reverse=True)


def _deleted_share(group: list) -> float:
    """Position deletes that may apply to a group's files, over their rows (an upper bound:
    a delete file may name other files too)."""
    deletes = {d.file_path: d.record_count for task in group for d in task.delete_files}
    rows = sum(task.file.record_count for task in group)
    return sum(deletes.values()) / rows if rows else 0.0


def kafka_partition(data_file) -> int | None:
    """The Kafka partition of a data file's rows, from its column bounds; None when they span
    several (a file an older broker compacted) or are not kept."""
    lo = (data_file.lower_bounds or {}).get(PARTITION_FIELD_ID)
    hi = (data_file.upper_bounds or {}).get(PARTITION_FIELD_ID)
    return int.from_bytes(lo, "little", signed=True) if lo is not None and lo == hi else None


def compact_small_files(table, upsert: bool = False) -> Compaction | None:
    """One compaction of the partition with the most small files, if it has enough (None:
    nothing to do, or the table's position is not the broker's, or a lost race). `upsert`
    (an upsert table): first the files whose position deletes remove a tenth of their rows or
    more, written again with the deletes applied; the delete files that name only files so
    rewritten, or since gone, are removed in the same snapshot."""
    import pyarrow as pa
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

    tasks = list(table.scan().plan_files())
    groups = small_file_groups(table, upsert, tasks)
    if not groups:
        return None
    deleting = upsert and _deleted_share(groups[0]) >= DELETED_SHARE
    if not deleting and len(groups[0]) < MIN_SMALL_FILES:
        return None
    position = read_position(table)
    if position.topic_id is None:
        return None
    picked, size = [], 0
    # deleting: the files with position deletes first (what the rewrite is for)
    for task in sorted(groups[0], key=lambda t: (deleting and not t.delete_files, t.file.file_path)):
        if picked and size + task.file.file_size_in_bytes > MAX_REWRITE_BYTES:
            break
        picked.append(task)
        size += task.file.file_size_in_bytes
    if len(picked) < (1 if deleting else 2):
        return None
    rows: pa.Table = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(picked)
    rows = rows.sort_by([("partition", "ascending"), ("offset", "ascending")])
    summary = position.summary(position.topic_id, {})
    added = 0
    try:
        with table.transaction() as tx:
            if any(task.delete_files for task in picked):
                from logbroker.iceberg.position_deletes import RewriteFiles, applied_delete_files

                removed = {task.file.file_path for task in picked}
                removed |= applied_delete_files(table.io, picked, {t.file.file_path for t in tasks})
                # the Kafka partition whose rows moved: its leader's key index is rebuilt
                # (unnamed, every partition's is)
                moved = kafka_partition(picked[0].file)
                if moved is not None:
                    summary[UPSERT_PARTITIONS] = str(moved)
                with RewriteFiles(tx, table.io, summary, removed) as rewrite:
                    for data_file in _dataframe_to_data_files(tx.table_metadata, rows, table.io, rewrite.commit_uuid):
                        rewrite.append_data_file(data_file)
                        added += 1
            else:
                with tx.update_snapshot(snapshot_properties=summary).overwrite() as overwrite:
                    for task in picked:
                        overwrite.delete_data_file(task.file)
                    for data_file in _dataframe_to_data_files(tx.table_metadata, rows, table.io, overwrite.commit_uuid):
                        overwrite.append_data_file(data_file)
                        added += 1
    except CommitFailedException as e:
        log.info(
            "table %s: compaction of %d files lost a race to a commit (%s); the next round tries again",
            table_ident(table),
            len(picked),
            e,
        )
        return None
    snapshot = table.current_snapshot()
    log.info(
        "table %s: compacted %d small files (%d bytes, %d rows) into %d",
        table_ident(table),
        len(picked),
        size,
        rows.num_rows,
        added,
    )
    return Compaction(len(picked), added, rows.num_rows, snapshot.snapshot_id if snapshot else None)


def expire_snapshots(table, now_ms: int) -> int:
    """Remove snapshots older than the table's max snapshot age (but the main branch's head
    and the position's snapshot). Returns how many went."""
    max_age = int(table.properties.get("history.expire.max-snapshot-age-ms", DEFAULT_MAX_SNAPSHOT_AGE_MS))
    current = table.current_snapshot()
    keep = {current.snapshot_id} if current is not None else set()
    snapshot = current
    while snapshot is not None:  # the newest snapshot of ours in the ancestry holds the position
        keep.add(snapshot.snapshot_id)
        props = snapshot.summary.additional_properties if snapshot.summary is not None else {}
        if "logbroker.offsets" in props:
            break
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    old = {s.snapshot_id for s in table.snapshots() if s.timestamp_ms < now_ms - max_age and s.snapshot_id not in keep}
    if not old:
        return 0
    expired = [s for s in table.snapshots() if s.snapshot_id in old]
    table.maintenance.expire_snapshots().by_ids(sorted(old)).commit()
    table = table.refresh()
    deleted = delete_unreachable_files(table, expired)
    log.info(
        "table %s: expired %d snapshots older than %s and deleted %d files only they reached",
        table_ident(table),
        len(old),
        datetime.datetime.fromtimestamp((now_ms - max_age) / 1000, datetime.UTC).isoformat(),
        deleted,
    )
    return len(old)


def delete_unreachable_files(table, expired: list) -> int:
    """Delete the files only the `expired` snapshots (already gone from `table`) reached;
    returns how many (see the module doc)."""
    from pyiceberg.manifest import ManifestEntryStatus

    kept = table.snapshots()
    if not kept or not expired:
        return 0
    if set(table.metadata.refs) != {"main"} or not _one_line(table, kept):
        log.info(
            "table %s has branches, tags or snapshots off the main line: the files of expired snapshots are "
            "left to Iceberg's tools",
            table_ident(table),
        )
        return 0
    io = table.io
    oldest = min(kept, key=lambda s: (s.sequence_number or 0, s.timestamp_ms))
    kept_manifests = oldest.manifests(io)
    kept_paths = {m.manifest_path for m in kept_manifests} | {s.manifest_list for s in kept}
    live = {e.data_file.file_path for m in kept_manifests for e in m.fetch_manifest_entry(io, discard_deleted=True)}
    doomed: set[str] = set()
    for snapshot in [*expired, oldest]:
        for m in snapshot.manifests(io):
            if snapshot is not oldest:
                doomed.add(m.manifest_path)
            if m.added_snapshot_id == snapshot.snapshot_id and (m.deleted_files_count or 0) > 0:
                # the files this snapshot removed (a compaction's replaced ones)
                doomed.update(
                    e.data_file.file_path
                    for e in m.fetch_manifest_entry(io, discard_deleted=False)
                    if e.status == ManifestEntryStatus.DELETED
                )
        if snapshot is not oldest:
            doomed.add(snapshot.manifest_list)
    location = table.location().rstrip("/") + "/"
    deleted = 0
    for path in sorted(doomed - kept_paths - live):
        if not path.startswith(location):
            continue
        try:
            io.delete(path)
            deleted += 1
        except FileNotFoundError:
            pass  # deleted by an earlier round that stopped halfway
    return deleted


def _one_line(table, kept: list) -> bool:
    """Every kept snapshot is an ancestor of the head (one line of history)."""
    ids = {s.snapshot_id for s in kept}
    snapshot = table.current_snapshot()
    seen = set()
    while snapshot is not None and snapshot.snapshot_id in ids:
        seen.add(snapshot.snapshot_id)
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    return seen == ids
