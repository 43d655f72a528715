"""Throughput per topic for the console's charts, sampled on the server: every
`SAMPLE_INTERVAL_S` the sum of each topic's log end offsets (records) and of its leaders'
replica sizes (bytes), read through the Kafka API (ListOffsets, DescribeLogDirs); a rate is the
difference between two samples over the time between them. The last `WINDOW_S` of samples
are kept in a ring. A topic some of whose partitions did not answer (no leader, a broker just
killed) has no total in that sample, so no rate is drawn for it rather than a false drop;
bytes falling (retention deleted a segment) count as 0 bytes/s.
"""

from __future__ import annotations

import collections
import time
from typing import Any

from logbroker.admin_views import hosting_brokers, leaders_of, log_offsets, replica_sizes
from logbroker.client import Admin

SAMPLE_INTERVAL_S = 2.0
WINDOW_S = 300.0

Totals = dict[str, tuple[int, int]]  # topic -> (records, bytes)


def sample(admin: Admin, timeout: float) -> Totals:
    """Each non-internal topic's (sum of log end offsets, sum of leader replica bytes)."""
    found = {n: d for n, d in admin.describe_topics(None, timeout=timeout).items() if not d.internal}
    leaders = leaders_of(found)
    ends = log_offsets(admin, leaders, "latest", timeout)
    sizes = replica_sizes(admin, hosting_brokers(admin, found, timeout), timeout) if leaders else {}
    out: Totals = {}
    for name, d in found.items():
        records = bytes_ = 0
        for p in d.partitions:
            end = ends.get((name, p.partition))
            size = sizes.get((name, p.partition), {}).get(p.leader)
            if end is None or size is None:
                break
            records += end
            bytes_ += size
        else:
            out[name] = (records, bytes_)
    return out


class Throughput:
    """The ring of samples; `add` from the sampler, `rates` for /api/throughput."""

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S, window_s: float = WINDOW_S) -> None:
        self.interval_s = interval_s
        self.window_s = window_s
        self.samples: collections.deque[tuple[float, Totals]] = collections.deque(maxlen=int(window_s / interval_s) + 1)
        self.last_error: str | None = None

    def add(self, totals: Totals, at: float | None = None) -> None:
        self.samples.append((time.time() if at is None else at, totals))

    def rates(self, visible: set[str] | None = None) -> dict[str, Any]:
        """The rates between samples and the latest totals; `visible`: only these topics (a
        logged-in user's, those they may describe)."""
        points = []
        topics: set[str] = set()
        pairs = list(self.samples)
        for (t0, a), (t1, b) in zip(pairs, pairs[1:]):
            dt = t1 - t0
            if dt <= 0:
                continue
            records, bytes_ = {}, {}
            for name in a.keys() & b.keys():
                if visible is not None and name not in visible:
                    continue
                records[name] = round(max(0, b[name][0] - a[name][0]) / dt, 3)
                bytes_[name] = round(max(0, b[name][1] - a[name][1]) / dt, 3)
            topics |= records.keys()
            points.append({"time": int(t1 * 1000), "records_per_s": records, "bytes_per_s": bytes_})
        latest = pairs[-1][1] if pairs else {}
        return {
            "interval_s": self.interval_s,
            "window_s": self.window_s,
            "topics": sorted(topics),
            "totals": {
                n: {"records": r, "bytes": s} for n, (r, s) in sorted(latest.items()) if visible is None or n in visible
            },
            "samples": points,
            "error": self.last_error,
        }
