"""Eligible leader replicas (KIP-966 part 1, Kafka 4.1's default for new clusters): replicas
that left the ISR but hold every record below the high watermark, so the controller may
elect one when the ISR is empty, where before the partition stayed offline until its last
ISR member came back.

Why they hold those records: brokers apply the strict min ISR rule (rust/src/server/
partition.rs, `maybe_increment_hw`): the HW does not move while the ISR is smaller than the
partition's effective min ISR, min(`min.insync.replicas`, its replication factor). A
replica that leaves the ISR while the ISR drops below that has every record the HW covers,
and no record above the HW was acknowledged to an acks=all producer.

On while the feature `eligible.leader.replicas.version` is finalized at 1 (the level a new
cluster starts with; `kafka-features upgrade --feature eligible.leader.replicas.version=1`
for an older one); at 0 the rules below are off and ELRs stay empty. Kafka's rules
(its PartitionChangeBuilder), applied wherever an ISR changes:

- An ISR of at least the effective min ISR: the ELR is empty.
- An ISR below it: ELR = (ELR + old ISR) - new ISR - replicas with an unclean shutdown.
- A fenced broker leaves every ISR, the last member too: an ISR may be empty (leader -1).
- Election: a live ISR member; with the ISR empty, a live ELR member, which becomes the
  ISR alone and leaves the ELR; with both empty, the last known leader when it is live (as
  before ELR: the last ISR member leads again when it returns).
- The last known ELR holds that last known leader: set to [old leader] when the ISR first
  becomes empty, cleared once the partition has a leader again.
- A new process of a registered broker leaves every ELR (metadata_records.py,
  `_leave_elrs`): it may have lost records it had not flushed.
- A change of `min.insync.replicas` (the topic's, or the cluster default) empties the ELR
  and last known ELR of the partitions it applies to (config_control.py).

Pure: reads partition states and returns new lists.
"""

from __future__ import annotations

from logbroker.coord.metadata.metadata import MetadataImage, PartitionState, TopicState

FEATURE = "eligible.leader.replicas.version"
MIN_ISR = "min.insync.replicas"


def enabled(image: MetadataImage) -> bool:
    return image.features.get(FEATURE, 0) >= 1


def effective_min_isr(topic: TopicState, ps: PartitionState, default_min_isr: int) -> int:
    """min(the topic's min.insync.replicas, else the cluster's, and its replication factor)."""
    configured = topic.configs.get(MIN_ISR)
    value = int(configured) if configured is not None else default_min_isr
    return max(1, min(value, len(ps.target_replicas)))


def target_elr(old: PartitionState, new_isr: list[int], min_isr: int, unclean_shutdown: frozenset[int]) -> list[int]:
    """The ELR once `old`'s ISR becomes `new_isr`."""
    if len(new_isr) >= min_isr:
        return []
    out: list[int] = []
    for r in [*old.elr, *old.isr]:
        if r not in out and r not in new_isr and r not in unclean_shutdown and r in old.replicas:
            out.append(r)
    return out


def last_known_elr(old: PartitionState, new_leader: int, new_isr: list[int]) -> list[int]:
    """The last known ELR once `old` has `new_leader` and `new_isr`: the old leader when the
    ISR first becomes empty, nothing once there is a leader again, else unchanged."""
    if not new_isr and new_leader < 0:
        if old.isr and old.leader >= 0:
            return [old.leader]
        return list(old.last_known_elr)
    return [] if new_leader >= 0 else list(old.last_known_elr)


def elect(old: PartitionState, isr: list[int], elr: list[int], live: set[int]) -> tuple[int, list[int], list[int]]:
    """A leader for a partition with no live ISR member among `isr`: a live ELR member when
    the ISR is empty, else the live last known leader. Returns (leader or -1, ISR, ELR)."""
    if not isr:
        chosen = next((r for r in old.replicas if r in elr and r in live), -1)
        if chosen >= 0:
            return chosen, [chosen], [r for r in elr if r != chosen]
        if not elr and len(old.last_known_elr) == 1 and old.last_known_elr[0] in live:
            chosen = old.last_known_elr[0]
            return chosen, [chosen], []
    return -1, isr, elr
