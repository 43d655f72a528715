"""The table's position per partition, kept in the summaries of the snapshots the broker
commits (see logbroker/iceberg for why this gives exactly once).

Summary properties of every snapshot the broker commits:

    logbroker.topic-id   the topic incarnation (topic id as Kafka prints it)
    logbroker.offsets    JSON object {"<partition>": <next offset to write>, ...}, every
                         partition written so far (a commit copies the others forward)

The position is read from the newest snapshot in the current snapshot's ancestry that has
both properties; snapshots of other writers (a compaction, a user's own append) are passed
over. A table with snapshots but none of ours is not written to (IcebergError): its rows
cannot be matched to offsets. A different topic id (the topic was deleted and created
again) starts every partition from its log start offset; the old incarnation's rows stay.
"""

from __future__ import annotations

import dataclasses
import json

from logbroker.iceberg import IcebergError

TOPIC_ID = "logbroker.topic-id"
OFFSETS = "logbroker.offsets"


@dataclasses.dataclass
class TablePosition:
    topic_id: str | None
    offsets: dict[int, int]  # partition -> next offset to write
    snapshot_id: int | None  # the main branch's snapshot when read (None: empty table)

    def next_offset(self, topic_id: str, partition: int) -> int | None:
        """Where `partition` of incarnation `topic_id` goes on, or None when the table has
        nothing of it."""
        if self.topic_id != topic_id:
            return None
        return self.offsets.get(partition)

    def summary(self, topic_id: str, advanced: dict[int, int]) -> dict[str, str]:
        """The summary properties of a snapshot that moves `advanced` partitions on."""
        offsets = dict(self.offsets) if self.topic_id == topic_id else {}
        offsets.update(advanced)
        return {
            TOPIC_ID: topic_id,
            OFFSETS: json.dumps({str(p): o for p, o in sorted(offsets.items())}, separators=(",", ":")),
        }


def read_position(table) -> TablePosition:
    """The position of a pyiceberg Table as loaded (refresh it first for the newest)."""
    snapshot = table.current_snapshot()
    current = snapshot.snapshot_id if snapshot is not None else None
    seen = 0
    while snapshot is not None:
        props = snapshot.summary.additional_properties if snapshot.summary is not None else {}
        if TOPIC_ID in props and OFFSETS in props:
            try:
                raw = json.loads(props[OFFSETS])
                offsets = {int(p): int(o) for p, o in raw.items()}
            except (ValueError, TypeError, AttributeError) as e:
                raise IcebergError(
                    f"table {table_ident(table)}: snapshot {snapshot.snapshot_id} has a bad "
                    f"{OFFSETS} {props[OFFSETS]!r}: {e}"
                ) from None
            return TablePosition(props[TOPIC_ID], offsets, current)
        seen += 1
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None
    if current is not None:
        raise IcebergError(
            f"table {table_ident(table)} has {seen} snapshot(s) and none written by logbroker "
            f"(no {OFFSETS} in any summary of its main branch): its rows cannot be matched to "
            f"offsets, so the broker does not write to it; drop it or name another "
            f"iceberg.namespace"
        )
    return TablePosition(None, {}, None)


def table_ident(table) -> str:
    return ".".join(table.name())
