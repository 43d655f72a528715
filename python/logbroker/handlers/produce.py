"""Produce (0): append record batches to partition leaders.

Per request: look up every partition, then one thread hop appends all of them (the
Rust log validates framing, CRC-32C, sizes and producer sequences, assigns offsets in
place and writes); then the HW moves and waiting fetches wake. acks=0 sends no
response; acks=1 answers after the leader append; acks=-1 (all) answers once the HW
covers the appended batch (immediately while the ISR is just the leader) or
REQUEST_TIMED_OUT after timeout_ms. Appends are all-or-nothing per partition: a bad
batch anywhere in a partition's records means nothing of them is written.

Versions: 3-11 (v3 is the first with record batch v2; v12+ only adds transactions v2,
v13 topic ids).
"""

from __future__ import annotations

import logging

import trio

from logbroker import _core
from logbroker.errors import error_code_for
from logbroker.clock import now_ms
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 11

Response = RESPONSES[API_KEY]
log = logging.getLogger("logbroker.produce")


def _partition_response(index: int, code: int, message: str | None = None, **fields) -> object:
    return Response.PartitionProduceResponse(
        index=index, error_code=code, base_offset=fields.get("base_offset", -1),
        log_append_time_ms=fields.get("log_append_time_ms", -1),
        log_start_offset=fields.get("log_start_offset", -1), record_errors=[], error_message=message,
    )


async def handle(ctx, request):
    acks = request.acks
    replicas = ctx.replicas
    min_isr_default = ctx.broker.config.get_int("min.insync.replicas")
    image = ctx.controller.image
    results: dict[tuple[str, int], object] = {}
    order: list[tuple[str, list[int]]] = []
    to_append = []  # (key, partition, records)
    for topic_data in request.topic_data:
        name = topic_data.name
        idxs = []
        order.append((name, idxs))
        for pdata in topic_data.partition_data:
            idx = pdata.index
            idxs.append(idx)
            key = (name, idx)
            part = replicas.get(name, idx)
            if acks not in (0, 1, -1):
                results[key] = _partition_response(idx, ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} is not 0, 1 or -1")
            elif request.transactional_id is not None:
                results[key] = _partition_response(
                    idx, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "transactions are not supported by this broker yet",
                )
            elif part is None:
                known = name in image.topics
                results[key] = _partition_response(
                    idx, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"partition {name}-{idx} does not exist" if known else f"topic {name!r} does not exist",
                )
            elif not part.is_leader:
                results[key] = _partition_response(
                    idx, ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {ctx.broker.node_id} is not the leader of {name}-{idx}"
                )
            elif pdata.records is None or len(pdata.records) == 0:
                results[key] = _partition_response(idx, ErrorCode.INVALID_RECORD, f"produce to {name}-{idx} carries no record batches")
            elif acks == -1 and len(part.isr) < int(image.topics[name].configs.get("min.insync.replicas", min_isr_default)):
                results[key] = _partition_response(
                    idx, ErrorCode.NOT_ENOUGH_REPLICAS, f"ISR of {name}-{idx} is {part.isr}, below min.insync.replicas"
                )
            else:
                to_append.append((key, part, pdata.records))

    if to_append:
        now = now_ms()

        def append_all() -> list:
            out = []
            for _key, part, records in to_append:
                try:
                    out.append(part.log.append_as_leader(records, part.leader_epoch, now))
                except (_core.LogBrokerError, OSError) as e:
                    out.append(e)
            return out

        outcomes = await trio.to_thread.run_sync(append_all)
        waits = []
        for (key, part, _records), outcome in zip(to_append, outcomes):
            if isinstance(outcome, BaseException):
                code = error_code_for(outcome)
                # A storage failure is the broker's fault; anything else is the client's input.
                level = logging.ERROR if code == ErrorCode.KAFKA_STORAGE_ERROR else logging.INFO
                log.log(level, "produce to %s-%d from %s rejected (%s): %s", key[0], key[1], ctx.peer, code.name, outcome)
                results[key] = _partition_response(key[1], code, str(outcome))
                continue
            part.maybe_increment_hw()
            results[key] = _partition_response(
                key[1], ErrorCode.NONE, None, base_offset=outcome.base_offset,
                log_append_time_ms=outcome.log_append_time, log_start_offset=outcome.log_start_offset,
            )
            if acks == -1:
                waits.append((key, part, outcome.last_offset + 1))
        if waits:
            deadline = trio.current_time() + max(request.timeout_ms, 0) / 1000
            for key, part, offset in waits:
                if not await part.wait_for_hw(offset, deadline):
                    results[key] = _partition_response(
                        key[1], ErrorCode.REQUEST_TIMED_OUT,
                        f"HW of {key[0]}-{key[1]} did not reach {offset} within {request.timeout_ms} ms",
                    )

    if acks == 0:
        return None
    return Response(
        responses=[
            Response.TopicProduceResponse(name=name, partition_responses=[results[(name, i)] for i in idxs])
            for name, idxs in order
        ],
        throttle_time_ms=0,
    )
