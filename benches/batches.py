"""Build Kafka record batches (magic 2, uncompressed) for engine benchmarks."""

from __future__ import annotations

import struct

from logbroker._core import crc32c


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def build_batch(
    values: list[bytes],
    base_timestamp: int = 1_700_000_000_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    records = bytearray()
    for i, v in enumerate(values):
        body = b"\x00" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(v)) + v + _varint(0)
        records += _varint(len(body)) + body
    n = len(values)
    attributes = 0x10 if transactional else 0
    after_crc = struct.pack(
        ">hiqqqhii", attributes, n - 1, base_timestamp, base_timestamp, producer_id, producer_epoch, base_sequence, n
    ) + bytes(records)
    crc = crc32c(after_crc)
    head = struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc)
    return head + after_crc
