"""The short form of the transactional fault run (transaction_faults.py): two transactional
producers committing and aborting across three partitions while the brokers coordinating
them and partition leaders are killed with -9; read_committed reads must never show an
aborted or partial transaction, and every committed one must be whole in the final read."""

from __future__ import annotations

from transaction_faults import run


def test_transactions_under_kill_9_have_no_anomalies(tmp_path):
    r = run(tmp_path, duration=20, seed=7)
    c = r.counts
    assert r.ok, {k: v[:5] for k, v in r.anomalies.items() if v}
    assert c["faults"] >= 3 and c["committed"] >= 20 and c["aborted"] >= 5, c
    assert c["final_records"] > 0 and c["polled"] > 0, c
