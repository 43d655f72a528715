"""Archiving rate (`retention.archive`): one 64 MiB segment of 1 KiB records written to
Parquet by `ArchiveStore.archive_range` (Rust decodes the batches into Arrow buffers,
pyarrow encodes with zstd), against reading and decoding alone. Local
directory; MB/s are log bytes in.

Run: python -m pytest benches/bench_archive.py --benchmark-only
"""

from __future__ import annotations

import random
import shutil

import pytest
from batches import build_batch

from logbroker._core import Log, decode_columns
from logbroker.archive import ArchiveStore

SEGMENT = 64 * 1024 * 1024
RECORD = 1024


@pytest.fixture(scope="module")
def segment(tmp_path_factory):
    d = tmp_path_factory.mktemp("arch")
    log = Log.open(str(d / "t-0"), "t", 0, {"segment.bytes": str(SEGMENT * 2)}, None, 0)
    per_batch = 64
    rng = random.Random(7)
    # Half random bytes, half text: compresses about 2:1, like many JSON payloads.
    batches = [
        build_batch([rng.randbytes(RECORD // 2) + (b"field-%06d," % i) * (RECORD // 24) for i in range(per_batch)])
        for _ in range(16)
    ]
    n = 0
    while log.size_bytes < SEGMENT:
        log.append_as_leader(batches[n % len(batches)], 0, 1)
        n += 1
    log.update_high_watermark(log.log_end_offset)
    yield d, log
    log.close()


def test_archive_segment(benchmark, segment):
    d, log = segment
    store = ArchiveStore(str(d / "archive"))
    end = log.log_end_offset

    def run():
        shutil.rmtree(d / "archive", ignore_errors=True)
        store.archive_range(log, "AAAAAAAAAAAAAAAAAAAAAA", 0, end)

    benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info["MB_per_s"] = log.size_bytes / 1e6 / benchmark.stats.stats.median
    benchmark.extra_info["records_per_s"] = end / benchmark.stats.stats.median
    f = store.files("t", 0)[0]
    benchmark.extra_info["parquet_bytes_per_log_byte"] = f.size_bytes / log.size_bytes


def test_decode_only(benchmark, segment):
    """The part before pyarrow: the same bytes read from the log and decoded by Rust into
    Arrow buffers (CRC checks included), no Parquet encoding."""
    _, log = segment
    end = log.log_end_offset

    def run():
        position = 0
        while position < end:
            columns = decode_columns(log.read(position, 8 << 20, end, True).read(), position, end, True, [])
            position = columns["next_offset"]

    benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info["MB_per_s"] = log.size_bytes / 1e6 / benchmark.stats.stats.median
