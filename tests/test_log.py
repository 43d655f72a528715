"""End-to-end tests of the Rust storage engine through its Python API (logbroker._core).

Batches are built by an independent pure-Python encoder below (own CRC-32C, own varints,
compression from the Python codec packages), so these tests check the Rust engine against a
second implementation of the format, not against itself.
"""

from __future__ import annotations

import errno
import gzip
import os
import socket
import struct
import threading
from pathlib import Path

import pytest

from logbroker import _core
from logbroker._core import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidProducerEpochError,
    InvalidRecordError,
    KafkaStorageError,
    Log,
    LogBrokerError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
)

# --- an independent batch encoder/decoder -----------------------------------------------

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c_py(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def zigzag(n: int, bits: int = 64) -> bytes:
    v = (n << 1) ^ (n >> (bits - 1))
    v &= (1 << bits) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def read_zigzag(buf: bytes, pos: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos


def _bytes_field(b: bytes | None) -> bytes:
    return zigzag(-1) if b is None else zigzag(len(b)) + b


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def compress(codec: str, data: bytes) -> bytes:
    if codec == "none":
        return data
    if codec == "gzip":
        return gzip.compress(data)
    if codec == "snappy":  # xerial framing, as the Java client writes it
        import snappy

        out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        for i in range(0, len(data), 32 * 1024):
            block = snappy.compress(data[i : i + 32 * 1024])
            out += struct.pack(">i", len(block)) + block
        return out
    if codec == "lz4":
        import lz4.frame

        return lz4.frame.compress(data)
    if codec == "zstd":
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    raise ValueError(codec)


def decompress(codec_id: int, data: bytes) -> bytes:
    if codec_id == 0:
        return data
    if codec_id == 1:
        return gzip.decompress(data)
    if codec_id == 2:
        import snappy

        if data.startswith(b"\x82SNAPPY\x00"):
            out, pos = b"", 16
            while pos < len(data):
                (n,) = struct.unpack_from(">i", data, pos)
                out += snappy.decompress(data[pos + 4 : pos + 4 + n])
                pos += 4 + n
            return out
        return snappy.decompress(data)
    if codec_id == 3:
        import lz4.frame

        return lz4.frame.decompress(data)
    if codec_id == 4:
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    raise ValueError(codec_id)


def encode_batch(
    values: list[bytes],
    *,
    base_ts: int = 1_000,
    codec: str = "none",
    producer: tuple[int, int, int] = (-1, -1, -1),
    keys: list[bytes | None] | None = None,
) -> bytes:
    recs = bytearray()
    for i, v in enumerate(values):
        key = keys[i] if keys else None
        body = b"\x00" + zigzag(i) + zigzag(i, 32) + _bytes_field(key) + _bytes_field(v) + zigzag(0, 32)
        recs += zigzag(len(body), 32) + body
    payload = compress(codec, bytes(recs))
    pid, epoch, seq = producer
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            CODEC_IDS[codec],
            len(values) - 1,
            base_ts,
            base_ts + len(values) - 1,
            pid,
            epoch,
            seq,
            len(values),
        )
        + payload
    )
    crc = crc32c_py(after_crc)
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc) + after_crc


def decode(data: bytes) -> list[tuple[int, int, int, bytes | None]]:
    """[(offset, timestamp, leader_epoch, value)] of every record, checking every CRC."""
    out, pos = [], 0
    while pos < len(data):
        base, length, ple, magic, crc = struct.unpack_from(">qiibI", data, pos)
        assert magic == 2
        end = pos + 12 + length
        assert crc32c_py(data[pos + 21 : end]) == crc, "stored batch has a bad CRC"
        attrs, _lod, base_ts, max_ts, _pid, _ep, _seq, count = struct.unpack_from(">hiqqqhii", data, pos + 21)
        recs = decompress(attrs & 7, data[pos + 61 : end])
        p = 0
        for _ in range(count):
            n, p = read_zigzag(recs, p)
            rec_end = p + n
            p += 1
            ts_delta, p = read_zigzag(recs, p)
            off_delta, p = read_zigzag(recs, p)
            klen, p = read_zigzag(recs, p)
            p += max(klen, 0)
            vlen, p = read_zigzag(recs, p)
            value = None if vlen < 0 else recs[p : p + vlen]
            ts = max_ts if attrs & 0x08 else base_ts + ts_delta
            out.append((base + off_delta, ts, ple, value))
            p = rec_end
        pos = end
    return out


def read_all(
    log: Log, start: int | None = None, max_offset: int | None = None
) -> list[tuple[int, int, int, bytes | None]]:
    out: list = []
    offset = log.log_start_offset if start is None else start
    while True:
        region = log.read(offset, 1 << 20, max_offset, True)
        if region is None:
            return out
        recs = decode(region.read())
        out += [r for r in recs if r[0] >= offset]
        offset = recs[-1][0] + 1


SMALL = {"segment.bytes": "2000", "index.interval.bytes": "200", "segment.index.bytes": "4096"}


@pytest.fixture
def log_dir(tmp_path):
    return str(tmp_path / "topic-0")


@pytest.fixture
def log(log_dir):
    lg = Log.open(log_dir, "topic", 0, dict(SMALL), None, 1_000)
    yield lg
    lg.close()


def fill(log: Log, batches: int, per: int = 3, *, epoch: int = 0, now: int = 1_000) -> list[bytes]:
    values = []
    for b in range(batches):
        vs = [f"value-{log.log_end_offset + i}".encode() * 3 for i in range(per)]
        log.append_as_leader(encode_batch(vs, base_ts=now + b), epoch, now)
        values += vs
    return values


# --- tests ------------------------------------------------------------------------------


def test_crc32c_matches_reference_vector():
    assert _core.crc32c(b"123456789") == 0xE3069283
    assert crc32c_py(b"123456789") == 0xE3069283
    assert _core.crc32c(memoryview(b"hello")) == crc32c_py(b"hello")


def test_append_assigns_offsets_and_epoch(log):
    r = log.append_as_leader(encode_batch([b"a", b"b", b"c"]), 5, 2_000)
    assert (r.base_offset, r.last_offset, r.record_count, r.batch_count) == (0, 2, 3, 1)
    assert (r.duplicate, r.log_append_time, r.log_start_offset, r.max_timestamp) == (False, -1, 0, 1_002)
    req = encode_batch([b"d"]) + encode_batch([b"e", b"f"])
    r = log.append_as_leader(req, 6, 2_000)
    assert (r.base_offset, r.last_offset, r.batch_count, r.size_bytes) == (3, 5, 2, len(req))
    assert log.log_end_offset == 6
    got = read_all(log)
    assert [(o, v) for o, _, _, v in got] == list(enumerate([b"a", b"b", b"c", b"d", b"e", b"f"]))
    assert [e for _, _, e, _ in got] == [5, 5, 5, 6, 6, 6]
    assert log.epoch_entries() == [(5, 0), (6, 3)]
    assert log.end_offset_for_epoch(5) == (5, 3)
    assert log.end_offset_for_epoch(6) == (6, 6)
    assert log.end_offset_for_epoch(9) == (-1, -1)
    assert log.latest_epoch() == 6


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_append_accepts_buffers(log, kind):
    r = log.append_as_leader(kind(encode_batch([b"x"])), 0, 0)
    assert r.record_count == 1


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_compressed_batches_round_trip(log_dir, codec):
    log = Log.open(log_dir, "topic", 0, {}, None, 0)
    values = [f"record {i} ".encode() * 20 for i in range(50)]
    batch = encode_batch(values, codec=codec)
    assert _core.validate_batches(batch) == [(0, 49, 50, -1, -1)]
    log.append_as_leader(batch, 0, 0)
    assert [v for _, _, _, v in read_all(log)] == values
    with pytest.raises(RecordTooLargeError, match="segment.bytes = 2000"):
        log.update_config(dict(SMALL))
        log.append_as_leader(batch * (2000 // len(batch) + 1), 0, 0)
    log.close()


def test_raw_snappy_accepted(log):
    import snappy

    recs = b"".join(
        zigzag(len(body), 32) + body
        for body in [b"\x00" + zigzag(0) + zigzag(0, 32) + _bytes_field(None) + _bytes_field(b"raw") + zigzag(0, 32)]
    )
    good = bytearray(encode_batch([b"raw"], codec="none"))
    payload = snappy.compress(recs)
    after = bytes(good[21:61]) + payload
    after = struct.pack(">h", 2) + after[2:]
    batch = struct.pack(">qiibI", 0, 9 + len(after), -1, 2, crc32c_py(after)) + after
    log.append_as_leader(batch, 0, 0)
    assert [v for *_, v in read_all(log)] == [b"raw"]


def test_file_region_send_and_write_to_socketpair(log):
    values = fill(log, 6, per=5)
    region = log.read(0, 1 << 20, None, True)
    assert region is not None and len(region) == region.length > 0
    expected = region.read()
    for method in ("send", "write_to"):
        a, b = socket.socketpair()
        with a, b:
            a.setblocking(False)
            sent = 0
            received = bytearray()
            while sent < len(region):
                try:
                    sent += getattr(region, method)(a.fileno(), sent, len(region) - sent)
                except BlockingIOError:
                    pass
                b.setblocking(False)
                try:
                    while True:
                        chunk = b.recv(1 << 16)
                        if not chunk:
                            break
                        received += chunk
                except BlockingIOError:
                    pass
            while len(received) < len(expected):
                received += b.recv(1 << 16)
            assert bytes(received) == expected, method
    assert [v for *_, v in decode(expected)][: len(values)] == values[: len(decode(expected))]


def test_send_raises_blocking_io_error_when_socket_full(log):
    fill(log, 1, per=1)
    region = log.read(0, 1 << 20, None, True)
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        with pytest.raises(BlockingIOError):
            while True:  # fill the socket buffer until EAGAIN
                region.send(a.fileno(), 0, len(region))


def test_read_respects_max_offset_and_max_bytes(log):
    fill(log, 4, per=2)  # batches at 0, 2, 4, 6
    all_bytes = log.read(0, 1 << 20, None, True).read()
    per_batch = len(all_bytes) // 4
    assert len(log.read(0, 1 << 20, 4, True)) == 2 * per_batch
    assert log.read(4, 1 << 20, 4, True) is None
    assert len(log.read(0, per_batch * 2 + 1, None, True)) == 2 * per_batch
    assert log.read(0, 5, None, False) is None
    assert len(log.read(0, 5, None, True)) == per_batch, "min_one_message returns the first batch whole"
    assert log.read(8, 100, None, True) is None
    with pytest.raises(OffsetOutOfRangeError, match="topic-0"):
        log.read(9, 100, None, True)


def test_errors_map_to_exception_classes(log, log_dir):
    good = encode_batch([b"a", b"b"])
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append_as_leader(bytes(bad_crc), 0, 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good[:-2], 0, 0)
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        log.append_as_leader(bytes(bad_magic), 0, 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(b"", 0, 0)
    with pytest.raises(CorruptRecordError):
        _core.validate_batches(bytes(bad_crc))
    assert log.log_end_offset == 0, "rejected appends write nothing"
    log.append_as_leader(good, 0, 0)
    with pytest.raises(InvalidRecordError, match="expected base offset 2"):
        log.append_as_follower(good)
    log.update_config({**SMALL, "max.message.bytes": "50"})
    with pytest.raises(RecordTooLargeError, match="50"):
        log.append_as_leader(good, 0, 0)
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        log.update_config({"retention.ms": "soon"})
    with pytest.raises(InvalidConfigError, match="unknown"):
        Log.open(log_dir + "x", "t", 0, {"segmnt.bytes": "1"}, None, 0)
    for cls in (
        CorruptRecordError,
        InvalidRecordError,
        RecordTooLargeError,
        InvalidConfigError,
        OffsetOutOfRangeError,
        OutOfOrderSequenceError,
        InvalidProducerEpochError,
        KafkaStorageError,
    ):
        assert issubclass(cls, LogBrokerError)


def test_idempotent_producer(log):
    pid = 4242
    r = log.append_as_leader(encode_batch([b"a", b"b"], producer=(pid, 0, 0)), 0, 0)
    log.append_as_leader(encode_batch([b"c"], producer=(pid, 0, 2)), 0, 0)
    dup = log.append_as_leader(encode_batch([b"a", b"b"], producer=(pid, 0, 0)), 0, 0)
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (r.base_offset, r.last_offset)
    assert log.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError, match="expected 3, received 7"):
        log.append_as_leader(encode_batch([b"x"], producer=(pid, 0, 7)), 0, 0)
    log.append_as_leader(encode_batch([b"d"], producer=(pid, 1, 0)), 0, 0)
    with pytest.raises(InvalidProducerEpochError, match=str(pid)):
        log.append_as_leader(encode_batch([b"x"], producer=(pid, 0, 3)), 0, 0)
    assert log.producer_state(pid) == (1, 0, 3)
    assert log.producer_state(1) is None
    assert log.active_producers() == [(pid, 1, 0, 1_000, 3, -1, -1)]


def test_clean_reopen(log_dir):
    lg = Log.open(log_dir, "topic", 0, dict(SMALL), None, 0)
    values = fill(lg, 30, per=3)
    leo, segs = lg.log_end_offset, lg.segment_count
    assert segs > 1
    lg.close()
    lg.close()  # idempotent
    assert lg.recovery_point == leo
    lg = Log.open(log_dir, "topic", 0, dict(SMALL), leo, 0)
    assert lg.recovery_report[0] is True
    assert (lg.log_end_offset, lg.segment_count) == (leo, segs)
    assert [v for *_, v in read_all(lg)] == values
    lg.close()


def test_unclean_reopen_truncates_torn_tail(log_dir):
    lg = Log.open(log_dir, "topic", 0, dict(SMALL), None, 0)
    values = fill(lg, 5, per=2)
    batch_size = lg.size_bytes // 5
    del lg  # no close: like a crash
    seg = os.path.join(log_dir, "00000000000000000000.log")
    with open(seg, "r+b") as f:
        f.truncate(os.path.getsize(seg) - 10)
    lg = Log.open(log_dir, "topic", 0, dict(SMALL), None, 0)
    clean, recovered, truncated, dropped, first_error = lg.recovery_report
    assert (clean, recovered, truncated, dropped) == (False, 1, batch_size - 10, 0)
    assert "cut short" in first_error
    assert lg.log_end_offset == 8
    assert [v for *_, v in read_all(lg)] == values[:8]
    lg.close()


def test_truncate_to_and_fully(log):
    fill(log, 10, per=2, epoch=1)
    fill(log, 10, per=2, epoch=2)
    log.update_high_watermark(40)
    log.truncate_to(25)  # mid batch 24..25: the batch goes
    assert log.log_end_offset == 24
    assert log.high_watermark == 24
    assert log.epoch_entries() == [(1, 0), (2, 20)]
    assert [o for o, *_ in read_all(log)] == list(range(24))
    log.truncate_to(15)
    assert log.epoch_entries() == [(1, 0)]
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (500, 500, 500)
    assert log.segment_base_offsets == [500]
    batch = bytearray(encode_batch([b"z"]))
    batch[0:8] = struct.pack(">q", 500)
    log.append_as_follower(bytes(batch))
    assert [(o, v) for o, _, _, v in read_all(log)] == [(500, b"z")]


def test_follower_accepts_offset_gaps_not_regressions(log):
    batch = bytearray(encode_batch([b"a", b"b"]))
    log.append_as_follower(bytes(batch))
    batch[0:8] = struct.pack(">q", 10)  # a compacted leader dropped offsets 2..9
    r = log.append_as_follower(bytes(batch))
    assert (r.base_offset, r.last_offset, log.log_end_offset) == (10, 11, 12)
    assert [o for o, *_ in read_all(log)] == [0, 1, 10, 11]
    assert log.read(5, 1 << 20) is not None  # an offset in the gap reads the next batch
    with pytest.raises(InvalidRecordError, match="backwards"):
        log.append_as_follower(bytes(batch))


def test_retention_by_bytes_and_time(log_dir):
    lg = Log.open(log_dir, "topic", 0, dict(SMALL), None, 0)
    fill(lg, 20, per=3, now=1_000)
    fill(lg, 20, per=3, now=100_000)
    assert lg.enforce_retention(200_000) == 0, "retention.ms default is 7 days; nothing old enough"
    lg.update_config({**SMALL, "retention.ms": "50000"})
    assert lg.enforce_retention(120_000) == 0, "nothing below the HW yet"
    lg.update_high_watermark(lg.log_end_offset)
    deleted = lg.enforce_retention(120_000)
    assert deleted > 0
    start = lg.log_start_offset
    assert 0 < start <= 60 and start == lg.segment_base_offsets[0]
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(start - 1, 100, None, True)
    lg.update_config({**SMALL, "retention.bytes": "3000", "retention.ms": "-1"})
    lg.enforce_retention(120_000)
    assert lg.size_bytes <= 3000 + 2000
    start = lg.log_start_offset
    assert read_all(lg)[0][0] == start
    lg.close()
    lg = Log.open(log_dir, "topic", 0, dict(SMALL), None, 0)
    assert lg.log_start_offset == start
    lg.close()


def test_delete_records_and_timestamps(log_dir):
    lg = Log.open(log_dir, "topic", 0, dict(SMALL), None, 0)
    for i in range(10):
        lg.append_as_leader(encode_batch([b"a", b"b"], base_ts=10_000 * (i + 1)), 0, 0)
    assert lg.offset_for_timestamp(0) == (0, 10_000)
    assert lg.offset_for_timestamp(30_001) == (5, 30_001)
    assert lg.offset_for_timestamp(30_002) == (6, 40_000)
    assert lg.offset_for_timestamp(10**9) is None
    assert lg.max_timestamp() == (100_001, 19)
    with pytest.raises(OffsetOutOfRangeError, match="out of range"):
        lg.delete_records_before(5)  # above the HW (still 0)
    lg.update_high_watermark(20)
    assert lg.delete_records_before(7) == 7
    assert lg.log_start_offset == 7
    assert lg.offset_for_timestamp(0) == (7, 40_001)
    assert read_all(lg)[0][0] == 7
    lg.close()
    lg = Log.open(log_dir, "topic", 0, dict(SMALL), None, 0)
    assert lg.log_start_offset == 7
    lg.close()


def test_log_append_time(log_dir):
    lg = Log.open(log_dir, "topic", 0, {**SMALL, "message.timestamp.type": "LogAppendTime"}, None, 0)
    r = lg.append_as_leader(encode_batch([b"a", b"b"], base_ts=5), 0, 123_456)
    assert (r.log_append_time, r.max_timestamp) == (123_456, 123_456)
    assert [ts for _, ts, _, _ in read_all(lg)] == [123_456, 123_456]  # decode() checks the new CRC
    lg.close()


def test_region_outlives_deleted_log(log):
    fill(log, 3)
    region = log.read(0, 1 << 20, None, True)
    data = region.read()
    log.delete()
    assert not os.path.exists(log.dir)
    assert region.read() == data
    with pytest.raises(KafkaStorageError, match="closed"):
        log.read(0, 100, None, True)


def test_flush_and_recovery_point(log_dir):
    lg = Log.open(log_dir, "topic", 0, {**SMALL, "flush.messages": "5"}, None, 0)
    fill(lg, 1, per=3)
    assert lg.recovery_point == 0
    fill(lg, 1, per=3)
    assert lg.recovery_point == 6
    fill(lg, 1, per=1)
    assert lg.maybe_flush(0) is False
    lg.flush()
    assert lg.recovery_point == 7
    lg.close()


def test_maybe_roll_by_segment_ms(log_dir):
    lg = Log.open(log_dir, "topic", 0, {**SMALL, "segment.ms": "1000"}, None, 0)
    assert lg.maybe_roll(10_000) is False
    fill(lg, 1, now=5_000)
    assert lg.maybe_roll(5_500) is False
    assert lg.maybe_roll(6_000) is True
    assert lg.segment_count == 2
    lg.close()


def test_roll_and_flush_passes_over_every_log_in_one_call(tmp_path):
    logs = [
        Log.open(str(tmp_path / f"topic-{i}"), "topic", i, {**SMALL, "segment.ms": "1000", "flush.ms": "1000"}, None, 0)
        for i in range(3)
    ]
    for lg in logs:
        fill(lg, 1, now=5_000)
    logs[1].close()  # deleted meanwhile: its error comes back with its index, the others are done
    failed = _core.roll_and_flush(logs, 6_000)
    assert [(i, type(e)) for i, e in failed] == [(1, KafkaStorageError)] and "closed" in str(failed[0][1])
    assert [logs[i].segment_count for i in (0, 2)] == [2, 2]
    assert all(logs[i].recovery_point == logs[i].log_end_offset > 0 for i in (0, 2))  # rolled segments flushed
    assert _core.roll_and_flush([logs[0], logs[2]], 6_000) == []
    for i in (0, 2):
        logs[i].close()


def test_offset_checkpoint_files(tmp_path):
    path = str(tmp_path / "replication-offset-checkpoint")
    assert _core.read_offset_checkpoint(path) == []
    entries = [("orders", 0, 10), ("orders", 1, 0), ("a.b_c-d", 7, 123456789)]
    _core.write_offset_checkpoint(path, entries)
    assert Path(path).read_text() == "0\n3\norders 0 10\norders 1 0\na.b_c-d 7 123456789\n"
    assert _core.read_offset_checkpoint(path) == entries
    with open(path, "w") as f:
        f.write("0\n2\norders 0 10\n")
    with pytest.raises(KafkaStorageError, match="replication-offset-checkpoint"):
        _core.read_offset_checkpoint(path)


def test_storage_error_carries_errno(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(KafkaStorageError) as info:
        Log.open(str(blocker / "t-0"), "t", 0, {}, None, 0)
    assert info.value.errno in (errno.ENOTDIR, errno.EEXIST)


def test_concurrent_appends_from_threads(log):
    def worker(t: int) -> None:
        for i in range(50):
            log.append_as_leader(encode_batch([f"{t}-{i}".encode()] * 2), 0, 0)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = read_all(log)
    assert [o for o, *_ in got] == list(range(400))
    for t in range(4):
        assert sum(1 for *_, v in got if v.startswith(f"{t}-".encode())) == 100


def test_encode_batch_helper_round_trips(log):
    batch = _core.encode_batch(
        [(b"k", b"v", 0, [(b"h", b"x")]), (None, None, 3, [])], base_timestamp=77, compression="lz4"
    )
    assert _core.validate_batches(batch) == [(0, 1, 2, -1, -1)]
    log.append_as_leader(batch, 0, 0)
    assert [(o, ts, v) for o, ts, _, v in read_all(log)] == [(0, 77, b"v"), (1, 80, None)]
