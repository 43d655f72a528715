"""Log compaction (cleanup.policy=compact) and the record API, through logbroker._core.

The Rust side has the model and crash tests (rust/tests/compaction.rs); these check the
Python contract: Log.compact, CompactionResult, Log.read_records, Log.append_records_as_leader.
"""

from __future__ import annotations

import os
import struct
import threading

import pytest

from logbroker import _core
from logbroker._core import CompactionResult, InvalidConfigError, InvalidRecordError, Log, OffsetOutOfRangeError

COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": "1500",
    "index.interval.bytes": "200",
    "segment.index.bytes": "4096",
    "delete.retention.ms": "1000",
}


@pytest.fixture
def log_dir(tmp_path):
    return str(tmp_path / "compacted-0")


@pytest.fixture
def log(log_dir):
    lg = Log.open(log_dir, "compacted", 0, dict(COMPACT), None, 0)
    yield lg
    if not lg.closed:
        lg.close()


def put(log: Log, key: bytes, value: bytes | None, now: int = 1_000, compression: str = "none") -> int:
    r = log.append_records_as_leader([(key, value)], 0, now, compression)
    log.update_high_watermark(log.log_end_offset)
    return r.base_offset


def latest(records: list[tuple[int, int, bytes | None, bytes | None]]) -> dict[bytes | None, tuple[int, bytes | None]]:
    return {k: (o, v) for o, _, k, v in records}


def test_many_updates_per_key_shrink_to_the_newest(log):
    model = {}
    for i in range(300):
        key = f"user-{i % 6}".encode()
        value = f"state {i} ".encode() * 3
        model[key] = (put(log, key, value, compression=("none", "gzip", "lz4", "zstd", "snappy")[i % 5]), value)
    size_before, segments_before = log.size_bytes, log.segment_count
    r = log.compact(2_000)
    assert isinstance(r, CompactionResult)
    assert r.segments_cleaned == segments_before - 1  # every inactive segment
    assert r.bytes_after < r.bytes_before
    assert r.records_removed > 200
    assert r.tombstones_removed == 0
    assert r.dirty_ratio == 1.0
    assert r.cleaned_up_to == log.segment_base_offsets[-1]
    assert "CompactionResult(" in repr(r)
    assert log.size_bytes < size_before // 4
    records = log.read_records(0)
    offsets = [o for o, *_ in records]
    assert offsets == sorted(set(offsets))
    assert latest(records) == model
    # A forced second pass merges the small cleaned segments.
    log.compact(2_000, force=True)
    assert log.segment_count < segments_before
    assert latest(log.read_records(0)) == model
    # Reopen (clean, then after a crash) reads the same.
    log.close()
    for recovery_point in (None, 0):
        again = Log.open(log.dir, "compacted", 0, dict(COMPACT), recovery_point, 0)
        assert latest(again.read_records(0)) == model
        assert again.recovery_report[2] == 0  # nothing truncated
        if recovery_point is None:
            again.close()


def test_tombstones_survive_delete_retention_then_go(log):
    put(log, b"a", b"1")
    put(log, b"b", b"1")
    tomb = put(log, b"a", None, now=1_500)
    for i in range(30):
        put(log, b"filler", b"x" * 50 + str(i).encode())
    r = log.compact(10_000, force=True)
    a = [rec for rec in log.read_records(0) if rec[2] == b"a"]
    assert a == [(tomb, 1_500, b"a", None)]  # the put is gone, the tombstone stays
    assert log.compact(10_999, force=True).tombstones_removed == 0
    r = log.compact(11_000)  # delete horizon = first pass + delete.retention.ms: due without new writes
    assert r.tombstones_removed == 1
    keys = {rec[2] for rec in log.read_records(0)}
    assert b"a" not in keys and b"b" in keys


def test_compacted_topic_refuses_keyless_records(log, log_dir):
    with pytest.raises(InvalidRecordError, match="key"):
        log.append_records_as_leader([(b"k", b"v"), (None, b"v")], 0, 0)
    assert log.log_end_offset == 0
    raw = _core.encode_batch([(None, b"v", 0, [])])
    with pytest.raises(InvalidRecordError, match="compacted-0"):
        log.append_as_leader(raw, 0, 0)
    log.update_config({"cleanup.policy": "delete"})
    assert log.append_as_leader(raw, 0, 0).base_offset == 0


def test_cleanup_policy_selects_retention_or_compaction(tmp_path):
    delete = Log.open(
        str(tmp_path / "d-0"), "d", 0, {**COMPACT, "cleanup.policy": "delete", "retention.bytes": "0"}, None, 0
    )
    for i in range(60):
        put(delete, b"k%d" % (i % 3), b"v" * 40)
    assert delete.compact(5_000, force=True).segments_cleaned == 0
    assert delete.enforce_retention(5_000) > 0
    delete.close()
    compact = Log.open(str(tmp_path / "c-0"), "c", 0, {**COMPACT, "retention.bytes": "0", "retention.ms": "0"}, None, 0)
    for i in range(60):
        put(compact, b"k%d" % (i % 3), b"v" * 40)
    assert compact.enforce_retention(10**9) == 0
    assert compact.compact(5_000).segments_cleaned > 0
    compact.close()
    with pytest.raises(InvalidConfigError, match="cleanup.policy"):
        Log.open(str(tmp_path / "x-0"), "x", 0, {"cleanup.policy": "archive"}, None, 0)
    with pytest.raises(InvalidConfigError, match="min.cleanable.dirty.ratio"):
        Log.open(str(tmp_path / "x-0"), "x", 0, {"min.cleanable.dirty.ratio": "2"}, None, 0)


def test_dirty_ratio_and_high_watermark_gate_the_pass(log_dir):
    log = Log.open(log_dir, "compacted", 0, {**COMPACT, "min.cleanable.dirty.ratio": "0.9"}, None, 0)
    for i in range(100):
        put(log, b"k%d" % (i % 4), b"v" * 40)
    log.update_high_watermark(0)
    assert log.compact(5_000, force=True).segments_cleaned == 0  # nothing below the HW
    log.update_high_watermark(log.log_end_offset)
    assert log.compact(5_000).segments_cleaned > 0
    for i in range(20):
        put(log, b"k%d" % (i % 4), b"v" * 40)
    r = log.compact(5_000)
    assert r.segments_cleaned == 0 and 0.0 < r.dirty_ratio < 0.9
    log.close()


def test_reads_in_compaction_gaps_return_the_next_batch(log):
    for i in range(60):
        put(log, b"k%d" % (i % 3), b"value %d " % i * 5)
    log.compact(5_000)
    present = [o for o, *_ in log.read_records(0)]
    gap = next(o for o in range(log.log_end_offset) if o not in present)
    region = log.read(gap, 1 << 20)
    assert region is not None
    base, _length, _epoch, magic = struct.unpack_from(">qiib", region.read())
    assert magic == 2 and base > gap
    after_gap = log.read_records(gap, max_records=1)
    assert after_gap[0][0] == min(o for o in present if o > gap)
    assert log.offset_for_timestamp(0) == (present[0], 1_000)


def test_read_records_ranges_and_codecs(tmp_path):
    log = Log.open(str(tmp_path / "r-0"), "r", 0, {}, None, 0)
    log.append_records_as_leader([(b"a", b"1"), (None, None), (b"c", b"")], 3, 77, "zstd")
    log.append_records_as_leader([(b"d", b"4")], 3, 78, compression="gzip")
    assert log.read_records(0) == [(0, 77, b"a", b"1"), (1, 77, None, None), (2, 77, b"c", b""), (3, 78, b"d", b"4")]
    assert log.read_records(1, 3) == [(1, 77, None, None), (2, 77, b"c", b"")]
    assert log.read_records(0, max_records=2) == log.read_records(0)[:2]
    assert log.read_records(4) == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read_records(5)
    with pytest.raises(ValueError, match="compression"):
        log.append_records_as_leader([(b"a", b"b")], 0, 0, "brotli")
    with pytest.raises(InvalidRecordError):
        log.append_records_as_leader([], 0, 0)
    assert log.epoch_entries() == [(3, 0)]
    log.close()


def test_stray_cleaner_files_are_removed_on_open(log, log_dir):
    for i in range(40):
        put(log, b"k%d" % (i % 2), b"v" * 60)
    expect = log.read_records(0)
    log.close()
    stray = os.path.join(log_dir, f"{0:020d}.log.cleaned")
    with open(stray, "wb") as f:
        f.write(b"half-written")
    again = Log.open(log_dir, "compacted", 0, dict(COMPACT), 0, 0)
    assert not os.path.exists(stray)
    assert again.read_records(0) == expect
    again.close()


def test_appends_and_reads_continue_while_compacting(log):
    for i in range(400):
        put(log, b"k%d" % (i % 10), b"v%d" % i * 10)
    errors: list[BaseException] = []

    def cleaner():
        try:
            for t in range(5):
                log.compact(10_000 + t, force=True)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    th = threading.Thread(target=cleaner)
    th.start()
    for i in range(200):
        put(log, b"k%d" % (i % 10), b"late %d" % i)
        log.read_records(log.log_start_offset, max_records=5)
    th.join()
    assert not errors
    final = latest(log.read_records(0))
    assert final == {b"k%d" % k: final[b"k%d" % k] for k in range(10)}
    assert all(v == b"late %d" % (190 + int(k[1:])) for k, (_, v) in final.items())
