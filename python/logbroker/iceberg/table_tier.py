"""The table as the tier: an Iceberg topic with `remote.storage.enable=true` keeps its history
once, in its table. What the data path is told so a consumer's Fetch below the local log
start is answered from the table's data files (rust/src/table/tier_reader.rs), and when the
leader may delete local segments.

For each partition it leads, the leader keeps the partition's data files (first and last
offset of the partition in each, from Iceberg's column bounds, and the file's local path) and
hands them to the data path (`ReplicaPartition.set_table_tier`):
- after a commit of its own, the files it just added are appended (the writer knows their
  offsets: a data file holds one partition, rust/src/table/data_files.rs);
- as soon as it leads the partition (`adopt`, within a second), and when the table changed
  under it in a way that may replace this partition's files (a snapshot that is not an
  append: compaction's overwrite, a user's delete; or a position of its partitions it did
  not write: another writer), the list is read from the table (a scan planned on
  `partition = p`, which reads the manifests: O(table), once per leadership and per such
  change).
Every other replica of such a topic, and a new leader until its list is read, has a
*pending* view: a consumer's fetch below the local log start gets no records for now (it
fetches again), never OFFSET_OUT_OF_RANGE. A replica that stops leading goes back to
pending (`forget`).
After each commit round it tells the log the table holds everything below its position
(`Log.highest_remote_offset`), which lets retention delete local segments past
`local.retention.ms`/`local.retention.bytes` (broker/replica_manager.py); before the first,
nothing is deleted. Followers follow the leader's local log start.

The data path reads local files: a warehouse on the local file system (or a shared one).
With an object-store warehouse, or a table holding snapshots of an earlier incarnation of
the topic (deleted and created again: its rows have the same offsets), the table is not the
tier: the partition keeps its segments (`NotATier`, logged once per topic).
"""

from __future__ import annotations

import json
import logging
import struct
import threading
import uuid

from logbroker.iceberg.table_offsets import OFFSETS, TOPIC_ID, read_position, table_ident

log = logging.getLogger("logbroker.iceberg")

OFFSET_FIELD_ID = 5  # table_schema.py
UNBOUNDED = (-1, (1 << 62))  # a file without offset bounds: read it for any offset


def local_path(location: str) -> str | None:
    """The local path of a data file's location; None when it is not on a file system."""
    if location.startswith("file://"):
        return location[len("file://") :]
    if location.startswith("file:"):
        return location[len("file:") :]
    return None if "://" in location else location


class NotATier(Exception):
    """The table cannot be the topic's tier (why, naming the table); its segments stay."""


def check_incarnation(table, topic_id: str) -> None:
    """NotATier when the table holds snapshots of another incarnation of the topic (deleted
    and created again: its rows, with the same offsets, stay in the table)."""
    others = {
        s.summary.additional_properties.get(TOPIC_ID)
        for s in table.metadata.snapshots
        if s.summary is not None and s.summary.additional_properties.get(TOPIC_ID) not in (None, topic_id)
    }
    if others:
        raise NotATier(
            f"table {table_ident(table)} holds rows of an earlier incarnation of the topic (topic id "
            f"{sorted(others)[0]}), at the same offsets; drop the table (or name another iceberg.namespace) "
            f"for it to be the tier"
        )


def partition_files(table, partition: int) -> list[tuple[int, int, str]]:
    """The data files of `partition` in the table's current snapshot, as `(first offset, last
    offset, local path)`. NotATier when a file is not on a file system."""
    from pyiceberg.expressions import EqualTo

    out = []
    for task in table.scan(row_filter=EqualTo("partition", partition)).plan_files():
        f = task.file
        path = local_path(f.file_path)
        if path is None:
            raise NotATier(
                f"table {table_ident(table)} at {table.location()}: its data files are not on a local or shared "
                f"file system, which the table as the tier needs for now"
            )
        lo, hi = (f.lower_bounds or {}).get(OFFSET_FIELD_ID), (f.upper_bounds or {}).get(OFFSET_FIELD_ID)
        bounds = (struct.unpack("<q", lo)[0], struct.unpack("<q", hi)[0]) if lo and hi else UNBOUNDED
        out.append((bounds[0], bounds[1], path))
    return out


def changed_under(table, base: int | None, since: int | None, known: dict[int, int], topic_id: str) -> bool:
    """Whether the table may have replaced or added files of `known`'s partitions between
    snapshot `since` (the last this node checked or made) and `base` (the one its commit
    read): a snapshot between them that is not an append, a position of those partitions
    other than the one this node wrote (`known`), or history that no longer reaches `since`."""
    if base == since:
        return False
    if base is None or since is None:
        return True
    snapshot = table.snapshot_by_id(base)
    props = snapshot.summary.additional_properties if snapshot is not None and snapshot.summary is not None else {}
    try:
        offsets = {int(p): int(o) for p, o in json.loads(props[OFFSETS]).items()}
    except (KeyError, ValueError, TypeError, AttributeError):
        return True
    if props.get(TOPIC_ID) != topic_id or any(offsets.get(p) != o for p, o in known.items()):
        return True
    while snapshot is not None and snapshot.snapshot_id != since:
        op = snapshot.summary.operation.value if snapshot.summary is not None else "unknown"
        if op != "append":
            return True
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None
    return snapshot is None


class TableTier:
    """The views of the partitions this node leads of table-tier topics (one per broker;
    used from the commit thread)."""

    def __init__(self, held: dict[tuple[uuid.UUID, int], int]) -> None:
        """`held`: (topic id, partition) -> the table's next offset as this node last saw it,
        the committer's (broker/iceberg_committer.py), which its commits keep."""
        # (topic id, partition) -> its data files as the data path has them
        self.views: dict[tuple[uuid.UUID, int], list[tuple[int, int, str]]] = {}
        self.held = held
        self.snapshots: dict[str, int | None] = {}  # topic -> the snapshot last checked or made
        self._warned: set[str] = set()  # topics whose table cannot be the tier (logged once)
        self._lock = threading.Lock()  # commit rounds and `adopt` run in threads of their own

    def forget(self, key: tuple[uuid.UUID, int]) -> bool:
        """Drops the view of a partition no longer led here; True if there was one."""
        with self._lock:
            self.held.pop(key, None)
            return self.views.pop(key, None) is not None

    def adopt(self, topic: str, topic_id: str, parts: list, table) -> None:
        """Views for led partitions that have none yet (a new leadership), read from `table`
        at once rather than at the next commit round (iceberg.commit.interval.ms away);
        `table` None: it does not exist yet (no files)."""
        with self._lock:
            missing = [p for p in parts if (p.topic_id, p.index) not in self.views]
            if not missing:
                return
            if table is None:
                for p in missing:
                    self.views[(p.topic_id, p.index)] = []
                    p.core.set_table_tier([])
                return
            position = read_position(table)
            if not self._read_views(topic, topic_id, missing, table):
                return
            log.info(
                "table %s: %s partitions %s, led here now, are read below their local log start from %d data file(s)",
                table_ident(table),
                topic,
                sorted(p.index for p in missing),
                sum(len(self.views[(p.topic_id, p.index)]) for p in missing),
                extra={"topic": topic},
            )
            # the next commit round checks what changed since this snapshot (not since none)
            snapshot = table.current_snapshot()
            if topic not in self.snapshots and position.topic_id == topic_id:
                self.snapshots[topic] = snapshot.snapshot_id if snapshot is not None else None
                for p in parts:
                    held = position.next_offset(topic_id, p.index)
                    if held is not None:
                        self.held.setdefault((p.topic_id, p.index), held)

    def after_commit(self, topic: str, topic_id: str, parts: list, outcome) -> None:
        """After one commit round of `parts` (the led partitions of a table-tier topic): bring
        their views up to date and tell their logs what the table holds."""
        with self._lock:
            self._after_commit(topic, topic_id, parts, outcome)

    def _after_commit(self, topic: str, topic_id: str, parts: list, outcome) -> None:
        table = outcome.loaded
        if table is None or not parts:
            return
        led = {(p.topic_id, p.index) for p in parts}  # (views of partitions led no more: `forget`)
        if outcome.lost_race:
            self.snapshots.pop(topic, None)  # the winner's files are not in `table`: read again next round
            return
        known = {p.index: self.held[(p.topic_id, p.index)] for p in parts if (p.topic_id, p.index) in self.held}
        rebuild = any(k not in self.views for k in led) or changed_under(
            table, outcome.base_snapshot_id, self.snapshots.get(topic), known, topic_id
        )
        added: dict[int, list[tuple[int, int, str]]] = {}
        for f in outcome.files:
            path = local_path(f["path"])
            if path is None:
                self._warn(topic, f"table {table_ident(table)}: data file {f['path']} is not on a file system")
                return
            if f["rows"] > 0:
                added.setdefault(f["partition"], []).append((f["min_offset"], f["max_offset"], path))
        if rebuild:
            if not self._read_views(topic, topic_id, parts, table):
                return
        else:
            for p in parts:
                key = (p.topic_id, p.index)
                self.views[key].extend(added.get(p.index, []))
                p.core.set_table_tier(self.views[key])
        for p in parts:
            held = outcome.positions.get(p.index)
            if held is not None:  # (the committer's `held` has it already)
                p.log.highest_remote_offset = held - 1
        snapshot = table.current_snapshot()
        self.snapshots[topic] = snapshot.snapshot_id if snapshot is not None else None
        if rebuild:
            log.info(
                "table %s: %s partitions %s are read below their local log start from %d data file(s)",
                table_ident(table),
                topic,
                sorted(p.index for p in parts),
                sum(len(self.views[k]) for k in led),
                extra={"topic": topic},
            )

    def _read_views(self, topic: str, topic_id: str, parts: list, table) -> bool:
        """Reads each of `parts`' data files from `table` and hands them to its log; False (and
        a warning) when the table cannot be the tier, the partitions left as they were."""
        try:
            check_incarnation(table, topic_id)  # once per table, not per partition
            files = {p.index: partition_files(table, p.index) for p in parts}
        except NotATier as e:
            self._warn(topic, str(e))
            for p in parts:  # no files: not pending (EARLIEST answers), and not read again each second
                self.views[(p.topic_id, p.index)] = []
                p.core.set_table_tier([])
            return False
        for p in parts:
            self.views[(p.topic_id, p.index)] = files[p.index]
            p.core.set_table_tier(files[p.index])
        return True

    def _warn(self, topic: str, why: str) -> None:
        if topic not in self._warned:
            self._warned.add(topic)
            log.warning(
                "topic %s has remote.storage.enable=true, but its Iceberg table cannot be its tier; its segments "
                "stay in the log: %s",
                topic,
                why,
                extra={"topic": topic},
            )
