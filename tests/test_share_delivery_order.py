"""Key-ordered delivery, delayed delivery and release back-off in a share-partition
(broker/share_partition.py, issue 48), checked against a model over random histories: members
acquire, accept, release (with and without a delay), reject and let locks run out while the
clocks move; every acquisition is recorded and then checked:

- per-key order: a record is acquired only when every earlier record of its key is done
  (accepted, rejected or archived), with share.delivery.order=key;
- not-before: no record is acquired before its `logbroker.deliver.at` time;
- back-off: no released record is acquired again before its back-off has passed;
- at-least-once: once the members keep accepting, every record ends accepted (once: a record
  accepted is never acquired again) or archived, never beyond the delivery count limit.

The same histories with key order off must show out-of-order acquisitions (the checker can
fail), and the facts come from real batches through the Rust `share_record_facts`.
"""

from __future__ import annotations

import random

import pytest

from logbroker import _core
from logbroker.broker.share_partition import AcknowledgeType, RecordState, SharePartition
from logbroker.deliver_at import DELIVER_AT_HEADER

LIMIT = 4


def batch(base: int, records: list[tuple[bytes | None, bytes]], compression: str = "none") -> bytes:
    """One batch of (key, deliver-at header value or b"") records, its base offset `base`."""
    data = bytearray(
        _core.encode_batch(
            [(key, b"v", 0, [(DELIVER_AT_HEADER.encode(), nb)] if nb else []) for key, nb in records],
            compression=compression,
        )
    )
    data[0:8] = base.to_bytes(8, "big")  # the base offset (the CRC does not cover it)
    return bytes(data)


class History:
    def __init__(self, keys: dict[int, int | None], not_before: dict[int, int]) -> None:
        self.keys = keys
        self.not_before = not_before
        self.acquired: list[tuple[int, float, int]] = []  # (offset, trio time, wall ms)
        self.accepted: list[int] = []
        self.archived: set[int] = set()


def run_history(
    seed: int, key_order: bool, n: int = 300, dlq: bool = False
) -> tuple[SharePartition, History, list[str]]:
    rng = random.Random(seed)
    keys = {o: rng.choice([None, *range(8)]) for o in range(n)}
    not_before = {o: (rng.randrange(0, 20_000) if rng.random() < 0.2 else -1) for o in range(n)}
    sp = SharePartition("g", "t", 0, 0, lock_duration_s=5.0, delivery_count_limit=LIMIT, max_in_flight=64)
    sp.set_key_order(key_order)
    sp.dlq = dlq  # give-ups stay ARCHIVING until their dead letters are "written", later
    given_up: list[tuple[int, int, str]] = []
    archiving: list[int] = []
    sp.release_backoff_s, sp.release_backoff_max_s = 0.5, 4.0
    h = History(keys, not_before)
    now, wall = 0.0, 0
    held: dict[str, list[int]] = {m: [] for m in ("a", "b", "c")}
    backoff_until: dict[int, float] = {}
    errors: list[str] = []
    hw = 0
    for _step in range(4000):
        now += rng.uniform(0.0, 0.4)
        wall += rng.randrange(0, 400)
        hw = min(n, hw + rng.randrange(0, 6))
        member = rng.choice(list(held))
        action = rng.random()
        sp.expire_locks(now)
        if dlq:
            archiving += [o for o, _n, _r in sp.dead_letters]
            given_up += sp.dead_letters
            sp.dead_letters = []
            if archiving and rng.random() < 0.1:
                sp.archived(archiving)
                archiving = []
        held = {m: [o for o in offs if sp.records.get(o) and sp.records[o].member_id == m] for m, offs in held.items()}
        if action < 0.5:
            first = sp.first_available(now, wall)
            if first is None:
                first, bound = sp.end_offset, hw
            else:
                bound = sp.end_offset
            if first >= bound:
                continue
            offs = list(range(first, bound))
            facts = ([o for o in offs], [keys[o] for o in offs], [not_before[o] for o in offs])
            for lo, hi, _count in sp.acquire(member, first, bound, now, rng.randrange(1, 6), wall, facts):
                for o in range(lo, hi + 1):
                    h.acquired.append((o, now, wall))
                    errors += check_acquisition(sp, h, o, now, wall, key_order, backoff_until)
                    held[member].append(o)
        elif held[member]:
            o = rng.choice(held[member])
            kind = rng.choices(
                [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT], [0.7, 0.25, 0.05]
            )[0]
            delay = rng.choice([None, None, 0, 800]) if kind == AcknowledgeType.RELEASE else None
            count = sp.records[o].delivery_count
            sp.acknowledge(member, o, o, [int(kind)], now, delay, wall)
            held[member].remove(o)
            if kind == AcknowledgeType.ACCEPT:
                h.accepted.append(o)
            elif kind == AcknowledgeType.RELEASE and count < LIMIT:
                backoff_until[o] = wall + (delay if delay is not None else int(1000 * min(4.0, 0.5 * 2 ** (count - 1))))
    # drain: every member accepts whatever it gets until nothing is left in flight
    hw = n
    for _ in range(20000):
        now += 0.5
        wall += 1000
        sp.expire_locks(now)
        first = sp.first_available(now, wall)
        if first is None:
            first, bound = sp.end_offset, hw
        else:
            bound = sp.end_offset
        if first < bound:
            offs = list(range(first, bound))
            facts = (offs, [keys[o] for o in offs], [not_before[o] for o in offs])
            for lo, hi, _ in sp.acquire("d", first, bound, now, 50, wall, facts):
                for o in range(lo, hi + 1):
                    h.acquired.append((o, now, wall))
                    errors += check_acquisition(sp, h, o, now, wall, key_order, backoff_until)
                    sp.acknowledge("d", o, o, [int(AcknowledgeType.ACCEPT)], now)
                    h.accepted.append(o)
        if dlq:
            given_up += sp.dead_letters
            sp.archived([o for o, _n, _r in sp.dead_letters] + archiving)
            sp.dead_letters, archiving = [], []
        if sp.start_offset >= n and sp.end_offset >= n:
            break
    sp.dead_letters = given_up + sp.dead_letters
    return sp, h, errors


def check_acquisition(sp, h: History, o: int, now: float, wall: int, key_order: bool, backoff_until) -> list[str]:
    out = []
    if o in h.accepted:
        out.append(f"offset {o} acquired after it was accepted")
    nb = h.not_before[o]
    if nb >= 0 and wall < nb:
        out.append(f"offset {o} acquired at wall {wall} before its time {nb}")
    if backoff_until.get(o, 0) > wall:
        out.append(f"offset {o} acquired at wall {wall} during its back-off (until {backoff_until[o]})")
    if sp.records[o].delivery_count > LIMIT:
        out.append(f"offset {o} delivered {sp.records[o].delivery_count} times, limit {LIMIT}")
    key = h.keys[o]
    if key is not None:  # checked with key order off too: the overtakes it shows
        for earlier in range(sp.start_offset, o):
            rec = sp.records.get(earlier)
            if (
                rec is not None
                and h.keys.get(earlier) == key
                and rec.state
                not in (
                    RecordState.ACKNOWLEDGED,
                    RecordState.ARCHIVING,  # given up on: its dead letter is on its way
                    RecordState.ARCHIVED,
                )
            ):
                out.append(f"offset {o} (key {key}) acquired while offset {earlier} of its key is {rec.state.name}")
    return out


@pytest.mark.parametrize("dlq", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_key_order_not_before_backoff_and_at_least_once(seed, dlq):
    """With `dlq`, records given up on wait in ARCHIVING (holding the SPSO, not handed out)
    until their dead letters are written, at random later steps."""
    sp, h, errors = run_history(seed, key_order=True, dlq=dlq)
    assert not errors, errors[:10]
    assert sp.start_offset == 300 and not sp.records, (sp.start_offset, sp.end_offset)
    assert len(h.accepted) == len(set(h.accepted)), "a record accepted twice"
    # every record accepted once or given up on (rejected, or archived at the delivery limit)
    given_up = {o for o, _n, _r in sp.dead_letters}
    assert set(h.accepted) | given_up == set(range(300)) and not set(h.accepted) & given_up
    assert sp.keys == {}


def test_without_key_order_records_of_a_key_overtake_each_other():
    """The checker is not vacuous: with key order off (Kafka's behaviour) the same kind of
    history acquires records while earlier ones of their key are still in flight."""
    overtakes = 0
    for seed in range(8):
        _sp, _h, errors = run_history(seed, key_order=False)
        overtakes += sum("of its key" in e for e in errors)
        assert not [e for e in errors if "of its key" not in e], errors[:5]
    assert overtakes > 0


def test_facts_come_from_real_batches():
    """`share_record_facts` over batches as the log returns them: keys hashed (one hash per
    key, None for a null key), the deliver-at header read as ms, a malformed value ignored,
    compressed batches read, and a torn batch refused naming its position."""
    data = batch(10, [(b"a", b""), (None, b"1764547200000"), (b"a", b"soon")], "lz4") + batch(13, [(b"b", b"7")])
    offsets, keys, not_before = _core.share_record_facts(data, DELIVER_AT_HEADER)
    assert offsets == [10, 11, 12, 13]
    assert keys[0] == keys[2] and keys[1] is None and keys[3] not in (None, keys[0])
    assert not_before == [-1, 1764547200000, -1, 7]
    with pytest.raises(Exception, match="runs past"):
        _core.share_record_facts(data[:-2], DELIVER_AT_HEADER)
    # and a share-partition takes them: key 'a' at 12 waits for 10
    sp = SharePartition("g", "t", 0, 10, lock_duration_s=5.0, delivery_count_limit=LIMIT, max_in_flight=100)
    sp.set_key_order(True)
    got = sp.acquire("m", 10, 14, 0.0, 10, 2_000_000_000_000, (offsets, keys, not_before))
    assert got == [(10, 11, 1), (13, 13, 1)]
    sp.acknowledge("m", 10, 10, [int(AcknowledgeType.ACCEPT)], 0.0)
    assert sp.acquire("n", 12, 14, 0.0, 10, 2_000_000_000_000) == [(12, 12, 1)]


def test_a_record_waits_for_its_time_and_the_fetch_knows_when():
    sp = SharePartition("g", "t", 0, 0, lock_duration_s=5.0, delivery_count_limit=LIMIT, max_in_flight=100)
    facts = ([0, 1], [None, None], [10_000, -1])
    assert sp.acquire("m", 0, 2, 0.0, 10, 5_000, facts) == [(1, 1, 1)]
    assert sp.records[0].state == RecordState.AVAILABLE  # in flight, not before its time
    assert sp.next_ready_time(0.0, 5_000) == pytest.approx(5.0)
    assert sp.first_available(4.9, 9_900) is None
    assert sp.first_available(5.0, 10_000) == 0


def test_archiving_records_read_back_write_their_dead_letters_again():
    """KIP-1191's ARCHIVING state, persisted: a share-partition read back with records still
    ARCHIVING (their dead letters maybe never written) queues them again, with the reason the
    delivery count gives, and holds the SPSO until they are archived."""
    from logbroker.broker.share_partition import EXCEEDED, REJECTED
    from logbroker.coord.groups.share_state_log import StateBatch

    sp = SharePartition("g", "t", 0, 10, lock_duration_s=5.0, delivery_count_limit=LIMIT, max_in_flight=100)
    sp.restore(
        [StateBatch(10, 11, int(RecordState.ARCHIVING), 1), StateBatch(12, 12, int(RecordState.ARCHIVING), LIMIT)]
    )
    assert sp.dead_letters == [(10, 1, REJECTED), (11, 1, REJECTED), (12, LIMIT, EXCEEDED)]
    assert sp.start_offset == 10 and sp.first_available(0.0, 0) is None  # not handed out, SPSO held
    assert [b.delivery_state for b in sp.state_batches()] == [3, 3]  # written as ARCHIVING until done
    assert sp.archived([10, 11, 12]) == 3 and sp.start_offset == 13 and not sp.records
