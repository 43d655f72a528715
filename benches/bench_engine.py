"""Raw rates of the Rust log engine, without the network: append (MB/s, records/s)
and offset-index lookup (reads at random offsets)."""

from __future__ import annotations

import random

import pytest
from batches import build_batch

from logbroker._core import Log

CONFIG = {"segment.bytes": str(256 * 1024 * 1024)}


@pytest.mark.parametrize("record_size", [100, 1024])
def test_append_rate(benchmark, tmp_path, record_size):
    per_batch = max(1, 64 * 1024 // record_size)
    batch = build_batch([b"x" * record_size] * per_batch)
    log = Log.open(str(tmp_path / "t-0"), "t", 0, CONFIG, None, 0)
    rounds = 200

    def run():
        for _ in range(rounds):
            log.append_as_leader(batch, 0, 1)

    benchmark.pedantic(run, rounds=5, iterations=1)
    mb = len(batch) * rounds / 1e6
    benchmark.extra_info["MB_per_s"] = mb / benchmark.stats.stats.median
    benchmark.extra_info["records_per_s"] = per_batch * rounds / benchmark.stats.stats.median
    log.close()


def test_index_lookup_rate(benchmark, tmp_path):
    log = Log.open(str(tmp_path / "t-0"), "t", 0, CONFIG, None, 0)
    batch = build_batch([b"y" * 100] * 10)
    for _ in range(20000):
        log.append_as_leader(batch, 0, 1)
    log.update_high_watermark(log.log_end_offset)
    leo = log.log_end_offset
    rng = random.Random(1)
    offsets = [rng.randrange(leo) for _ in range(10000)]

    def run():
        for o in offsets:
            log.read(o, 1024, leo, True)

    benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info["lookups_per_s"] = len(offsets) / benchmark.stats.stats.median
    log.close()
