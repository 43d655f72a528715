"""A checker for histories of a Kafka workload, after the anomaly classes of Jepsen's Kafka
workload (jepsen.tests.kafka): a history is what real clients saw (every send with its
outcome, every record every consumer polled, in order) plus a final read of every partition
once the faults have stopped; the checker reports, per class, the records involved.

    lost-write            an acknowledged send whose value is not in its partition's final log
    duplicate             a value at more than one offset of the final log (or of the polls)
    inconsistent-offsets  two values seen at one (partition, offset): by acks, polls or the final
                          read; or a value acknowledged at one offset and found at another
    nonmonotonic-send     one producer's acknowledged offsets in a partition not increasing in
                          the order it sent
    nonmonotonic-poll     a consumer's offsets in a partition not increasing within one
                          assignment (a segment: assignments and seeks start a new one)
    poll-skip             within a segment, consecutive polls jump over offsets the final log has
    phantom               a value read that no producer ever sent

Sends that fail or whose outcome is unknown (timeouts, the producer gone) are indeterminate:
they may be in the log or not, once; they are counted, not judged.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict


@dataclasses.dataclass(frozen=True)
class Send:
    producer: int
    seq: int  # order of sending, per producer
    partition: int
    value: bytes
    ok: bool | None  # True acknowledged, False failed, None unknown
    offset: int = -1


@dataclasses.dataclass(frozen=True)
class Poll:
    consumer: str
    segment: int  # a new assignment or seek starts a new segment
    partition: int
    offset: int
    value: bytes


@dataclasses.dataclass
class History:
    sends: list[Send] = dataclasses.field(default_factory=list)
    polls: list[Poll] = dataclasses.field(default_factory=list)
    final: dict[int, list[tuple[int, bytes]]] = dataclasses.field(default_factory=dict)


CLASSES = (
    "lost-write",
    "duplicate",
    "inconsistent-offsets",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "poll-skip",
    "phantom",
)


def check(h: History) -> dict[str, list]:
    """Anomalies by class (every class present, empty when none)."""
    out: dict[str, list] = {c: [] for c in CLASSES}
    sent_values = {s.value for s in h.sends}
    final_at: dict[int, dict[bytes, list[int]]] = {}
    final_offsets: dict[int, list[int]] = {}
    for p, records in h.final.items():
        where: dict[bytes, list[int]] = defaultdict(list)
        for o, v in records:
            where[v].append(o)
        final_at[p] = where
        final_offsets[p] = sorted(o for o, _ in records)
        out["duplicate"] += [(p, v, offs) for v, offs in where.items() if len(offs) > 1]
        out["phantom"] += [(p, o, v) for o, v in records if v not in sent_values]

    # lost writes, and acknowledged offsets against the final log
    for s in h.sends:
        if not s.ok:
            continue
        found = final_at.get(s.partition, {}).get(s.value)
        if not found:
            out["lost-write"].append(s)
        elif s.offset not in found:
            out["inconsistent-offsets"].append(("acked at", s.partition, s.offset, s.value, "found at", found))

    # one value per (partition, offset) across everything observed
    seen: dict[tuple[int, int], set[bytes]] = defaultdict(set)
    for s in h.sends:
        if s.ok:
            seen[(s.partition, s.offset)].add(s.value)
    for q in h.polls:
        seen[(q.partition, q.offset)].add(q.value)
    for p, records in h.final.items():
        for o, v in records:
            seen[(p, o)].add(v)
    out["inconsistent-offsets"] += [(k, sorted(vs)) for k, vs in sorted(seen.items()) if len(vs) > 1]

    # a value polled at two offsets is a duplicate even if the final log lost one of them
    polled_at: dict[tuple[int, bytes], set[int]] = defaultdict(set)
    for q in h.polls:
        polled_at[(q.partition, q.value)].add(q.offset)
    reported = {(p, v) for p, v, _ in out["duplicate"]}
    out["duplicate"] += [
        (p, v, sorted(offs)) for (p, v), offs in polled_at.items() if len(offs) > 1 and (p, v) not in reported
    ]
    out["phantom"] += [q for q in h.polls if q.value not in sent_values]

    # sends: per producer and partition, acknowledged offsets increase in send order
    by_producer: dict[tuple[int, int], list[Send]] = defaultdict(list)
    for s in h.sends:
        if s.ok:
            by_producer[(s.producer, s.partition)].append(s)
    for (producer, p), sends in by_producer.items():
        sends.sort(key=lambda s: s.seq)
        for a, b in zip(sends, sends[1:]):
            if b.offset <= a.offset:
                out["nonmonotonic-send"].append((producer, p, a, b))

    # polls: per consumer segment and partition
    segments: dict[tuple[str, int, int], list[Poll]] = defaultdict(list)
    for q in h.polls:
        segments[(q.consumer, q.segment, q.partition)].append(q)
    for (consumer, segment, p), polls in segments.items():
        offsets = final_offsets.get(p, [])
        for a, b in zip(polls, polls[1:]):
            if b.offset <= a.offset:
                out["nonmonotonic-poll"].append((consumer, segment, p, a.offset, b.offset))
            elif b.offset > a.offset + 1:
                missed = _between(offsets, a.offset, b.offset)
                if missed:
                    out["poll-skip"].append((consumer, segment, p, a.offset, b.offset, missed[:5]))
    return out


def _between(sorted_offsets: list[int], lo: int, hi: int) -> list[int]:
    """Offsets strictly between lo and hi."""
    import bisect

    i = bisect.bisect_right(sorted_offsets, lo)
    j = bisect.bisect_left(sorted_offsets, hi)
    return sorted_offsets[i:j]


def summary(h: History, anomalies: dict[str, list]) -> dict[str, int]:
    """Counts for a report: sends by outcome, polls, final records, anomalies per class."""
    return {
        "acknowledged": sum(1 for s in h.sends if s.ok),
        "failed": sum(1 for s in h.sends if s.ok is False),
        "unknown": sum(1 for s in h.sends if s.ok is None),
        "polled": len(h.polls),
        "final_records": sum(len(r) for r in h.final.values()),
        **{c: len(v) for c, v in anomalies.items()},
    }


# --- transactions ------------------------------------------------------------------------
#
# A transactional history: each transaction's values (partition, value) and its outcome as
# the producer saw it: "committed" (commit_transaction returned), "aborted" (abort_transaction
# returned), "unknown" (neither is known: an error or a timeout on the way). The reads are
# read_committed: polls during the run, and a final read of every partition once no
# transaction is open.
#
#   aborted-read      a read_committed read returned a value of an aborted transaction
#   torn-transaction  the final read holds some but not all values of a transaction
#   lost-commit       a committed transaction with none of its values in the final read
#   dirty-read        a read_committed poll returned a value the final read does not hold
#                     (a value of a transaction that was later aborted, or lost)
#   duplicate         a value at more than one offset of the final read
#   phantom           a value read that no transaction wrote

TXN_CLASSES = ("aborted-read", "torn-transaction", "lost-commit", "dirty-read", "duplicate", "phantom")


@dataclasses.dataclass(frozen=True)
class Txn:
    producer: int
    seq: int
    values: tuple[tuple[int, bytes], ...]
    outcome: str  # "committed", "aborted" or "unknown"


def check_transactions(
    txns: list[Txn], polls: list[Poll], final: dict[int, list[tuple[int, bytes]]]
) -> dict[str, list]:
    out: dict[str, list] = {c: [] for c in TXN_CLASSES}
    owner: dict[bytes, Txn] = {}
    for t in txns:
        for _p, v in t.values:
            owner[v] = t
    in_final: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for p, records in final.items():
        for o, v in records:
            in_final[v].append((p, o))
    for v, where in in_final.items():
        if len(where) > 1:
            out["duplicate"].append((v, where))
        t = owner.get(v)
        if t is None:
            out["phantom"].append((v, where))
        elif t.outcome == "aborted":
            out["aborted-read"].append(("final", v, where, t.seq))
    for q in polls:
        t = owner.get(q.value)
        if t is None:
            out["phantom"].append((q.partition, q.offset, q.value))
        elif t.outcome == "aborted":
            out["aborted-read"].append((q.consumer, q.partition, q.offset, q.value, t.seq))
        elif q.value not in in_final:
            out["dirty-read"].append((q.consumer, q.partition, q.offset, q.value, t.outcome))
    for t in txns:
        present = [v for _p, v in t.values if v in in_final]
        if present and len(present) < len(t.values):
            out["torn-transaction"].append((t.producer, t.seq, t.outcome, len(present), len(t.values)))
        if t.outcome == "committed" and not present:
            out["lost-commit"].append((t.producer, t.seq, len(t.values)))
    return out


def txn_summary(txns: list[Txn], polls: list[Poll], final: dict, anomalies: dict[str, list]) -> dict[str, int]:
    return {
        "transactions": len(txns),
        "committed": sum(t.outcome == "committed" for t in txns),
        "aborted": sum(t.outcome == "aborted" for t in txns),
        "unknown": sum(t.outcome == "unknown" for t in txns),
        "values": sum(len(t.values) for t in txns),
        "polled": len(polls),
        "final_records": sum(len(r) for r in final.values()),
        **{c: len(v) for c, v in anomalies.items()},
    }
