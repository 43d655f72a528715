"""The sticky partition assignment a classic group's leader computes for the
`cooperative-sticky` protocol (Kafka's CooperativeStickyAssignor, librdkafka's
cooperative-sticky): pure functions of the members' subscriptions, what each member says it
owns (with the generation it owned it in) and the partition count of each topic.

# Invariants of `sticky_assign`
- Complete and exclusive: every partition of a topic some member subscribes to is assigned
  to exactly one member subscribed to its topic; nothing else is assigned.
- Balanced: no partition can move to another member subscribed to its topic that holds two
  or more partitions fewer than its holder. Members with equal subscriptions therefore hold
  counts that differ by at most 1 (when all subscriptions are equal, the whole group's do).
- Sticky: a member keeps what it validly owned unless balance needs some of it elsewhere;
  a partition is taken from a member only while that member holds at least two more than
  a member that can take it. An owned assignment that is already balanced comes back as is.
- Valid ownership: a claim counts when the partition exists and the member still subscribes
  to its topic; two claims on one partition go to the higher generation, and equal
  generations both lose it (Kafka's rule for duplicated ownership).
- Deterministic: ties break on member id, topic and partition, so any leader computes the
  same plan from the same input.

# The cooperative step (`cooperative_assign`, KIP-429)
A partition that the sticky plan gives to a member other than one that claims it now is
withheld in this generation: its owner sees it missing from its assignment, revokes it and
rejoins, and the next generation hands it over. So no partition is assigned to one member
while another one still owns it, and a partition moves in two rebalances.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

TP = tuple[str, int]  # (topic, partition); client.group.TopicPartition is one


class Member(NamedTuple):
    topics: list[str]
    owned: list[TP]
    generation: int = -1  # the generation `owned` was assigned in; -1 unknown


def valid_owned(members: dict[str, Member], counts: dict[str, int]) -> dict[str, list[TP]]:
    """Each member's claims that count (see the module docstring), in its own order."""
    claims: dict[TP, list[tuple[int, str]]] = {}
    for m in sorted(members):
        s = members[m]
        subscribed = set(s.topics)
        for tp in dict.fromkeys(s.owned):
            if tp[0] in subscribed and 0 <= tp[1] < counts.get(tp[0], 0):
                claims.setdefault(tp, []).append((s.generation, m))
    winner: dict[TP, str] = {}
    for tp, cl in claims.items():
        top = max(g for g, _ in cl)
        best = [m for g, m in cl if g == top]
        if len(best) == 1:
            winner[tp] = best[0]
    return {m: [tp for tp in dict.fromkeys(members[m].owned) if winner.get(tp) == m] for m in members}


def sticky_assign(members: dict[str, Member], counts: dict[str, int]) -> dict[str, list[TP]]:
    """The sticky plan (invariants in the module docstring); each member's list sorted."""
    subs = {m: {t for t in s.topics if counts.get(t)} for m, s in members.items()}
    subscribers = {t: sorted(m for m in members if t in subs[m]) for t in counts}
    kept = valid_owned(members, counts)
    held: dict[str, dict[TP, None]] = {m: dict.fromkeys(kept[m]) for m in members}
    owner = {tp: m for m, tps in kept.items() for tp in tps}

    def least(candidates: list[str]) -> str:
        return min(candidates, key=lambda m: (len(held[m]), m))

    # Partitions nobody keeps go to the least loaded member that can take them, the most
    # constrained (fewest subscribers) first.
    free = [(t, p) for t in sorted(counts) if subscribers[t] for p in range(counts[t]) if (t, p) not in owner]
    free.sort(key=lambda tp: (len(subscribers[tp[0]]), tp))
    for tp in free:
        held[least(subscribers[tp[0]])][tp] = None

    # Then single moves from a member to one holding two or more fewer, until none is left.
    # Each move lowers the sum of squared counts, so this ends.
    while _move_one(members, kept, held, subscribers, least):
        pass
    return {m: sorted(held[m]) for m in members}


def _move_one(
    members: dict[str, Member],
    kept: dict[str, list[TP]],
    held: dict[str, dict[TP, None]],
    subscribers: dict[str, list[str]],
    least: Callable[[list[str]], str],
) -> bool:
    for m in sorted(members, key=lambda m: (-len(held[m]), m)):
        n = len(held[m])
        best: tuple[int, str, str] | None = None
        for t in sorted({tp[0] for tp in held[m]}):
            to = least(subscribers[t])
            if len(held[to]) < n - 1 and (best is None or len(held[to]) < best[0]):
                best = (len(held[to]), t, to)
        if best is None:
            continue
        _, topic, to = best
        ours = set(kept[m])
        movable = [tp for tp in held[m] if tp[0] == topic]
        # what the member did not own before moves first; then its latest claims
        fresh = [tp for tp in movable if tp not in ours]
        tp = fresh[-1] if fresh else max(movable, key=lambda x: kept[m].index(x))
        del held[m][tp]
        held[to][tp] = None
        return True
    return False


def cooperative_assign(members: dict[str, Member], counts: dict[str, int]) -> dict[str, list[TP]]:
    """`sticky_assign`, less the partitions changing owner in this generation: those
    assigned to a member that did not claim them while another member claims them and is
    not assigned them (claims as sent, valid or not, as Kafka's leader counts them)."""
    plan = sticky_assign(members, counts)
    claimed = {m: set(s.owned) for m, s in members.items()}
    revoked = {tp for m, s in members.items() for tp in claimed[m] - set(plan[m])}
    return {m: [tp for tp in tps if tp in claimed[m] or tp not in revoked] for m, tps in plan.items()}
