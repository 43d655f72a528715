"""Fetch (1): read record batches, long-polling until min_bytes or max_wait_ms.

Reads never copy record bytes: the Rust log returns FileRegions (segment file,
position, length) that the server sends with sendfile. One thread hop reads every
partition of a request. Limits follow Kafka (KIP-74): the response holds at most
max_bytes and each partition at most partition_max_bytes, except that the first
partition with data returns at least one whole batch so a consumer can always make
progress past a batch larger than its limits.

Consumers read up to the high watermark (read_committed: the last stable offset,
which equals the HW while transactions are unsupported); a follower (replica_id >= 0)
reads up to the LEO and reports its fetch offset as its LEO (next wave: ISR).

Fetch sessions (KIP-227) are not kept: every response carries session id 0, which
tells clients to send full fetch requests, as a Kafka broker with no session cache
slots does.
"""

from __future__ import annotations

import logging

import trio

from logbroker import _core
from logbroker.errors import error_code_for
from logbroker.handlers import leader_partition
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 12

Response = RESPONSES[API_KEY]
log = logging.getLogger("logbroker.fetch")


class _Slot:
    """One requested partition: where to read and what was found."""

    __slots__ = ("topic", "index", "part", "fetch_offset", "max_bytes", "error", "region", "hw", "lso", "log_start", "message")

    def __init__(self, topic: str, index: int, fetch_offset: int, max_bytes: int) -> None:
        self.topic = topic
        self.index = index
        self.part = None
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.error = ErrorCode.NONE
        self.region = None
        self.hw = -1
        self.lso = -1
        self.log_start = -1
        self.message = None


def _check(ctx, slot: _Slot, current_leader_epoch: int) -> None:
    slot.error, slot.part = leader_partition(ctx, slot.topic, slot.index, current_leader_epoch)


def _read_all(slots: list[_Slot], response_max: int, follower: bool) -> int:
    """Runs on a worker thread: fill slot.region for every readable slot; returns bytes."""
    total = 0
    for slot in slots:
        part = slot.part
        if part is None:
            continue
        if part.deleted:
            slot.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        lg = part.log
        slot.hw = lg.high_watermark
        slot.lso = slot.hw
        slot.log_start = lg.log_start_offset
        slot.region = None
        upper = lg.log_end_offset if follower else slot.hw
        budget = min(slot.max_bytes, response_max - total)
        if slot.fetch_offset < slot.log_start or slot.fetch_offset > lg.log_end_offset:
            slot.error = ErrorCode.OFFSET_OUT_OF_RANGE
            slot.message = (
                f"fetch offset {slot.fetch_offset} of {slot.topic}-{slot.index} is outside "
                f"[log start {slot.log_start}, LEO {lg.log_end_offset}]"
            )
            continue
        if slot.fetch_offset >= upper or (budget <= 0 and total > 0):
            continue
        try:
            region = lg.read(slot.fetch_offset, max(budget, 0), upper, total == 0)
        except (_core.LogBrokerError, OSError) as e:
            slot.error = error_code_for(e)
            slot.message = str(e)
            continue
        slot.error = ErrorCode.NONE
        if region is not None and len(region):
            slot.region = region
            total += len(region)
    return total


async def handle(ctx, request):
    version = ctx.version
    follower = request.replica_id >= 0
    if request.session_id != 0:
        return Response(throttle_time_ms=0, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    slots: list[_Slot] = []
    order: list[tuple[str, list[_Slot]]] = []
    for ft in request.topics:
        group = []
        order.append((ft.topic, group))
        for fp in ft.partitions:
            slot = _Slot(ft.topic, fp.partition, fp.fetch_offset, fp.partition_max_bytes)
            _check(ctx, slot, fp.current_leader_epoch if version >= 9 else -1)
            if follower and slot.part is not None:
                slot.part.follower_leos[request.replica_id] = fp.fetch_offset
                slot.part.maybe_increment_hw()
            slots.append(slot)
            group.append(slot)
    readable = [s for s in slots if s.part is not None]
    response_max = request.max_bytes if version >= 3 else 2**31 - 1
    deadline = trio.current_time() + max(request.max_wait_ms, 0) / 1000
    min_bytes = request.min_bytes
    while True:
        event = trio.Event()
        for s in readable:
            s.part.add_waiter(event)
        try:
            total = await trio.to_thread.run_sync(_read_all, readable, response_max, follower)
            errors = any(s.error != ErrorCode.NONE for s in slots)
            if total >= min_bytes or errors or not readable or trio.current_time() >= deadline:
                break
            with trio.move_on_at(deadline):
                await event.wait()
        finally:
            for s in readable:
                s.part.remove_waiter(event)
    for s in slots:
        if s.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            log.info("fetch from %s: %s", ctx.peer, s.message)
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        session_id=0,
        responses=[
            Response.FetchableTopicResponse(
                topic=name,
                partitions=[
                    Response.PartitionData(
                        partition_index=s.index,
                        error_code=s.error,
                        high_watermark=s.hw,
                        last_stable_offset=s.lso,
                        log_start_offset=s.log_start,
                        aborted_transactions=None if s.error else [],
                        preferred_read_replica=-1,
                        records=s.region if s.region is not None else b"",
                    )
                    for s in group
                ],
            )
            for name, group in order
        ],
    )
