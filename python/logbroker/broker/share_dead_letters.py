"""Dead-letter topics for share groups (KIP-1191, Kafka's names and record shape): records a
share group gives up on — rejected by a consumer, or at the delivery count limit when they
come back (released, lock run out, member gone) — are written to the group's dead-letter
topic, with the finalized feature share.version at 2 or more.

Configuration (Kafka's keys):
    errors.deadletterqueue.topic.name          group config (default: the broker key
                                               group.share.errors.deadletterqueue.topic.name,
                                               empty = none); never a name starting with __
    errors.deadletterqueue.copy.record.enable  group config: copy the record's key and value
    errors.deadletterqueue.topic.name.prefix   broker, dynamic (dlq.): the name must start so
    errors.deadletterqueue.auto.create.topics.enable
                                               broker, dynamic (false): create a missing topic
                                               (broker defaults for partitions and replication,
                                               errors.deadletterqueue.group.enable=true,
                                               message.timestamp.type=CreateTime)
    errors.deadletterqueue.group.enable        topic config: an existing topic must have it

A topic that fails these checks gets nothing: the dead letters are dropped and logged (the
records stay archived), as Kafka does.

Each dead letter is one record, timestamped when written, uncompressed, with headers (UTF-8):

    __dlq.errors.topic, __dlq.errors.partition, __dlq.errors.offset   the original record
    __dlq.errors.group                                                the share group
    __dlq.errors.delivery.count                                       its delivery count
    __dlq.errors.message                  "Offset rejected by client." or
                                          "Offset delivery count exceeded the threshold."

and, with copy.record.enable, the original key and value (never its headers); else a null
key and value. It goes to partition (source partition mod the dead-letter topic's partition
count) through that partition's leader, as a Produce with acks=all over the broker-to-broker
channel (to this broker too: one path). The copy happens in the background, after the record
is ARCHIVING (share_partition.py: written with the state, so a new leader writes it again); a
failed write is retried with back-off up to `ATTEMPTS` times, then logged as an error naming
every record left out. Written or given up on, `done(offsets)` makes the records ARCHIVED.
Record bytes are read, decoded and encoded by the Rust log and codec (`Log.read_batches`,
`decode_records`, `encode_batch`); Python handles the record objects of dead letters only.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import trio

from logbroker import _core
from logbroker.coord.broker_channel import BrokerChannel, BrokerUnreachable
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.feature_control import finalized
from logbroker.coord.metadata.replication_control import NewTopicSpec
from logbroker.coord.peer_security import inter_broker_security
from logbroker.log_format import fields
from logbroker.protocol import REQUESTS, ErrorCode

log = logging.getLogger("logbroker.share")

DLQ_TOPIC_KEY = "errors.deadletterqueue.topic.name"
COPY_RECORD_KEY = "errors.deadletterqueue.copy.record.enable"
GROUP_ENABLE_KEY = "errors.deadletterqueue.group.enable"
ATTEMPTS = 5
PRODUCE_VERSION = 9


@dataclass
class DeadLetters:
    group_id: str
    topic: str
    partition: int
    dlq_topic: str
    log: _core.Log  # the source partition's
    entries: list[tuple[int, int, str]]  # (offset, delivery count, reason)
    copy_record: bool = False
    attempts: int = 0
    done: Any = None  # done(offsets): the dead letters are written or given up on (ARCHIVING -> ARCHIVED)

    def finish(self) -> None:
        if self.done is not None:
            self.done([e[0] for e in self.entries])


class DeadLetterWriter:
    def __init__(self, config, controller, node_id: int) -> None:
        self.config = config
        self.controller = controller
        self.channel = BrokerChannel(node_id, inter_broker_security(config))
        self.pending: list[DeadLetters] = []
        self.written = 0  # records copied, for tests and logs
        self._wake = trio.Event()

    def topic_for(self, group_id: str) -> str | None:
        overrides = self.controller.image.group_configs.get(group_id, {})
        name = self.config.group_value(overrides, DLQ_TOPIC_KEY)
        return name or None

    def enabled(self) -> bool:
        """share.version 2 or more is finalized (KIP-1191's gate)."""
        return finalized(self.controller.image, self.config).get("share.version", 0) >= 2

    def active_for(self, group_id: str) -> bool:
        """Whether `group_id`'s give-ups go to a dead-letter topic (ARCHIVING first)."""
        return self.topic_for(group_id) is not None and self.enabled()

    def submit(
        self, group_id: str, topic: str, partition: int, lg, entries: list[tuple[int, int, str]], done=None
    ) -> None:
        """Queue records the group gave up on; `done(offsets)` once their dead letters are
        written or given up on (at once without a dead-letter topic or below share.version 2)."""
        if not entries:
            return
        dlq = self.topic_for(group_id)
        copy = bool(self.config.group_value(self.controller.image.group_configs.get(group_id, {}), COPY_RECORD_KEY))
        item = DeadLetters(group_id, topic, partition, dlq or "", lg, list(entries), copy, done=done)
        if dlq is None or not self.enabled():
            item.finish()
            return
        self.pending.append(item)
        self._wake.set()

    def _refusal(self, item: DeadLetters) -> str | None:
        """Why `item`'s dead-letter topic may not take it (Kafka's checks), or None; a topic
        to create is created here first."""
        prefix = self.config.get_str("errors.deadletterqueue.topic.name.prefix")
        if prefix and not item.dlq_topic.startswith(prefix):
            return f"does not start with errors.deadletterqueue.topic.name.prefix={prefix!r}"
        if item.dlq_topic.startswith("__"):
            return "starts with __ (an internal topic)"
        t = self.controller.image.topics.get(item.dlq_topic)
        if t is None:
            if not self.config.get_bool("errors.deadletterqueue.auto.create.topics.enable"):
                return "does not exist and errors.deadletterqueue.auto.create.topics.enable is false"
            return None
        enable = t.configs.get(GROUP_ENABLE_KEY, self.config.get_str(GROUP_ENABLE_KEY))
        if str(enable).lower() != "true":
            return f"does not have {GROUP_ENABLE_KEY}=true"
        return None

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                work, self.pending = self.pending, []
                retry = []
                for item in work:
                    refusal = self._refusal(item)
                    if refusal is not None:
                        log.warning(
                            "share group %r: dead-letter topic %r %s; %d record(s) of %s-%d not written (offsets %s)",
                            item.group_id,
                            item.dlq_topic,
                            refusal,
                            len(item.entries),
                            item.topic,
                            item.partition,
                            [e[0] for e in item.entries],
                            extra=fields(group=item.group_id, topic=item.topic, partition=item.partition),
                        )
                        item.finish()
                        continue
                    try:
                        await self._write(item)
                        item.finish()
                    except (DeadLetterError, BrokerUnreachable, _core.LogBrokerError, OSError) as e:
                        item.attempts += 1
                        if item.attempts >= ATTEMPTS:
                            item.finish()  # archived regardless, as Kafka does
                            log.error(
                                "share group %r: %d dead letter(s) of %s-%d (offsets %s) not copied to %s "
                                "after %d attempts: %s",
                                item.group_id,
                                len(item.entries),
                                item.topic,
                                item.partition,
                                [e[0] for e in item.entries],
                                item.dlq_topic,
                                item.attempts,
                                e,
                                extra=fields(group=item.group_id, topic=item.topic, partition=item.partition),
                            )
                        else:
                            log.info(
                                "share group %r: copying dead letters of %s-%d to %s failed (attempt %d): %s",
                                item.group_id,
                                item.topic,
                                item.partition,
                                item.dlq_topic,
                                item.attempts,
                                e,
                                extra=fields(group=item.group_id, topic=item.topic, partition=item.partition),
                            )
                            retry.append(item)
                if retry:
                    self.pending[:0] = retry
                    await trio.sleep(0.2 * 2 ** min(item.attempts for item in retry))
                    self._wake.set()
        finally:
            with trio.CancelScope(shield=True):
                await self.channel.aclose()

    async def _create(self, name: str) -> None:
        """Auto-creates a dead-letter topic (errors.deadletterqueue.auto.create.topics.enable)."""
        spec = NewTopicSpec(
            name=name,
            num_partitions=-1,
            replication_factor=-1,
            configs={GROUP_ENABLE_KEY: "true", "message.timestamp.type": "CreateTime"},
        )
        try:
            results = await self.controller.create_topics([spec])
        except ControllerError as e:
            raise DeadLetterError(f"creating dead-letter topic {name!r}: {e.message}") from None
        r = results[0]
        if isinstance(r, ControllerError) and r.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise DeadLetterError(f"creating dead-letter topic {name!r}: {r.message}")
        log.info("dead-letter topic %s created (errors.deadletterqueue.auto.create.topics.enable)", name)

    async def _write(self, item: DeadLetters) -> None:
        image = self.controller.image
        if item.dlq_topic not in image.topics:
            await self._create(item.dlq_topic)
            raise DeadLetterError(f"dead-letter topic {item.dlq_topic!r} created; writing next")
        t = image.topics.get(item.dlq_topic)
        if t is None or not t.partitions:
            raise DeadLetterError(f"dead-letter topic {item.dlq_topic!r} does not exist")
        index = item.partition % len(t.partitions)
        leader = t.partitions[index].leader
        endpoint = next(((b.host, b.port) for b in self.controller.client_brokers(image) if b.node_id == leader), None)
        if endpoint is None:
            raise DeadLetterError(f"{item.dlq_topic}-{index} has no live leader (leader {leader})")
        batch = await trio.to_thread.run_sync(self._batch, item)
        if batch is None:
            return
        Req: Any = REQUESTS[0]
        body = Req(
            transactional_id=None,
            acks=-1,
            timeout_ms=30000,
            topic_data=[
                Req.TopicProduceData(
                    name=item.dlq_topic, partition_data=[Req.PartitionProduceData(index=index, records=batch)]
                )
            ],
        )
        resp = await self.channel.request(leader, endpoint, 0, PRODUCE_VERSION, body, timeout=35)
        pr = resp.responses[0].partition_responses[0]
        if pr.error_code != ErrorCode.NONE:
            raise DeadLetterError(
                f"Produce to {item.dlq_topic}-{index} answered {ErrorCode(pr.error_code).name}"
                + (f": {pr.error_message}" if pr.error_message else "")
            )
        self.written += len(item.entries)
        log.info(
            "share group %r: %d record(s) of %s-%d (offsets %s) copied to dead-letter topic %s-%d",
            item.group_id,
            len(item.entries),
            item.topic,
            item.partition,
            [e[0] for e in item.entries],
            item.dlq_topic,
            index,
            extra=fields(group=item.group_id, topic=item.topic, partition=item.partition),
        )

    def _batch(self, item: DeadLetters) -> bytes | None:
        """The dead-letter batch (in a worker thread: reads the log for copy.record.enable)."""
        found = {}
        if item.copy_record:
            wanted = {off for off, _count, _reason in item.entries}
            hw = item.log.high_watermark
            pos, last = min(wanted), max(wanted)
            while pos <= last and pos < hw:
                got = item.log.read_batches(pos, 1 << 20, hw)
                if got is None:
                    break
                data, end = got
                for r in _core.decode_records(item.topic, item.partition, data, pos).take():
                    if r.offset in wanted:
                        found[r.offset] = (r.key, r.value)
                pos = end
        records = []
        for off, count, reason in sorted(item.entries):
            key, value = found.get(off, (None, None))
            headers = [
                (b"__dlq.errors.topic", item.topic.encode()),
                (b"__dlq.errors.partition", str(item.partition).encode()),
                (b"__dlq.errors.offset", str(off).encode()),
                (b"__dlq.errors.group", item.group_id.encode()),
                (b"__dlq.errors.delivery.count", str(count).encode()),
                (b"__dlq.errors.message", reason.encode()),
            ]
            records.append((key, value, 0, headers))
        if not records:
            return None
        return _core.encode_batch(records, base_timestamp=int(time.time() * 1000))


class DeadLetterError(Exception):
    pass
