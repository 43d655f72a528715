"""Streams groups (KIP-1071) as they grow, on one in-process broker, over the wire with
StreamsGroupHeartbeat: N members (each its own process) join a group whose one subtopology
has 2N tasks, heartbeat until each runs its 2 tasks, then heartbeat once more each with
nothing changing. Reported per size: the mean time of a join (each join bumps the group epoch
and recomputes the target assignment: the sticky assignor over every task), of a heartbeat
while the group settles, and of a steady heartbeat (a member at its epoch reporting its tasks;
the coordinator still writes nothing, but compares the group's state with its records).

Run: python -m benches.bench_streams_groups [--members 10,100,400]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rawclient import RawClient  # noqa: E402
from test_bad_input import create_topic  # noqa: E402
from test_streams_groups import FAST, by_sub, hb, tasks, topology  # noqa: E402

from logbroker import Broker  # noqa: E402
from logbroker.protocol import REQUESTS  # noqa: E402


def one_size(n: int) -> tuple[float, int, float, float]:
    """(ms per join, rounds to settle, ms per settling heartbeat, ms per steady heartbeat)."""
    config = {**FAST, "group.streams.session.timeout.ms": "600000"}
    with (
        tempfile.TemporaryDirectory() as d,
        Broker(data_dir=d, config=config) as b,
        RawClient(b.bootstrap_servers) as c,
    ):
        assert create_topic(c, "words-in", 2 * n) == 0
        c.request(10, 4, REQUESTS[10](key_type=0, coordinator_keys=["app"]))
        state = {}
        t0 = time.perf_counter()
        for i in range(n):
            r = hb(c, f"m{i}", 0, topo=topology())
            state[f"m{i}"] = (r.member_epoch, tasks(r) or [])
        join = (time.perf_counter() - t0) / n
        rounds = beats = 0
        t0 = time.perf_counter()
        while not all(len(owned) == 2 for _, owned in state.values()):
            rounds += 1
            assert rounds < 50, "the group did not settle"
            for m, (epoch, owned) in list(state.items()):
                r = hb(c, m, epoch, active=by_sub(owned), standby=[], warmup=[])
                beats += 1
                state[m] = (r.member_epoch, tasks(r) if r.active_tasks is not None else owned)
        settle = (time.perf_counter() - t0) / max(beats, 1)
        t0 = time.perf_counter()
        for m, (epoch, owned) in state.items():
            hb(c, m, epoch, active=by_sub(owned), standby=[], warmup=[])
        steady = (time.perf_counter() - t0) / n
    return join * 1000, rounds, settle * 1000, steady * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", default="10,100,400")
    args = ap.parse_args()
    print("| members | tasks | join (ms) | rounds to settle | settling heartbeat (ms) | steady heartbeat (ms) |")
    print("|---|---|---|---|---|---|")
    for n in (int(x) for x in args.members.split(",")):
        join, rounds, settle, steady = one_size(n)
        print(f"| {n} | {2 * n} | {join:.2f} | {rounds} | {settle:.2f} | {steady:.2f} |", flush=True)


if __name__ == "__main__":
    main()
