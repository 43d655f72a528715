"""The archiver: retention for topics with `retention.archive=true` (layout and file
invariants: logbroker/archive.py).

On such a topic the log engine never deletes segments by `retention.ms`/`retention.bytes`
itself; it only plans (`Log.retention_plan`). At every retention check the partition's
leader, and only the leader, takes that plan oldest first and for each range:
1. writes the records not yet in the archive (from the resume point of the partition of
   this topic incarnation) to one Parquet file, or nothing when the range holds no record a read_committed consumer sees;
2. raises the log start offset past the range (`Log.delete_records_before`), which deletes
   the segment.
Followers take the leader's log start offset from their fetch responses and delete the same
segments; they never archive, so each record is archived once however many replicas there
are. A new leader resumes from the files already in the store.

A failure (store unreachable, full disk, a bad batch) is logged naming topic, partition,
offsets and location, and changes nothing: the segments stay in the log and the next
retention check tries again.
"""

from __future__ import annotations

import logging

from logbroker.archive import STORE_KEYS, ArchiveStore, topic_id_text
from logbroker.broker.partition import Partition
from logbroker.common.config import BrokerConfig

log = logging.getLogger("logbroker.archiver")

DEFAULT_DIR = "__archive"  # under the data directory; the log-directory scan skips "__" names


def store_for(config: BrokerConfig) -> ArchiveStore:
    keys = {k: config.get_str(k) for k in STORE_KEYS}
    if not keys["archive.location"]:
        keys["archive.location"] = str(config.data_dir.resolve() / DEFAULT_DIR)
    return ArchiveStore.from_keys(keys)


class Archiver:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._store: ArchiveStore | None = None

    @property
    def store(self) -> ArchiveStore:
        if self._store is None:
            self._store = store_for(self.config)
        return self._store

    def archive_due(self, p: Partition, now_ms: int) -> int:
        """Archive and then delete what retention would delete now (blocking: run in a
        thread). Returns the number of ranges done; raises ArchiveError on failure."""
        plan = p.log.retention_plan(now_ms)
        if not plan:
            return 0
        store = self.store
        topic_id = topic_id_text(p.topic_id)
        resume = store.resume_point(p.topic, p.index, topic_id)
        for first, end in plan:
            if not p.is_leader or p.deleted:
                break  # leadership moved during the pass: the new leader goes on from the store
            start = max(first, resume)
            if start < end:
                f = store.archive_range(p.log, topic_id, start, end)
                if f is not None:
                    log.info(
                        "archived %s offsets %d..%d to %s (%d bytes)",
                        p.name,
                        f.first_offset,
                        f.last_offset,
                        f.path,
                        f.size_bytes,
                        extra={"topic": p.topic, "partition": p.index},
                    )
                resume = end
            p.log.delete_records_before(end)
        return len(plan)
