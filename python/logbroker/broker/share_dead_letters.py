"""Dead-letter topics for share groups: records a share group gives up on — archived at the
delivery count limit, or rejected by a consumer — are copied to the group's dead-letter
topic, as KIP-1191 describes.

Configuration: the group config `errors.deadletterqueue.topic.name` (default: the broker key
`group.share.errors.deadletterqueue.topic.name`, empty = no dead letters) names the topic;
it must exist and start with `errors.deadletterqueue.topic.name.prefix` (`dlq.` by default),
so a consumer cannot make the broker write into an arbitrary topic.

Each copy keeps the record's key, value, headers and timestamp and adds headers naming where
it came from (the same names our client's DeadLetters uses):

    dlt.source.topic, dlt.source.partition, dlt.source.offset   the original record
    dlt.group                                                   the share group
    dlt.attempts                                                its delivery count
    dlt.error                                                   why it was given up on

It goes to partition (source partition mod the dead-letter topic's partition count) through
that partition's leader, as a Produce with acks=all over the broker-to-broker channel (to
this broker too: one path). The copy happens in the background, after the record is already
archived; a failed write is retried with back-off up to `ATTEMPTS` times, then logged as an
error naming every record left out. Record bytes are read, decoded and encoded by the Rust
log and codec (`Log.read_batches`, `decode_records`, `encode_batch`); Python handles the
record objects of dead letters only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import trio

from logbroker import _core
from logbroker.coord.broker_channel import BrokerChannel, BrokerUnreachable
from logbroker.coord.peer_security import inter_broker_security
from logbroker.log_format import fields
from logbroker.protocol import REQUESTS, ErrorCode

log = logging.getLogger("logbroker.share")

DLQ_TOPIC_KEY = "errors.deadletterqueue.topic.name"
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
    attempts: int = 0


class DeadLetterWriter:
    def __init__(self, config, controller, node_id: int) -> None:
        self.config = config
        self.controller = controller
        self.prefix = config.get_str("errors.deadletterqueue.topic.name.prefix")
        self.channel = BrokerChannel(node_id, inter_broker_security(config))
        self.pending: list[DeadLetters] = []
        self.written = 0  # records copied, for tests and logs
        self._wake = trio.Event()

    def topic_for(self, group_id: str) -> str | None:
        overrides = self.controller.image.group_configs.get(group_id, {})
        name = self.config.group_value(overrides, DLQ_TOPIC_KEY)
        return name or None

    def submit(self, group_id: str, topic: str, partition: int, lg, entries: list[tuple[int, int, str]]) -> None:
        """Queue records the group gave up on; dropped (logged) without a usable dead-letter topic."""
        if not entries:
            return
        dlq = self.topic_for(group_id)
        if dlq is None:
            return
        if not dlq.startswith(self.prefix):
            log.warning(
                "share group %r: dead-letter topic %r does not start with errors.deadletterqueue.topic.name."
                "prefix=%r; %d record(s) of %s-%d not copied (offsets %s)",
                group_id,
                dlq,
                self.prefix,
                len(entries),
                topic,
                partition,
                [e[0] for e in entries],
                extra=fields(group=group_id, topic=topic, partition=partition),
            )
            return
        self.pending.append(DeadLetters(group_id, topic, partition, dlq, lg, list(entries)))
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                work, self.pending = self.pending, []
                retry = []
                for item in work:
                    try:
                        await self._write(item)
                    except (DeadLetterError, BrokerUnreachable, _core.LogBrokerError, OSError) as e:
                        item.attempts += 1
                        if item.attempts >= ATTEMPTS:
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

    async def _write(self, item: DeadLetters) -> None:
        image = self.controller.image
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
        """The dead-letter batch (in a worker thread: reads the log)."""
        wanted = {off: (count, reason) for off, count, reason in item.entries}
        found = {}
        hw = item.log.high_watermark
        pos = min(wanted)
        last = max(wanted)
        while pos <= last and pos < hw:
            got = item.log.read_batches(pos, 1 << 20, hw)
            if got is None:
                break
            data, end = got
            for r in _core.decode_records(item.topic, item.partition, data, pos).take():
                if r.offset in wanted:
                    found[r.offset] = r
            pos = end
        records = []
        for off in sorted(found):
            r = found[off]
            count, reason = wanted[off]
            headers = [(k.encode(), v) for k, v in r.headers] + [
                (b"dlt.source.topic", item.topic.encode()),
                (b"dlt.source.partition", str(item.partition).encode()),
                (b"dlt.source.offset", str(off).encode()),
                (b"dlt.group", item.group_id.encode()),
                (b"dlt.attempts", str(count).encode()),
                (b"dlt.error", reason.encode()),
            ]
            records.append((r.key, r.value, r.timestamp - found[min(found)].timestamp, headers))
        if not records:
            return None
        return _core.encode_batch(records, base_timestamp=found[min(found)].timestamp)


class DeadLetterError(Exception):
    pass
