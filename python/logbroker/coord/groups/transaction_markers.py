"""Writing transaction markers on the partitions this broker leads (WriteTxnMarkers).

The transaction coordinator ends a transaction by writing a COMMIT or ABORT control batch
to every partition the transaction touched, on each partition's leader: through the
WriteTxnMarkers API when the leader is another broker, by calling `write_markers` here
when it is this one (the API's handler calls the same function).

Per partition: the leader appends the marker (`Log.append_end_txn_marker`: the producer's
open transaction there ends, an ABORT enters the aborted-transaction index, the last stable
offset moves) and answers once the HW covers it, as an acks=all write (Kafka appends
markers with required acks -1), so a marker the coordinator counts as written survives a
leader failover. On `__consumer_offsets` the group coordinator then makes the
transaction's offset commits visible (COMMIT) or drops them (ABORT).

Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (the coordinator
retries at the new leader), INVALID_PRODUCER_EPOCH (an older producer epoch than the log's),
TRANSACTION_COORDINATOR_FENCED (a coordinator epoch older than the last marker's: this
coordinator is stale), KAFKA_STORAGE_ERROR, REQUEST_TIMED_OUT (the HW did not cover the
marker in time; a retry writes a second marker, which closes nothing and is harmless).
"""

from __future__ import annotations

import logging

import trio

from logbroker import _core
from logbroker.clock import now_ms
from logbroker.common.errors import error_code_for
from logbroker.coord.groups.offsets_topic import OFFSETS_TOPIC
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.transactions")

MARKER_HW_TIMEOUT_S = 30.0


async def write_markers(
    replicas,
    groups,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    partitions: list[tuple[str, int]],
    transaction_version: int = 0,
) -> dict[tuple[str, int], int]:
    """Append the marker to each of `partitions` this broker leads; error code per partition.
    `transaction_version` is the transaction's (2 under transactions v2, whose markers carry
    the bumped epoch; Log.append_end_txn_marker refuses a stale one)."""
    results: dict[tuple[str, int], int] = {}
    kind = "COMMIT" if commit else "ABORT"
    for topic, index in partitions:
        part = replicas.get(topic, index)
        if part is None:
            results[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if not part.is_leader:
            results[(topic, index)] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            continue
        try:
            appended = await trio.to_thread.run_sync(
                part.log.append_end_txn_marker,
                producer_id,
                producer_epoch,
                commit,
                coordinator_epoch,
                part.leader_epoch,
                now_ms(),
                transaction_version,
            )
        except (_core.LogBrokerError, OSError) as e:
            code = error_code_for(e)
            level = logging.ERROR if code == ErrorCode.KAFKA_STORAGE_ERROR else logging.INFO
            log.log(
                level,
                "%s marker of producer %d (epoch %d, coordinator epoch %d) on %s-%d refused: %s",
                kind,
                producer_id,
                producer_epoch,
                coordinator_epoch,
                topic,
                index,
                e,
                extra=fields(producer_id=producer_id, topic=topic, partition=index),
            )
            results[(topic, index)] = code
            continue
        part.maybe_increment_hw()
        if not await part.wait_for_hw(appended.last_offset + 1, trio.current_time() + MARKER_HW_TIMEOUT_S):
            results[(topic, index)] = ErrorCode.REQUEST_TIMED_OUT
            log.warning(
                "%s marker of producer %d at %s-%d offset %d: HW %d did not cover it within %.0f s",
                kind,
                producer_id,
                topic,
                index,
                appended.last_offset,
                part.log.high_watermark,
                MARKER_HW_TIMEOUT_S,
                extra=fields(producer_id=producer_id, topic=topic, partition=index, offset=appended.last_offset),
            )
            continue
        if topic == OFFSETS_TOPIC and groups is not None:
            groups.complete_txn_offsets(index, producer_id, commit)
        results[(topic, index)] = ErrorCode.NONE
    return results
