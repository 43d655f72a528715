"""The fault suite's checker (jepsen_checker.py) on hand-made histories: a clean history has
no anomaly, and each anomaly class is found when a history has one (so a fault run that
reports zero anomalies could have reported some)."""

from __future__ import annotations

from jepsen_checker import CLASSES, History, Poll, Send, check, summary


def clean() -> History:
    h = History()
    for i in range(6):
        h.sends.append(Send(producer=1, seq=i, partition=0, value=b"a%d" % i, ok=True, offset=i))
    h.sends.append(Send(producer=2, seq=0, partition=0, value=b"b0", ok=None))  # unknown: in the log
    h.sends.append(Send(producer=2, seq=1, partition=0, value=b"b1", ok=False))  # failed: not in the log
    h.final[0] = [(i, b"a%d" % i) for i in range(6)] + [(6, b"b0")]
    h.polls = [Poll("c1", 0, 0, o, v) for o, v in h.final[0]]
    # a second assignment re-reads from offset 3 (a rebalance): a new segment, not an anomaly
    h.polls += [Poll("c1", 1, 0, o, v) for o, v in h.final[0][3:]]
    return h


def only(anomalies: dict[str, list]) -> dict[str, int]:
    return {k: len(v) for k, v in anomalies.items() if v}


def test_a_clean_history_has_no_anomalies():
    h = clean()
    assert only(check(h)) == {}
    s = summary(h, check(h))
    assert (s["acknowledged"], s["failed"], s["unknown"], s["final_records"]) == (6, 1, 1, 7)
    assert set(CLASSES) <= set(s)


def test_lost_write():
    h = clean()
    h.final[0] = [r for r in h.final[0] if r[1] != b"a4"]
    h.polls = [q for q in h.polls if q.value != b"a4"]
    found = check(h)
    assert [s.value for s in found["lost-write"]] == [b"a4"]


def test_duplicate_in_the_log_and_in_polls():
    h = clean()
    h.final[0].append((7, b"a2"))
    assert [d[1] for d in check(h)["duplicate"]] == [b"a2"]
    h = clean()
    h.polls.append(Poll("c2", 0, 0, 9, b"a1"))  # polled at 9 though the log has it at 1
    found = check(h)
    assert any(d[1] == b"a1" for d in found["duplicate"])


def test_inconsistent_offsets():
    h = clean()
    h.polls.append(Poll("c2", 0, 0, 2, b"zz"))  # another value at offset 2
    h.sends.append(Send(3, 0, 0, b"zz", True, 2))
    found = check(h)
    assert ((0, 2), [b"a2", b"zz"]) in found["inconsistent-offsets"]
    h = clean()
    h.sends[3] = Send(1, 3, 0, b"a3", True, 30)  # acknowledged at 30, stored at 3
    found = check(h)
    assert any(x[0] == "acked at" and x[2] == 30 for x in found["inconsistent-offsets"])


def test_nonmonotonic_send():
    h = clean()
    h.sends[2], h.sends[3] = Send(1, 2, 0, b"a2", True, 3), Send(1, 3, 0, b"a3", True, 2)
    h.final[0][2], h.final[0][3] = (2, b"a3"), (3, b"a2")
    h.polls = [Poll("c1", 0, 0, o, v) for o, v in h.final[0]]
    found = check(h)
    assert len(found["nonmonotonic-send"]) == 1 and not found["lost-write"]


def test_nonmonotonic_poll_and_poll_skip():
    h = clean()
    h.polls = [Poll("c1", 0, 0, o, v) for o, v in h.final[0][:4]] + [Poll("c1", 0, 0, 1, b"a1")]
    assert len(check(h)["nonmonotonic-poll"]) == 1
    h = clean()
    h.polls = [Poll("c1", 0, 0, o, v) for o, v in h.final[0] if o != 3]
    found = check(h)
    assert [(s[3], s[4], s[5]) for s in found["poll-skip"]] == [(2, 4, [3])]
    assert not found["nonmonotonic-poll"]


def test_phantom():
    h = clean()
    h.final[0].append((7, b"never-sent"))
    assert len(check(h)["phantom"]) == 1


def txn_history():
    from jepsen_checker import Txn

    txns = [
        Txn(1, 0, ((0, b"t0a"), (1, b"t0b")), "committed"),
        Txn(1, 1, ((0, b"t1a"), (1, b"t1b")), "aborted"),
        Txn(1, 2, ((0, b"t2a"),), "unknown"),  # committed after all
        Txn(2, 0, ((1, b"u0a"),), "unknown"),  # aborted after all
    ]
    final = {0: [(0, b"t0a"), (3, b"t2a")], 1: [(0, b"t0b")]}
    polls = [Poll("rc", 0, 0, 0, b"t0a"), Poll("rc", 0, 1, 0, b"t0b"), Poll("rc", 0, 0, 3, b"t2a")]
    return txns, polls, final


def test_transaction_checks_find_each_class():
    from jepsen_checker import TXN_CLASSES, Txn, check_transactions, txn_summary

    txns, polls, final = txn_history()
    assert only(check_transactions(txns, polls, final)) == {}
    s = txn_summary(txns, polls, final, check_transactions(txns, polls, final))
    assert (s["transactions"], s["committed"], s["aborted"], s["unknown"], s["final_records"]) == (4, 1, 1, 2, 3)

    bad_final = {0: [(0, b"t0a"), (2, b"t1a"), (3, b"t2a"), (4, b"t2a")], 1: [(0, b"zz")]}
    bad_polls = polls + [Poll("rc", 0, 1, 5, b"u0a")]
    found = check_transactions(txns + [Txn(3, 0, ((0, b"gone"),), "committed")], bad_polls, bad_final)
    assert set(only(found)) == set(TXN_CLASSES), only(found)
    assert any(a[0] == "final" and a[1] == b"t1a" for a in found["aborted-read"])
    assert (1, 0, "committed", 1, 2) in found["torn-transaction"]  # t0b missing
    assert (3, 0, 1) in found["lost-commit"]
