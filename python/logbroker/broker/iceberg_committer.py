"""The Iceberg committer: the broker's side of Iceberg topics (`iceberg.enable=true`; the
table layout and the exactly-once argument are in logbroker/iceberg).

Rounds end about every `iceberg.commit.interval.ms` (clock.run_ending_every: the wait before
a round is the interval less the recent rounds' length, so a record's lag to the table stays
within the interval); in a round, for each Iceberg topic with partitions this node leads,
one commit (`TableWriter.commit`) of those partitions' new committed records, in a thread.
A commit cut short by its byte budget is followed by another at once; a commit that lost a
race to another node's is tried again at once, up to RACE_RETRIES times.

Upkeep (logbroker/iceberg/table_maintenance.py: small files compacted, old snapshots
expired) is done by the node leading partition 0 of the topic, after its commits, at most
every MAINTENANCE_EVERY_MS.

Retention of these topics: the log engine only plans (as for `retention.archive`); at each
retention check the leader deletes the planned segments the table already holds
(`deletable`), and followers follow the leader's log start offset. What this node knows of
the table's position comes from its own commits and reads (`held`); until it has one, it
deletes nothing.

A failure (catalog unreachable, full disk, a table with other columns) is logged naming the
table, topic and partitions, and changes nothing: the next interval tries again, and the
segments stay in the log.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid

import trio

from logbroker.archive import topic_id_text
from logbroker.broker.partition import Partition
from logbroker.clock import now_ms
from logbroker.common.config import BrokerConfig
from logbroker.iceberg import IcebergError
from logbroker.iceberg.catalog import SETTING_KEYS, CatalogSettings, table_name
from logbroker.iceberg.table_maintenance import compact_small_files, expire_snapshots
from logbroker.iceberg.table_tier import TableTier
from logbroker.iceberg.table_writer import CommitOutcome, PartitionSource, TableWriter
from logbroker.iceberg.upsert_index import UpsertIndexes
from logbroker.iceberg.value_schema import ValueSchema

log = logging.getLogger("logbroker.iceberg")

RACE_RETRIES = 3
MAX_ROUNDS = 64  # commits in a row for one topic in one interval (a backlog drains over intervals)
MAINTENANCE_EVERY_MS = 10_000
ERROR_REPEAT_MS = 60_000  # a failure that repeats every interval is logged once a minute
EXPIRY_EVERY_MS = 3600_000


@dataclasses.dataclass
class TableTopic:
    """An Iceberg topic with partitions this node leads, as one interval commits it."""

    parts: list[Partition]
    mode: str  # iceberg.mode
    tier: bool  # the table is the topic's tier (remote.storage.enable)
    upsert: bool = False  # iceberg.upsert.enable
    dead_letters: bool = False  # iceberg.invalid.record.action=dlq_table
    partition_spec: str | None = None  # iceberg.partition.spec (a table created now)


class IcebergCommitter:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._writer: TableWriter | None = None
        # (topic id, partition) -> the table's next offset as this node last saw it
        self.held: dict[tuple[uuid.UUID, int], int] = {}
        # the schema registry (schema_registry/server.py), set when this broker serves it
        self.registry = None
        self._maintained: dict[str, int] = {}  # topic -> when its table was last compacted (ms)
        self._expired: dict[str, int] = {}
        self._errors: dict[str, tuple[str, int]] = {}  # topic -> (last error logged, when)
        self.tier = TableTier(self.held)  # the table as the tier: what the data path reads below the local log
        self.upsert = UpsertIndexes()  # upsert tables' key indexes, of the partitions this node commits

    @property
    def writer(self) -> TableWriter:
        if self._writer is None:
            keys = {k: self.config.get_str(k) for k in SETTING_KEYS}
            self._writer = TableWriter(CatalogSettings.from_keys(keys, self.config.data_dir))
        return self._writer

    async def commit_all(self, by_topic: dict[str, TableTopic]) -> None:
        """One interval's commits: each topic's led partitions, topic after topic."""
        self.upsert.keep(
            {topic_id_text(t.parts[0].topic_id): {p.index for p in t.parts} for t in by_topic.values() if t.upsert}
        )
        for topic, t in by_topic.items():
            parts = t.parts
            try:
                value_schemas = key_schemas = upto = None
                if t.mode == "value_schema_id_prefix":
                    # the offsets first, then the schemas: a record below these offsets was
                    # produced after its schema id was registered, which the registry answers
                    # only once its state has the version (kafka_store.write), so the versions
                    # read next include it; a record past them waits for the next interval
                    upto = {p.index: p.log.last_stable_offset() for p in parts if p.is_leader and not p.deleted}
                    value_schemas = self._schemas(topic, "value")
                    if value_schemas is None:
                        continue  # the registry is still reading _schemas: the next interval
                    key_schemas = self._schemas(topic, "key")
                await trio.to_thread.run_sync(
                    self.commit_topic,
                    topic,
                    parts,
                    value_schemas,
                    upto,
                    t.tier,
                    t.upsert,
                    key_schemas,
                    t.dead_letters,
                    t.partition_spec,
                )
            except IcebergError as e:
                text = str(e)
                now = now_ms()
                last = self._errors.get(topic)
                if last is None or last[0] != text or now - last[1] >= ERROR_REPEAT_MS:
                    self._errors[topic] = (text, now)
                    log.error(
                        "Iceberg commit of topic %s partitions %s failed; the records stay in the log and "
                        "the next interval tries again (the same error is logged again after %d s): %s",
                        topic,
                        sorted(p.index for p in parts),
                        ERROR_REPEAT_MS // 1000,
                        e,
                        extra={"topic": topic},
                    )
            else:
                self._errors.pop(topic, None)

    def _schemas(self, topic: str, subject: str) -> list[ValueSchema] | None:
        """Every version under <topic>-value (<topic>-key), newest first, soft-deleted ones
        too (records may still carry their ids); read on the trio thread, where the registry's
        state changes. None while the registry has not read `_schemas` yet."""
        if self.registry is None:
            raise IcebergError(
                f"topic {topic} has iceberg.mode=value_schema_id_prefix, which needs the schema "
                f"registry on this broker (schema.registry.listen)"
            )
        if not self.registry.store.ready.is_set():
            return None
        versions = self.registry.state.versions(f"{topic}-{subject}", deleted=True)
        return [
            ValueSchema(v.id, v.schema, v.schema_type) for v in sorted(versions, key=lambda v: v.version, reverse=True)
        ]

    def commit_topic(
        self,
        topic: str,
        parts: list[Partition],
        value_schemas: list[ValueSchema] | None = None,
        upto: dict[int, int] | None = None,
        tier: bool = False,
        upsert: bool = False,
        key_schemas: list[ValueSchema] | None = None,
        dead_letters: bool = False,
        partition_spec: str | None = None,
    ) -> CommitOutcome | None:
        """Commit until the led partitions are in the table up to their last stable offset, or
        up to `upto` (partition -> offset) where given (blocking). `tier`: the table is the
        topic's tier (iceberg/table_tier.py), told of each round. `upsert`: one row per key
        (iceberg/upsert_index.py). `key_schemas`: `<topic>-key`'s versions (keys decoded).
        `dead_letters`: values that do not decode go to the dead-letter table (iceberg/dead_letters.py)."""
        parts = [p for p in parts if p.is_leader and not p.deleted]
        if not parts:
            return None
        topic_id = topic_id_text(parts[0].topic_id)
        sources = [
            PartitionSource(p.index, p.log, lambda p=p: p.is_leader and not p.deleted, (upto or {}).get(p.index))
            for p in parts
        ]
        outcome = None
        races = 0
        for _ in range(MAX_ROUNDS):
            outcome = self.writer.commit(
                topic,
                topic_id,
                sources,
                value_schemas=value_schemas,
                upsert=self.upsert if upsert else None,
                key_schemas=key_schemas,
                dead_letters=dead_letters,
                partition_spec=partition_spec,
            )
            if tier:  # first: it compares the table with `held` as of the last round
                self.tier.after_commit(topic, topic_id, parts, outcome)
            for partition, offset in outcome.positions.items():
                self.held[(parts[0].topic_id, partition)] = offset
            if outcome.rows or outcome.snapshot_id is not None:
                log.debug(
                    "table %s: %d rows of %s committed, positions %s (snapshot %s)",
                    outcome.table,
                    outcome.rows,
                    topic,
                    outcome.positions,
                    outcome.snapshot_id,
                    extra={"topic": topic},
                )
            if outcome.lost_race:
                races += 1
                if races > RACE_RETRIES:
                    break
                continue
            if not outcome.more:
                break
        if any(p.index == 0 for p in parts):
            self.maintain(topic, value_schemas, upsert)
        return outcome

    def adopt_tier_views(self, topic: str, parts: list[Partition]) -> None:
        """The table as the tier: views for led partitions that have none yet, from the table
        (blocking; iceberg/table_tier.py)."""
        parts = [p for p in parts if p.is_leader and not p.deleted]
        if not parts:
            return
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        ident = f"{self.writer.settings.namespace}.{table_name(topic)}"
        try:
            table = self.writer.catalog().load_table(ident)  # not created here: the commits do that
        except (NoSuchTableError, NoSuchNamespaceError):
            table = None
        except Exception as e:  # pyiceberg, the catalog: name the table's topic
            raise IcebergError(f"reading table {ident} of topic {topic}: {type(e).__name__}: {e}") from None
        self.tier.adopt(topic, topic_id_text(parts[0].topic_id), parts, table)

    def maintain(self, topic: str, value_schemas: list[ValueSchema] | None = None, upsert: bool = False) -> None:
        """Compaction and expiry of the topic's table, when due (blocking); `upsert`: files
        with position deletes are compacted with the deletes applied."""
        now = now_ms()
        if now - self._maintained.get(topic, 0) < MAINTENANCE_EVERY_MS:
            return
        self._maintained[topic] = now
        try:
            if value_schemas is not None:
                table, _, _ = self.writer.value_table(topic, value_schemas)
            else:
                table = self.writer.table(topic)
            if compact_small_files(table, upsert) is not None:
                table = table.refresh()
            if now - self._expired.get(topic, 0) >= EXPIRY_EVERY_MS:
                self._expired[topic] = now
                expire_snapshots(table, now)
        except IcebergError:
            raise
        except Exception as e:  # pyiceberg, pyarrow, the catalog: name the table's topic
            raise IcebergError(f"upkeep of the table of topic {topic}: {type(e).__name__}: {e}") from None

    def deletable(self, p: Partition, plan: list[tuple[int, int]]) -> int | None:
        """The end of the longest prefix of the retention plan the table already holds
        (None: nothing can go yet)."""
        held = self.held.get((p.topic_id, p.index))
        if held is None:
            return None
        end = None
        for _first, last_end in plan:
            if last_end > held:
                break
            end = last_end
        return end
