"""The replica manager: the partitions this broker hosts, their logs, and the
periodic work on them (retention, flush, segment.ms rolls, checkpoints).

Data directory layout: the first of `log.dirs` (the metadata directory) holds
    meta.properties                       cluster.id, node.id, directory.id (coord/metadata/metadata.py)
    __cluster_metadata-0/                 the metadata log (coord/metadata/metadata_quorum.py)
    __archive/                            Parquet files of retention.archive topics, unless
                                          archive.location is set (broker/archiver.py)
    __iceberg/                            the Iceberg catalog (catalog.db) and warehouse of
                                          iceberg.enable topics, unless iceberg.catalog.uri /
                                          iceberg.warehouse are set (broker/iceberg_committer.py)
    topic-id-checkpoint                   the topic id of each topic with a replica on this
                                          broker (broker/topic_id_checkpoint.py)
and every log directory (broker/log_dirs.py: placement, moves) holds
    <topic>-<partition>/                  one Rust `Log` per partition (rust/src/log.rs)
    replication-offset-checkpoint         HW per partition in this directory, Kafka's text format
(each partition directory keeps its own log-start and recovery-point checkpoints,
written by the Rust log; see docs/decisions.md). Moving a replica between log directories
while it serves is broker/replica_mover.py.

All blocking calls on logs go through `trio.to_thread.run_sync`, one thread hop per
request (never per partition or per record); the Rust side releases the GIL. Opening and
closing many logs at once (startup, a batch of new partitions, shutdown) spreads them over
LOG_THREADS threads inside that hop, so their fsyncs overlap.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
import uuid
from pathlib import Path

import trio

from logbroker import _core
from logbroker.archive import ArchiveError
from logbroker.broker import topic_id_checkpoint
from logbroker.broker.archiver import Archiver
from logbroker.broker.iceberg_committer import IcebergCommitter, TableTopic
from logbroker.broker.log_dirs import HW_CHECKPOINT, LogDirs, LogDirsError, partition_dir_name
from logbroker.broker.partition import Partition
from logbroker.broker.remote_log_manager import RemoteLogManager
from logbroker.broker.replica_mover import ReplicaMover
from logbroker.broker.replication import Replication
from logbroker.clock import now_ms, run_ending_every, run_every
from logbroker.common.config import RACK_AWARE_SELECTOR, BrokerConfig, ConfigError
from logbroker.coord.metadata.metadata import MetadataImage
from logbroker.coord.metadata.metadata_delta import MetadataDelta
from logbroker.iceberg import IcebergError
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.replicas")


# Logs opened or closed at once (startup, a batch of new partitions, shutdown): their fsyncs
# overlap in the device's queue and recovery uses every core; the Rust log releases the GIL.
LOG_THREADS = 8
TABLE_TIER_CHECK_MS = 1000  # how soon a new leader of a table-tier partition reads its view


def in_parallel(fn, items: list) -> list:
    """`fn` over `items` on up to LOG_THREADS threads, results in order (the first
    exception is raised once all are done). Called from a trio worker thread."""
    if len(items) <= 1:
        return [fn(x) for x in items]
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=min(LOG_THREADS, len(items)), thread_name_prefix="logbroker-logs"
    ) as pool:
        return list(pool.map(fn, items))


class ReplicaManager:
    def __init__(self, config: BrokerConfig, table: _core.PartitionTable | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.data_dir = config.data_dir
        try:
            self.log_dirs = LogDirs(config.log_dirs)
        except LogDirsError as e:
            raise ConfigError(str(e)) from None
        # The data path's view of our replicas (shared with the network thread, if any).
        self.table = table if table is not None else _core.PartitionTable()
        self.table.set_rack_aware_selector(config.get_str("replica.selector.class") == RACK_AWARE_SELECTOR)
        self.table.set_verify_transactions_v1(config.get_bool("transaction.partition.verification.enable"))
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._by_topic: dict[str, set[int]] = {}  # topic -> indexes of its local partitions
        # topics whose Iceberg table is their tier (iceberg.enable, remote.storage.enable), kept
        # as metadata changes
        self._tier_topics: set[str] = set()
        # the led partitions with a replica outside the ISR (the ISR expansion check's work
        # list: idle, it costs nothing however many partitions there are)
        self.isr_short: dict[tuple[str, int], Partition] = {}
        # replicas this broker should host whose log could not be opened (e.g. out of file
        # descriptors) -> why; retried by the flush scheduler, served by no one here meanwhile
        self.offline: dict[tuple[str, int], str] = {}
        self._image: MetadataImage | None = None
        # one image applied at a time: the publisher's listener call and the service's
        # catch-up call at start may otherwise interleave across their awaits
        self._applying = trio.Lock()
        self._closed = False
        # what the topic-id checkpoint says now (rewritten when the hosted topics change)
        self._ids_written: dict[str, uuid.UUID] | None = None
        self.replication = Replication(config, self)
        self.archiver = Archiver(config)
        self.iceberg = IcebergCommitter(config)
        self.mover = ReplicaMover(self)
        self.remote = RemoteLogManager(config, self)

    # --- lifecycle ------------------------------------------------------------------

    def _min_isr(self, configs: dict[str, str]) -> int:
        return int(configs.get("min.insync.replicas", self.config.get_int("min.insync.replicas")))

    def _partition(self, topic, state, lg: _core.Log) -> Partition:
        return Partition(topic.name, topic.topic_id, state, lg, self.node_id, self.table, self._min_isr(topic.configs))

    def _open_log(self, topic: str, partition: int, configs: dict[str, str], sync_dir: bool = True) -> _core.Log:
        """(Placed first: `log_dirs.place`, on the trio thread.) `sync_dir=False` at startup:
        one `sync_filesystem` per log directory after every log is open (`startup`)."""
        path = self.log_dirs.path((topic, partition))
        return _core.Log.open(
            str(path), topic, partition, self.config.engine_config(configs), None, now_ms(), sync_dir=sync_dir
        )

    def _create_log(self, topic: str, partition: int, configs: dict[str, str]) -> _core.Log:
        """A replica new to this broker: whatever a directory of its name holds is left from
        an earlier topic of the same name, and goes. (Placed first, as `_open_log`.)"""
        path = self.log_dirs.path((topic, partition))
        return _core.Log.create(str(path), topic, partition, self.config.engine_config(configs), now_ms())

    def _apply_dynamic_configs(self, image: MetadataImage) -> list[str]:
        """This broker's dynamic configs from the image (the cluster default, then its own):
        the broker keys whose value changed."""
        changed = self.config.set_dynamic(
            image.broker_configs.get("", {}), image.broker_configs.get(str(self.node_id), {})
        )
        if changed:
            log.info("dynamic broker configs changed: %s", ", ".join(f"{k}={self.config[k]}" for k in changed))
        return changed

    async def _reconfigure_all(self) -> None:
        """A broker default of topic configs changed: every log takes its new engine config
        and every partition its min.insync.replicas (one thread hop for all)."""
        parts = [p for p in self.partitions.values() if not p.deleted]
        image = self._image
        configs = {p.topic: image.topics[p.topic].configs for p in parts if image and p.topic in image.topics}

        def work() -> None:
            for p in parts:
                p.log.update_config(self.config.engine_config(configs.get(p.topic, {})))

        await trio.to_thread.run_sync(work)
        for p in parts:
            p.apply_state(p.state, self._min_isr(configs.get(p.topic, {})))

    def _try_open_log(
        self, topic: str, partition: int, configs: dict[str, str], new: bool = False
    ) -> _core.Log | _core.LogBrokerError:
        """The log (created afresh if `new`), or the error that kept it from opening (this
        partition only: the metadata stays as committed and the partition offline here; see
        `offline`)."""
        try:
            return (self._create_log if new else self._open_log)(topic, partition, configs)
        except _core.LogBrokerError as e:
            return e

    async def startup(self, image: MetadataImage) -> None:
        """Open every local replica's log (recovering it if the last stop was unclean)."""
        self._apply_dynamic_configs(image)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            await trio.to_thread.run_sync(self.log_dirs.scan)
        except LogDirsError as e:
            raise ConfigError(str(e)) from None
        hw = {}
        for d in self.log_dirs.dirs:
            hw.update({((t, p), d): o for t, p, o in _core.read_offset_checkpoint(str(d / HW_CHECKPOINT))})
        try:
            self._ids_written = topic_id_checkpoint.read(self.data_dir)
        except topic_id_checkpoint.TopicIdCheckpointError as e:
            log.warning("%s; every partition directory is trusted to hold its topic's current incarnation", e)
            self._ids_written = {}
        wanted = []
        for topic in image.topics.values():
            for state in topic.partitions.values():
                if self.node_id in state.replicas:
                    wanted.append((topic, state))
        earlier = {t.name for t, _s in wanted if self._ids_written.get(t.name, t.topic_id) != t.topic_id}
        for name in sorted(earlier):
            log.warning(
                "the partition directories of topic %s hold an earlier topic of that name (topic id %s, now "
                "%s), deleted while this broker was away: they are replaced by empty logs",
                name,
                self._ids_written[name],
                image.topics[name].topic_id,
                extra=fields(topic=name),
            )

        def open_one(item) -> _core.Log:
            topic, state = item
            if topic.name in earlier:
                return self._create_log(topic.name, state.partition, topic.configs)
            lg = self._open_log(topic.name, state.partition, topic.configs, sync_dir=False)
            saved_hw = hw.get(((topic.name, state.partition), Path(lg.dir).parent))
            if saved_hw is not None:
                lg.update_high_watermark(saved_hw)
            return lg

        for topic, state in wanted:
            self.log_dirs.place((topic.name, state.partition))
        logs = await trio.to_thread.run_sync(in_parallel, open_one, wanted)
        # What opening changed (each clean-shutdown marker removed) is durable before any log
        # is written: one syncfs per log directory instead of an fsync per partition
        for d in self.log_dirs.dirs:
            try:
                await trio.to_thread.run_sync(_core.sync_filesystem, str(d))
            except _core.LogBrokerError as e:
                log.error("syncing log directory %s after opening its logs failed: %s", d, e)
        for lg in logs:
            clean, recovered, truncated, dropped, first_error = lg.recovery_report
            if not clean:
                log.warning(
                    "log %s-%d in %s was not shut down cleanly: recovered %d segment(s), truncated %d byte(s), "
                    "dropped %d segment(s)%s; log end offset now %d",
                    lg.topic,
                    lg.partition,
                    lg.dir,
                    recovered,
                    truncated,
                    dropped,
                    f", first problem: {first_error}" if first_error else "",
                    lg.log_end_offset,
                    extra=fields(topic=lg.topic, partition=lg.partition, offset=lg.log_end_offset),
                )
        for (topic, state), lg in zip(wanted, logs):
            self._add(self._partition(topic, state, lg))
        self._set_cluster_view(image, set(image.topics), True)
        self._image = image
        self._tier_topics = {name for name in image.topics if self._table_tier_topic(name)}
        self.remote.apply(image, None, [], [])
        await self.replication.after_image(image)
        known = {partition_dir_name(t, p) for (t, p) in self.partitions}
        for key, d in list(self.log_dirs.where.items()):
            if partition_dir_name(*key) not in known:
                log.warning(
                    "directory %s does not belong to any topic in the metadata image; left untouched",
                    d / partition_dir_name(*key),
                )

    async def apply_metadata(self, image: MetadataImage, delta: MetadataDelta | None = None) -> None:
        """Reconcile local partitions with a new image: open new replicas, apply leader
        and ISR changes, delete replicas of deleted topics. With a delta only the topics it
        changed are looked at (the cost is the change's, not the cluster's); without one
        (a snapshot loaded) every topic is."""
        async with self._applying:
            await self._apply_metadata(image, delta)

    async def _apply_metadata(self, image: MetadataImage, delta: MetadataDelta | None) -> None:
        old = self._image
        reconfigure = (delta is None or delta.broker_configs_changed) and bool(self._apply_dynamic_configs(image))
        if delta is None or old is None:
            names = set(image.topics) | {k[0] for k in self.partitions} | (set(old.topics) if old else set())
            follow_names = None
        else:
            names = delta.changed_topics
            follow_names = None if delta.brokers_changed else names  # a leader's endpoint may have moved
        current = {k: p for name in names for k, p in self._local_of(name)}
        wanted: dict[tuple[str, int], tuple] = {}
        for name in names:
            topic = image.topics.get(name)
            if topic is None:
                continue
            for state in topic.partitions.values():
                if self.node_id in state.replicas:
                    wanted[(topic.name, state.partition)] = (topic, state)
        to_open = [(k, v) for k, v in wanted.items() if k not in current or current[k].topic_id != v[0].topic_id]
        to_delete = [p for k, p in current.items() if k not in wanted or wanted[k][0].topic_id != p.topic_id]
        config_changed = []
        if old is not None:
            for k, p in current.items():
                if k in wanted and wanted[k][0].topic_id == p.topic_id:
                    was = old.topics.get(k[0])
                    if (
                        was is not None
                        and was.configs is not wanted[k][0].configs
                        and was.configs != wanted[k][0].configs
                    ):
                        config_changed.append((p, wanted[k][0].configs))

        # Replicas that stop following (now leaders, leaderless, deleted) are off the fetch
        # loops before anything else changes.
        await self.replication.before_image(image, follow_names)
        # The data path learns the new image first, so a request for a deleted partition
        # finds no such topic rather than a leader that is going away.
        self._set_cluster_view(image, names, delta is None or old is None or delta.brokers_changed)
        for p in to_delete:
            p.deleted = True
            self.table.remove(p.topic, p.index)
            self.mover.cancel((p.topic, p.index))
        for (name, idx), _v in to_open:
            self.log_dirs.place((name, idx))

        def work() -> list[_core.Log]:
            for p in to_delete:
                p.log.delete()
            for p, configs in config_changed:
                p.log.update_config(self.config.engine_config(configs))

            def open_new(item) -> _core.Log | _core.LogBrokerError:
                # A replica that went offline here keeps its data; any other is new here.
                (name, idx), (topic, _state) = item
                return self._try_open_log(name, idx, topic.configs, new=(name, idx) not in self.offline)

            return in_parallel(open_new, to_open)

        opened = await trio.to_thread.run_sync(work)
        for p in to_delete:
            self._forget(p)
            if (p.topic, p.index) not in wanted:
                self.log_dirs.forget((p.topic, p.index))
            p.deleted = True
            p.notify()
        for key in [k for k in self.offline if k[0] in names and k not in wanted]:
            del self.offline[key]  # deleted, or moved away meanwhile
        added = []
        for ((name, idx), (topic, state)), lg in zip(to_open, opened):
            if isinstance(lg, _core.LogBrokerError):
                self._went_offline(name, idx, lg)
            else:
                self.offline.pop((name, idx), None)
                added.append(self._partition(topic, state, lg))
                self._add(added[-1])
        for p, configs in config_changed:
            p.apply_state(p.state, self._min_isr(configs))
        for key, (_topic, state) in wanted.items():
            p = self.partitions.get(key)
            if p is not None and p.state != state:
                p.apply_state(state)
                self._track_isr(p)
        self._image = image
        for name in set(image.topics) if reconfigure or delta is None or old is None else names:
            if self._table_tier_topic(name):
                self._tier_topics.add(name)
            else:
                self._tier_topics.discard(name)
        self.remote.apply(image, None if old is None else delta, added, config_changed, to_delete)
        if reconfigure:
            await self._reconfigure_all()
        await self.replication.after_image(image, follow_names)

    def _went_offline(self, topic: str, index: int, error: Exception) -> None:
        if (topic, index) not in self.offline:
            log.error(
                "cannot open the log of %s-%d on this broker, the partition stays offline here (retried every "
                "%d ms): %s",
                topic,
                index,
                self.config.get_int("log.flush.scheduler.interval.ms"),
                error,
                extra=fields(topic=topic, partition=index),
            )
        self.offline[(topic, index)] = str(error)

    async def _retry_offline(self) -> None:
        """Open again the logs that could not be opened (the flush scheduler calls this)."""
        image = self._image
        wanted = []
        for topic_name, index in list(self.offline):
            t = image.topics.get(topic_name) if image is not None else None
            state = t.partitions.get(index) if t is not None else None
            if state is None or self.node_id not in state.replicas:
                self.offline.pop((topic_name, index), None)
            else:
                wanted.append((t, state))
        if not wanted:
            return
        for t, state in wanted:
            self.log_dirs.place((t.name, state.partition))

        def open_one(item) -> _core.Log | _core.LogBrokerError:
            topic, state = item
            return self._try_open_log(topic.name, state.partition, topic.configs)

        opened = await trio.to_thread.run_sync(in_parallel, open_one, wanted)
        for (topic, state), lg in zip(wanted, opened):
            if isinstance(lg, _core.LogBrokerError) or self._image is not image:
                if not isinstance(lg, _core.LogBrokerError):
                    await trio.to_thread.run_sync(lg.close)  # the image moved on: the next pass decides
                continue
            del self.offline[(topic.name, state.partition)]
            self._add(self._partition(topic, state, lg))
            log.info(
                "opened the log of %s-%d: the partition is online on this broker again",
                topic.name,
                state.partition,
                extra=fields(topic=topic.name, partition=state.partition),
            )
        await self.replication.after_image(image, {t.name for t, _s in wanted})

    def _local_of(self, topic: str) -> list[tuple[tuple[str, int], Partition]]:
        return [((topic, i), self.partitions[(topic, i)]) for i in self._by_topic.get(topic, ())]

    def _add(self, p: Partition) -> None:
        self.partitions[(p.topic, p.index)] = p
        self._by_topic.setdefault(p.topic, set()).add(p.index)
        self._track_isr(p)

    def _track_isr(self, p: Partition) -> None:
        """Keeps `isr_short` (led partitions with a replica outside the ISR) true for `p`."""
        key = (p.topic, p.index)
        if p.is_leader and len(p.isr) < len(p.replicas):
            self.isr_short[key] = p
        else:
            self.isr_short.pop(key, None)

    def _forget(self, p: Partition) -> None:
        if self.partitions.get((p.topic, p.index)) is p:
            self.isr_short.pop((p.topic, p.index), None)
            del self.partitions[(p.topic, p.index)]
            indexes = self._by_topic.get(p.topic, set())
            indexes.discard(p.index)
            if not indexes:
                self._by_topic.pop(p.topic, None)

    def _set_cluster_view(self, image: MetadataImage, names: set[str], brokers_changed: bool) -> None:
        """The leaders of the topics in `names` (every partition's leader, for the data path's
        NOT_LEADER_OR_FOLLOWER answers, KIP-951) and, when they changed, every broker's
        endpoint; one call per image."""
        topics, removed = [], []
        for name in names:
            t = image.topics.get(name)
            if t is None:
                removed.append(name)
            else:
                topics.append(
                    (t.name, t.topic_id.bytes, [(s.partition, s.leader, s.leader_epoch) for s in t.partitions.values()])
                )
        brokers = [(b.node_id, b.host, b.port, b.rack) for b in image.brokers.values()] if brokers_changed else None
        self.table.update_metadata(self.node_id, topics, removed, brokers)

    async def shutdown(self) -> None:
        """Flush and close every log, then write the checkpoints."""
        if self._closed:
            return
        self._closed = True
        self.mover.cancel_all()
        await self.replication.shutdown()
        parts = list(self.partitions.values())

        def on_each(method: str, what: str):
            def run(p: Partition) -> None:
                try:
                    getattr(p.log, method)()
                except Exception as e:  # noqa: BLE001 - keep on with the others; that log is recovered at the next start
                    log.error(
                        "%s of log %s in %s failed: %s",
                        what,
                        p.name,
                        p.log.dir,
                        e,
                        extra=fields(topic=p.topic, partition=p.index),
                    )

            return run

        def sync_all(what: str) -> bool:
            ok = True
            for d in self.log_dirs.dirs:
                try:
                    _core.sync_filesystem(str(d))
                except _core.LogBrokerError as e:
                    log.error("syncing %s in %s at shutdown failed: %s", what, d, e)
                    ok = False
            return ok

        def close_all() -> None:
            # Kafka's clean shutdown for every log at once: each log's files written, one
            # syncfs per log directory, then the clean-shutdown markers and another syncfs
            # (two syncs in all, not some eight fsyncs a partition; Log::close_unsynced)
            t0 = time.monotonic()
            in_parallel(on_each("close_unsynced", "closing"), parts)
            t1 = time.monotonic()
            if sync_all("the logs' last writes"):  # else no marker: every log is recovered
                t2 = time.monotonic()
                in_parallel(on_each("mark_clean_shutdown", "writing the clean-shutdown marker"), parts)
                t3 = time.monotonic()
                sync_all("the clean-shutdown markers")
                log.info(
                    "closed %d log(s) in %.1f s: their files written in %.1f s, synced in %.1f s, the "
                    "clean-shutdown markers written in %.1f s and synced in %.1f s",
                    len(parts),
                    time.monotonic() - t0,
                    t1 - t0,
                    t2 - t1,
                    t3 - t2,
                    time.monotonic() - t3,
                )
            try:
                self._write_checkpoints(parts)
            except Exception as e:  # noqa: BLE001 - a full disk: the logs are closed; recovery redoes the HW
                log.error(
                    "writing the high-watermark checkpoints (%s in each log directory) at shutdown failed: %s",
                    HW_CHECKPOINT,
                    e,
                )

        await trio.to_thread.run_sync(close_all)

    def _write_checkpoints(self, parts: list[Partition]) -> None:
        by_dir: dict[Path, list] = {d: [] for d in self.log_dirs.dirs}
        for p in parts:
            by_dir.setdefault(Path(p.log.dir).parent, []).append((p.topic, p.index, p.log.high_watermark))
        for d, entries in by_dir.items():
            _core.write_offset_checkpoint(str(d / HW_CHECKPOINT), entries)
        ids = {p.topic: p.topic_id for p in parts}
        if ids != self._ids_written:
            topic_id_checkpoint.write(self.data_dir, ids)
            self._ids_written = ids

    # --- log directories ------------------------------------------------------------

    @property
    def image(self) -> MetadataImage | None:
        return self._image

    @property
    def metadata_lock(self) -> trio.Lock:
        """Held while a metadata image applies (and while a moved replica's log is swapped)."""
        return self._applying

    def topic_configs(self, topic: str) -> dict[str, str]:
        t = self._image.topics.get(topic) if self._image is not None else None
        return t.configs if t is not None else {}

    def alter_log_dir(self, topic: str, index: int, path: str) -> ErrorCode:
        """AlterReplicaLogDirs for one partition (Kafka's ReplicaManager.alterReplicaLogDirs):
        a replica hosted here is moved to the log directory `path` (broker/replica_mover.py);
        one not hosted here yet is created there when it comes (REPLICA_NOT_AVAILABLE now)."""
        key = (topic, index)
        dest = self.log_dirs.find(path)
        if dest is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if key in self.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        p = self.partitions.get(key)
        if p is None or p.deleted:
            self.log_dirs.preferred[key] = dest
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if Path(p.log.dir).parent == dest:
            self.mover.cancel(key)  # back where it is: a move elsewhere stops
            return ErrorCode.NONE
        try:
            self.mover.start(key, dest)
        except RuntimeError as e:
            log.error("cannot move %s-%d to %s: %s", topic, index, dest, e, extra=fields(topic=topic, partition=index))
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    def replaced(self, old: Partition, lg: _core.Log | None, error: Exception | None, where: Path) -> None:
        """A moved replica's log was swapped (broker/replica_mover.py): `lg` opened from
        `where`, or `error` kept it from opening (the partition goes offline here and is
        retried from `where`)."""
        key = (old.topic, old.index)
        self.log_dirs.moved(key, where.parent)
        old.deleted = True
        self._forget(old)
        old.notify()
        if lg is None:
            self._went_offline(old.topic, old.index, error)
            return
        topic = self._image.topics[old.topic]
        self._add(self._partition(topic, topic.partitions[old.index], lg))

    # --- lookups --------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def high_watermark_moved(self, topic: str, partition: int) -> None:
        """The data path reports an HW move of a partition with control-plane waiters."""
        p = self.partitions.get((topic, partition))
        if p is not None:
            p.notify()

    # --- periodic work --------------------------------------------------------------

    async def run_background(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """Retention, flush/roll and checkpoint schedulers; runs until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._every, self.config.get_int("log.retention.check.interval.ms"), self._retention)
            nursery.start_soon(
                self._every, self.config.get_int("log.flush.scheduler.interval.ms"), self._flush_and_roll
            )
            nursery.start_soon(
                self._every, self.config.get_int("replica.high.watermark.checkpoint.interval.ms"), self._checkpoint
            )
            if self.config.get_bool("log.cleaner.enable"):
                nursery.start_soon(self._every, self.config.get_int("log.cleaner.backoff.ms"), self._clean)
            # runs end about every interval: the interval is the bound on a record's lag to the table
            nursery.start_soon(
                run_ending_every, self.config.get_int("iceberg.commit.interval.ms"), self._iceberg_commit, log
            )
            nursery.start_soon(self._every, TABLE_TIER_CHECK_MS, self._table_tier_views)
            await nursery.start(self.mover.run)
            await nursery.start(self.remote.run)
            task_status.started()

    async def _every(self, interval_ms: int, job) -> None:
        await run_every(interval_ms, job, log)

    async def _retention(self) -> None:
        parts = list(self.partitions.values())

        archiving = {p.topic for p in parts if self._archives(p.topic)}
        tables = {p.topic for p in parts if self._is_table(p.topic)}

        def work() -> None:
            now = now_ms()
            for p in parts:
                if p.deleted:
                    continue
                if p.topic in tables and p.is_leader:
                    self._delete_held_by_table(p, now)
                elif p.topic in archiving and p.is_leader:
                    try:
                        self.archiver.archive_due(p, now)
                    except (ArchiveError, _core.LogBrokerError) as e:
                        log.error(
                            "archiving %s failed, its segments stay in the log until the next retention check: %s",
                            p.name,
                            e,
                            extra=fields(topic=p.topic, partition=p.index),
                        )
                try:
                    deleted = p.log.enforce_retention(now)
                except _core.LogBrokerError as e:
                    _periodic_failure("retention", p, e)
                    continue
                if deleted:
                    start = p.log.log_start_offset
                    log.info(
                        "retention deleted %d segment(s) of %s; log start offset now %d",
                        deleted,
                        p.name,
                        start,
                        extra=fields(topic=p.topic, partition=p.index, offset=start),
                    )

        await trio.to_thread.run_sync(work)

    def _delete_held_by_table(self, p: Partition, now: int) -> None:
        """Retention of an Iceberg topic's partition (leader): the planned segments the
        topic's table already holds go (broker/iceberg_committer.py)."""
        try:
            end = self.iceberg.deletable(p, p.log.retention_plan(now))
            if end is not None and end > p.log.log_start_offset:
                p.log.delete_records_before(end)
                log.info(
                    "retention deleted %s below offset %d, which its Iceberg table holds",
                    p.name,
                    end,
                    extra=fields(topic=p.topic, partition=p.index, offset=end),
                )
        except _core.LogBrokerError as e:
            _periodic_failure("retention", p, e)

    async def _iceberg_commit(self) -> None:
        """Commit the new committed records of the Iceberg topics' partitions this node leads."""
        by_topic: dict[str, TableTopic] = {}
        for p in list(self.partitions.values()):
            if p.is_leader and not p.deleted and self._is_table(p.topic):
                if p.topic not in by_topic:
                    by_topic[p.topic] = TableTopic(
                        [],
                        self._topic_config(p.topic, "iceberg.mode"),
                        p.topic in self._tier_topics,
                        bool(self._topic_config(p.topic, "iceberg.upsert.enable")),
                        self._topic_config(p.topic, "iceberg.invalid.record.action") == "dlq_table",
                        self._topic_config(p.topic, "iceberg.partition.spec"),
                    )
                by_topic[p.topic].parts.append(p)
        # also when it leads none: the key indexes of topics it no longer commits go
        await self.iceberg.commit_all(by_topic)

    async def _table_tier_views(self) -> None:
        """The table as the tier. Every local replica of such a topic has a view of the
        table's files or a pending one (a fetch below the local log start then gets no
        records for now, never OFFSET_OUT_OF_RANGE); a partition this node has come to lead
        gets its view now, not at the next commit round; one it no longer leads goes back to
        pending (its list would go stale). O(local partitions of such topics) a second: the
        topics are kept as metadata changes (`_tier_topics`)."""
        tier = self.iceberg.tier
        by_topic: dict[str, list[Partition]] = {}
        for topic in list(self._tier_topics):
            for i in list(self._by_topic.get(topic, ())):
                p = self.partitions.get((topic, i))
                if p is None or p.deleted:
                    continue
                key = (p.topic_id, p.index)
                if not p.is_leader:
                    if tier.forget(key) or p.core.table_tier_files is None:
                        p.core.set_table_tier(None, pending=True)
                    continue
                if key not in tier.views:
                    if p.core.table_tier_files is None:
                        p.core.set_table_tier(None, pending=True)
                    by_topic.setdefault(topic, []).append(p)
        for topic, parts in by_topic.items():
            try:
                await trio.to_thread.run_sync(self.iceberg.adopt_tier_views, topic, parts)
            except IcebergError as e:
                log.warning(
                    "the Iceberg table of topic %s cannot be read for partitions %s (fetches below their local "
                    "log start wait): %s",
                    topic,
                    sorted(p.index for p in parts),
                    e,
                    extra={"topic": topic},
                )

    def _table_tier_topic(self, topic: str) -> bool:
        """The topic's Iceberg table is its tier: iceberg.enable and remote.storage.enable
        (never an upsert table's, which does not hold every record)."""
        return topic in self._image.topics and bool(
            self._is_table(topic)
            and self._topic_config(topic, "remote.storage.enable")
            and not self._topic_config(topic, "iceberg.upsert.enable")
        )

    def _is_table(self, topic: str) -> bool:
        """iceberg.enable is on for the topic (its override, else the broker default)."""
        return bool(self._topic_config(topic, "iceberg.enable"))

    def _topic_config(self, topic: str, key: str):
        t = self._image.topics.get(topic) if self._image is not None else None
        return self.config.topic_value(t.configs if t is not None else {}, key)

    def _archives(self, topic: str) -> bool:
        """retention.archive is on for the topic (its override, else the broker default)."""
        return bool(self._topic_config(topic, "retention.archive"))

    async def _clean(self) -> None:
        """The log cleaner: one compaction pass over every log whose cleanup.policy
        includes compact (the engine skips the others and logs that are not dirty enough)."""
        parts = list(self.partitions.values())

        def work() -> None:
            now = now_ms()
            for p in parts:
                if p.deleted:
                    continue
                try:
                    r = p.log.compact(now)
                except _core.LogBrokerError as e:
                    _periodic_failure("compaction", p, e)
                    continue
                if r.segments_cleaned:
                    log.info(
                        "compacted %s: %d segment(s), %d -> %d bytes, %d record(s) and %d tombstone(s) removed",
                        p.name,
                        r.segments_cleaned,
                        r.bytes_before,
                        r.bytes_after,
                        r.records_removed,
                        r.tombstones_removed,
                        extra=fields(topic=p.topic, partition=p.index),
                    )

        await trio.to_thread.run_sync(work)

    async def _flush_and_roll(self) -> None:
        if self.offline:
            await self._retry_offline()
        parts = [p for p in self.partitions.values() if not p.deleted]
        failed = await trio.to_thread.run_sync(_core.roll_and_flush, [p.log for p in parts], now_ms())
        for i, e in failed:
            _periodic_failure("flush/roll", parts[i], e)

    async def _checkpoint(self) -> None:
        parts = [p for p in self.partitions.values() if not p.deleted]
        await trio.to_thread.run_sync(self._write_checkpoints, parts)


def _periodic_failure(job: str, p: Partition, e: Exception) -> None:
    """A periodic pass (retention, compaction, flush/roll) failed on one partition. The
    passes work on a snapshot of the partitions, so a topic deleted meanwhile shows up
    here with a closed log: that is expected, not a fault."""
    if p.deleted:
        log.debug(
            "%s of %s skipped: the partition was deleted meanwhile (%s)",
            job,
            p.name,
            e,
            extra=fields(topic=p.topic, partition=p.index),
        )
    else:
        log.error("%s of %s failed: %s", job, p.name, e, extra=fields(topic=p.topic, partition=p.index))
