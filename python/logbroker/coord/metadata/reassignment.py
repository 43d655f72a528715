"""Partition reassignment (KIP-455): moving a partition's replicas to other brokers while it
stays online. The controller applies these to a copy of the image and commits the result.

A reassignment of a partition with replicas R to the target T:
1. start: replicas become T followed by the members of R not in T; `adding_replicas` is
   T - R, `removing_replicas` R - T. The ISR and the leader stay. The brokers of T open
   their replicas and fetch from the leader like any follower.
2. The leader adds each new replica to the ISR once it has caught up (AlterPartition).
3. complete, in the same commit as the ISR change that makes every target replica an ISR
   member: replicas = T, ISR = ISR restricted to T, no adding/removing; if the leader is
   not in T, the first live target replica leads (leader epoch bumped). The brokers left
   out delete their replicas when they see the new image.
A new reassignment of a partition already moving replaces the old target (computed from
the current replica list). Cancelling (target null) reverts to R: replicas and ISR lose
the adding replicas (in the merged order: the remaining targets first, as Kafka's revert
gives), and a leader among them hands over to the first live replica of R in the ISR. A target equal to the current replicas with nothing moving changes nothing.
"""

from __future__ import annotations

from logbroker.coord.metadata.elections import change, live_brokers
from logbroker.coord.metadata.metadata import MetadataImage, PartitionState
from logbroker.coord.metadata.metadata_records import NO_LEADER
from logbroker.protocol import ErrorCode


class ReassignmentError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def in_progress(ps: PartitionState) -> bool:
    return bool(ps.adding_replicas or ps.removing_replicas)


def completable(ps: PartitionState) -> bool:
    """A move whose target replicas are all in the ISR (`maybe_complete` finishes it)."""
    return in_progress(ps) and set(ps.target_replicas) <= set(ps.isr)


def check_target(
    image: MetadataImage, name: str, ps: PartitionState, target: list[int], allow_replication_factor_change: bool
) -> None:
    if not target or len(set(target)) != len(target) or any(r < 0 for r in target):
        raise ReassignmentError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"{name}: target replicas {target} must be distinct broker ids, and not empty",
        )
    unknown = [r for r in target if r not in image.brokers]
    if unknown:
        raise ReassignmentError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"{name}: target replicas {target} name broker(s) {unknown}, which are not registered",
        )
    current = ps.target_replicas
    if not allow_replication_factor_change and len(target) != len(current):
        raise ReassignmentError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"{name}: target replicas {target} change the replication factor {len(current)} "
            "and the request does not allow that (AllowReplicationFactorChange false)",
        )


def start(image: MetadataImage, ps: PartitionState, target: list[int]) -> None:
    """Begin moving `ps` to `target` (checked with `check_target`); completes at once when
    every target replica is already in the ISR."""
    current = list(ps.replicas)
    removing = [r for r in current if r not in target]
    adding = [r for r in target if r not in current]
    if not removing and not adding and not in_progress(ps):
        if target != current:  # same brokers, new order: the preferred leader changes
            ps.replicas = list(target)
            ps.partition_epoch += 1
        return
    ps.replicas = list(target) + removing
    ps.adding_replicas, ps.removing_replicas = adding, removing
    ps.partition_epoch += 1
    maybe_complete(image, ps)


def cancel(image: MetadataImage, name: str, ps: PartitionState) -> None:
    if not in_progress(ps):
        raise ReassignmentError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"{name} has no reassignment in progress")
    original = [r for r in ps.replicas if r not in ps.adding_replicas]
    isr = [r for r in ps.isr if r in original]
    if not isr:
        # every ISR member was being added: as Kafka does, the first remaining replica
        # becomes the ISR (an unclean choice; the caller logs it)
        isr = [original[0]]
    live = live_brokers(image)
    leader = ps.leader
    if leader not in original:
        leader = next((r for r in original if r in isr and r in live), NO_LEADER)
    ps.replicas, ps.adding_replicas, ps.removing_replicas = original, [], []
    ps.partition_epoch += 1
    change(ps, leader, isr)


def maybe_complete(image: MetadataImage, ps: PartitionState) -> bool:
    """Finish the reassignment of `ps` if every target replica is in the ISR."""
    if not completable(ps):
        return False
    target = ps.target_replicas
    isr = [r for r in ps.isr if r in target]
    leader = ps.leader
    if leader not in target:
        live = live_brokers(image)
        leader = next((r for r in target if r in live), NO_LEADER)
    ps.replicas, ps.adding_replicas, ps.removing_replicas = list(target), [], []
    ps.partition_epoch += 1
    change(ps, leader, isr)
    return True
