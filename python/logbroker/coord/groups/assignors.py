"""Server-side partition assignors for KIP-848 consumer groups.

An assignor maps members (with their subscribed topics) to partitions. Input:
    members: {member_id: set(topic names)}      (sorted iteration: deterministic)
    partitions: {topic: partition count}
    current: {member_id: set((topic, partition))} the previous target assignment
Output: {member_id: set((topic, partition))}, each subscribed partition to exactly one
member subscribed to its topic.

- "uniform" (the default, Kafka's UniformAssignor): balanced counts across members,
  sticky: a partition stays with its current owner unless that owner must give it up
  to bring counts within one of each other.
- "range" (Kafka's RangeAssignor, per topic): members subscribed to a topic, sorted by
  member id, get contiguous ranges of its partitions; the first (count % members)
  members get one extra.
"""

from __future__ import annotations

Assignment = dict[str, set[tuple[str, int]]]


def range_assign(members: dict[str, set[str]], partitions: dict[str, int], current: Assignment) -> Assignment:
    out: Assignment = {m: set() for m in members}
    for topic, count in sorted(partitions.items()):
        subs = sorted(m for m, topics in members.items() if topic in topics)
        if not subs:
            continue
        per, extra = divmod(count, len(subs))
        start = 0
        for i, m in enumerate(subs):
            n = per + (1 if i < extra else 0)
            out[m].update((topic, p) for p in range(start, start + n))
            start += n
    return out


def uniform_assign(members: dict[str, set[str]], partitions: dict[str, int], current: Assignment) -> Assignment:
    out: Assignment = {m: set() for m in members}
    all_parts = [
        (t, p) for t, n in sorted(partitions.items()) for p in range(n) if any(t in s for s in members.values())
    ]
    eligible = {tp: sorted(m for m, s in members.items() if tp[0] in s) for tp in all_parts}
    # keep current owners where still valid
    owner: dict[tuple[str, int], str] = {}
    for m, parts in sorted(current.items()):
        if m not in members:
            continue
        for tp in sorted(parts):
            if tp in eligible and m in eligible[tp] and tp not in owner:
                owner[tp] = m
                out[m].add(tp)
    unassigned = [tp for tp in all_parts if tp not in owner]
    # quota: balanced counts among members (exact for homogeneous subscriptions)
    total = len(all_parts)
    n_members = max(len(members), 1)
    quota_hi = -(-total // n_members)
    # take away from members above quota (highest partitions first, deterministic)
    for m in sorted(out):
        while len(out[m]) > quota_hi:
            tp = max(out[m])
            out[m].discard(tp)
            unassigned.append(tp)
    # give each unassigned partition to the eligible member with the fewest partitions
    for tp in sorted(unassigned):
        cands = eligible[tp]
        if not cands:
            continue
        m = min(cands, key=lambda c: (len(out[c]), c))
        out[m].add(tp)
    # balance: move partitions from members with 2+ more than an eligible peer
    moved = True
    while moved:
        moved = False
        for m in sorted(out, key=lambda c: (-len(out[c]), c)):
            for tp in sorted(out[m], reverse=True):
                target = min(eligible[tp], key=lambda c: (len(out[c]), c))
                if len(out[target]) + 1 < len(out[m]):
                    out[m].discard(tp)
                    out[target].add(tp)
                    moved = True
                    break
            if moved:
                break
    return out


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
DEFAULT_ASSIGNOR = "uniform"
