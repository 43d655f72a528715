"""Leader election: which replica leads a partition. The replication control manager calls
these with copies of the partition states it may change (or, `elect_for_brokers`, gets new
states back) and writes the changes as records; they read nothing but the image.

Rules (Kafka's, as its KRaft controller applies them):
- A leader is a live (unfenced) member of the ISR. When the leader is fenced or leaves the
  ISR, the first live ISR member in replica order takes over (`elect_for_brokers`).
- A fenced broker leaves every ISR that has other members; the last member stays, so it
  can lead again when it returns without losing acknowledged records.
- With eligible leader replicas on (eligible_leaders.py) a fenced broker leaves every ISR,
  and a partition whose ISR is empty elects a live ELR member, else its live last known
  leader.
- With no live ISR member (nor ELR member) the partition is offline (leader -1), unless
  `unclean.leader.election.enable` is true for its topic: then the first live replica leads
  with an ISR of itself. Records that only the old ISR had are lost; the election is logged
  as unclean with the old ISR and the new leader's log is what the partition keeps.
- Preferred-leader election (`ElectLeaders` type 0, `auto.leader.rebalance.enable`) moves
  leadership to the partition's preferred replica (its first target replica) when that
  replica is live and in the ISR.
- Every leader change bumps the leader epoch, every change the partition epoch.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable

from logbroker.coord.metadata import eligible_leaders
from logbroker.coord.metadata.metadata import MetadataImage, PartitionState, TopicState
from logbroker.coord.metadata.metadata_records import NO_LEADER
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.controller")

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders election types


@dataclasses.dataclass(frozen=True)
class Election:
    topic: str
    partition: int
    old_leader: int
    new_leader: int
    unclean: bool = False
    old_isr: tuple[int, ...] = ()


def live_brokers(image: MetadataImage) -> set[int]:
    return {n for n, b in image.brokers.items() if not b.fenced}


def change(
    ps: PartitionState,
    leader: int,
    isr: list[int],
    elr: list[int] | None = None,
    last_known_elr: list[int] | None = None,
) -> None:
    """Set leader and ISR (and the ELR fields, when given); epochs move as Kafka's do
    (no-op when nothing changes)."""
    elr = ps.elr if elr is None else elr
    last_known_elr = ps.last_known_elr if last_known_elr is None else last_known_elr
    if (leader, isr, elr, last_known_elr) == (ps.leader, ps.isr, ps.elr, ps.last_known_elr):
        return
    if leader != ps.leader:
        ps.leader_epoch += 1
    ps.partition_epoch += 1
    ps.leader, ps.isr, ps.elr, ps.last_known_elr = leader, list(isr), list(elr), list(last_known_elr)


def elect_for_brokers(
    image: MetadataImage,
    gone: set[int],
    unclean_allowed: Callable[[TopicState], bool],
    returning: frozenset[int] = frozenset(),
    among: Iterable[tuple[TopicState, PartitionState]] | None = None,
    min_isr: Callable[[TopicState, PartitionState], int] | None = None,
) -> list[tuple[TopicState, PartitionState, Election | None]]:
    """Move leaderships off `gone` (brokers being fenced) and onto live ISR members where a
    partition has no live leader, or (where the topic allows it) onto any live replica; a
    fenced broker leaves every ISR it is not the last member of. `returning` brokers count
    as live (being unfenced). Only the partitions `among` (default: every one) are read.
    `min_isr` (the effective min ISR of a partition) turns on eligible leader replicas
    (eligible_leaders.py): a fenced broker then leaves every ISR, and a partition with an
    empty ISR elects from its ELR or its last known leader. Returns (topic, new state, the
    leader change or None) for every partition that changes; the image is not changed."""
    live = (live_brokers(image) | returning) - gone
    out = []
    if among is None:
        among = ((t, ps) for t in image.topics.values() for ps in t.partitions.values())
    for t, ps in among:
        with_elr = min_isr is not None
        if with_elr:
            isr = [r for r in ps.isr if r not in gone]
            elr = eligible_leaders.target_elr(ps, isr, min_isr(t, ps), frozenset())
        else:
            isr = [r for r in ps.isr if r not in gone] or list(ps.isr)
            elr = []
        leader = ps.leader
        unclean = False
        if leader == NO_LEADER or leader not in live or leader not in isr:
            leader = next((r for r in ps.replicas if r in isr and r in live), NO_LEADER)
            if leader == NO_LEADER and with_elr:
                leader, isr, elr = eligible_leaders.elect(ps, isr, elr, live)
            if leader == NO_LEADER and unclean_allowed(t):
                leader = next((r for r in ps.replicas if r in live), NO_LEADER)
                if leader != NO_LEADER:
                    unclean = True
                    isr, elr = [leader], []
        lke = eligible_leaders.last_known_elr(ps, leader, isr) if with_elr and not unclean else []
        if (leader, isr, elr, lke) == (ps.leader, ps.isr, ps.elr, ps.last_known_elr):
            continue
        election = (
            Election(t.name, ps.partition, ps.leader, leader, unclean, tuple(ps.isr)) if leader != ps.leader else None
        )
        new = dataclasses.replace(ps)
        change(new, leader, isr, elr, lke)
        out.append((t, new, election))
    return out


def elect_preferred(image: MetadataImage, t: TopicState, ps: PartitionState) -> tuple[ErrorCode, str]:
    """Make the preferred replica the leader (ElectLeaders type 0)."""
    preferred = ps.preferred_leader
    name = f"{t.name}-{ps.partition}"
    if ps.leader == preferred:
        return ErrorCode.ELECTION_NOT_NEEDED, f"{name} is already led by its preferred replica {preferred}"
    if preferred not in live_brokers(image) or preferred not in ps.isr:
        return (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            f"preferred replica {preferred} of {name} is "
            + ("not in the ISR " + str(ps.isr) if preferred in live_brokers(image) else "fenced"),
        )
    change(ps, preferred, ps.isr)
    return ErrorCode.NONE, ""


def elect_unclean(image: MetadataImage, t: TopicState, ps: PartitionState) -> tuple[ErrorCode, str, bool]:
    """Give a leaderless partition a leader, outside the ISR if need be (ElectLeaders type 1).
    Returns (error, message, whether the new leader is outside the old ISR)."""
    name = f"{t.name}-{ps.partition}"
    live = live_brokers(image)
    if ps.leader != NO_LEADER and ps.leader in live:
        return ErrorCode.ELECTION_NOT_NEEDED, f"{name} has a leader ({ps.leader})", False
    clean = next((r for r in ps.replicas if r in ps.isr and r in live), NO_LEADER)
    if clean != NO_LEADER:
        change(ps, clean, ps.isr)
        return ErrorCode.NONE, "", False
    if not ps.isr:  # an eligible leader replica is a clean choice (eligible_leaders.py)
        leader, isr, elr = eligible_leaders.elect(ps, [], ps.elr, live)
        if leader != NO_LEADER:
            change(ps, leader, isr, elr, [])
            return ErrorCode.NONE, "", False
    leader = next((r for r in ps.replicas if r in live), NO_LEADER)
    if leader == NO_LEADER:
        return (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"no replica of {name} ({ps.replicas}) is alive", False)
    change(ps, leader, [leader], [], [])
    return ErrorCode.NONE, "", True


def imbalanced(image: MetadataImage) -> list[tuple[TopicState, PartitionState]]:
    """Partitions whose preferred replica is live and in the ISR but does not lead."""
    live = live_brokers(image)
    return [
        (t, ps)
        for t in image.topics.values()
        for ps in t.partitions.values()
        if ps.leader != ps.preferred_leader and ps.preferred_leader in live and ps.preferred_leader in ps.isr
    ]


def log_unclean(e: Election) -> None:
    log.warning(
        "UNCLEAN leader election for %s-%d: no live in-sync replica (ISR was %s); replica %d leads with an "
        "ISR of itself. Records acknowledged by the old ISR beyond replica %d's log end are lost.",
        e.topic,
        e.partition,
        list(e.old_isr),
        e.new_leader,
        e.new_leader,
        extra=fields(topic=e.topic, partition=e.partition, peer=e.new_leader),
    )


def summary(moved: list[Election], limit: int = 10) -> str:
    text = ", ".join(
        f"{e.topic}-{e.partition} {e.old_leader}->{e.new_leader}" + (" (unclean)" if e.unclean else "")
        for e in moved[:limit]
    )
    return text + (f" and {len(moved) - limit} more" if len(moved) > limit else "") if moved else "none"
