"""Job-queue throughput (issue 48): records per second through a share group with 1, 4 and 16
members over one partition holding N records on K distinct keys, each record "processed" for
a fixed time (a sleep: the work of a job, which is what parallelism buys), against

- a plain share group (share.delivery.order=offset, Kafka's): any member takes any record;
- a key-ordered share group (share.delivery.order=key): a key's records one at a time, in
  order; members work on different keys in parallel;
- a consumer group (the classic protocol): one partition, so one member works, whatever the
  group's size.

Members are logbroker's ShareConsumer / Consumer in threads of this process (explicit
acknowledgements, commit per poll). The figure is records
acknowledged per second from the first poll to the last acknowledgement. The broker is a node
of its own (`logbroker.Cluster(1)`, a subprocess), so its Python does not share the members'
interpreter.

Run: python -m benches.bench_share_queues [--records 4000] [--keys 1000] [--work-ms 2]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time

from logbroker import Admin, Cluster, Consumer, NewTopic, Producer, ShareConsumer

CONFIG = {
    "group.share.enable": "true",
    "group.share.auto.offset.reset": "earliest",
    "group.share.record.lock.duration.ms": "30000",
    "group.initial.rebalance.delay.ms": "0",
}


def run(bs: str, topic: str, group: str, members: int, n: int, work_s: float, share: bool) -> float:
    """Records per second from the first record received to the n-th acknowledged, with
    `members` share consumers (`share`) or consumer-group members."""
    done = threading.Event()
    count = [0]
    lock = threading.Lock()
    first = [0.0]

    def consumer():
        if share:
            return ShareConsumer(bs, group, share_acknowledgement_mode="explicit", max_poll_records=20)
        return Consumer(bs, group_id=group, auto_offset_reset="earliest", max_poll_records=20)

    def member() -> None:
        with consumer() as c:
            c.subscribe([topic])
            while not done.is_set():
                recs = c.poll(0.1)
                if recs and not first[0]:
                    first[0] = time.monotonic()
                for r in recs:
                    time.sleep(work_s)  # the job's work
                    if share:
                        c.acknowledge(r, "accept")
                if recs:
                    c.commit_sync() if share else c.commit()
                    with lock:
                        count[0] += len(recs)
                        if count[0] >= n:
                            done.set()

    threads = [threading.Thread(target=member, daemon=True) for _ in range(members)]
    for t in threads:
        t.start()
    done.wait(600)
    elapsed = time.monotonic() - first[0]
    for t in threads:
        t.join(30)
    return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=4000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--work-ms", type=float, default=2.0)
    ap.add_argument("--members", default="1,4,16")
    args = ap.parse_args()
    sizes = [int(m) for m in args.members.split(",")]
    work = args.work_ms / 1000
    # the broker in a process of its own: the members' threads do not share its interpreter
    with tempfile.TemporaryDirectory() as d, Cluster(1, data_dir=d, config=CONFIG) as cluster:
        bs = cluster.bootstrap_servers
        rows = []
        for members in sizes:
            row = [members]
            for mode in ("offset", "key", "group"):
                topic = f"jobs-{mode}-{members}"
                with Admin(bs) as a:
                    a.create_topics([NewTopic(topic, 1)])
                    if mode == "key":
                        a.alter_configs({("group", f"g-{topic}"): {"share.delivery.order": "key"}})
                with Producer(bs, linger_ms=5) as p:
                    for i in range(args.records):
                        p.send(topic, b"x" * 100, key=f"k{i % args.keys}".encode())
                    p.flush(60)
                row.append(run(bs, topic, f"g-{topic}", members, args.records, work, share=mode != "group"))
            rows.append(row)
            print(
                f"{members:>3} members: "
                + ", ".join(
                    f"{m} {v:,.0f}/s" for m, v in zip(("share", "key-ordered share", "consumer group"), row[1:])
                ),
                flush=True,
            )
        print()
        print(f"{args.records} records over {args.keys} keys on one partition, {args.work_ms} ms of work each")
        print("| members | share group | key-ordered share group | consumer group |")
        print("|---:|---:|---:|---:|")
        for members, share, keyed, group in rows:
            print(f"| {members} | {share:,.0f} | {keyed:,.0f} | {group:,.0f} |")


if __name__ == "__main__":
    main()
