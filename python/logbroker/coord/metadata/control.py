"""What every control manager shares (Kafka's `ControllerResult` and `ApiError`): a result
is the answer to the request plus the metadata records that make it so, and a refusal is a
`ControllerError` with a Kafka error code and a message naming the values involved.

A control manager (`*_control.py`, one per concept, Kafka's controller/*ControlManager) is
pure: it reads the current image and the request and returns a `ControllerResult`; it never
changes the image and does no I/O. The controller (controller.py) writes the records to the
metadata log, and every node's image changes only when it applies them
(metadata_records.py). A manager's cost is that of the change it makes, never that of the
whole image: it reads the parts the request names and emits a record per fact that changes.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import Generic, NamedTuple, TypeVar

from logbroker.coord.metadata.metadata import PartitionState
from logbroker.coord.metadata.metadata_records import encode_record
from logbroker.protocol import ErrorCode

T = TypeVar("T")


class ControllerError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclasses.dataclass
class ControllerResult(Generic[T]):
    """The answer to a request and the records to write for it (none: nothing changes). `log`
    holds what to log at `level` once the records are committed: (message, fields for
    log_format: topic, partition, peer, ...)."""

    records: list[bytes]
    response: T
    log: list[tuple[str, dict]] = dataclasses.field(default_factory=list)
    level: int = logging.INFO


class IsrChange(NamedTuple):
    """One partition of an AlterPartition request: the ISR its leader asks for, with the
    leader epoch and partition epoch of the state it asks from."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: list[int]


def partition_change_record(topic_id: uuid.UUID, ps: PartitionState) -> bytes:
    """The PartitionChange that makes partition `ps.partition` of the topic exactly `ps`
    (epochs carried explicitly)."""
    return encode_record(
        "PartitionChange",
        topic_id=topic_id.hex,
        partition=ps.partition,
        replicas=ps.replicas,
        isr=ps.isr,
        leader=ps.leader,
        leader_epoch=ps.leader_epoch,
        partition_epoch=ps.partition_epoch,
        adding_replicas=ps.adding_replicas,
        removing_replicas=ps.removing_replicas,
        elr=[r for r in ps.elr if r in ps.replicas and r not in ps.isr],
        last_known_elr=ps.last_known_elr,
    )
