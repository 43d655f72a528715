"""Field readers and writers for the records of Kafka's internal coordinator topics
(`__consumer_offsets`, `__transaction_state`, `__share_group_state`): big-endian fixed-width
integers, unsigned varints, strings and bytes (nullable or not), UUIDs, array lengths and
tagged-field sections in Kafka's non-flexible (int16 string / int32 bytes and array lengths,
-1 = null) and flexible (COMPACT: unsigned varint length + 1, 0 = null) encodings.

Every malformed input raises the module's error class (RecordFieldError unless the caller
names its own), naming what was being read, the field and the byte position.
"""

from __future__ import annotations

import struct
import uuid as uuidlib

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFieldError(ValueError):
    pass


class FieldWriter:
    def __init__(self, what: str, error: type[Exception] = RecordFieldError) -> None:
        self.b = bytearray()
        self.what = what
        self.error = error

    def pack(self, s: struct.Struct, v: int, field: str) -> FieldWriter:
        try:
            self.b += s.pack(v)
        except struct.error as e:
            raise self.error(f"{self.what}: {field} {v!r} does not fit: {e}") from None
        return self

    def i8(self, v: int, field: str) -> FieldWriter:
        return self.pack(_I8, v, field)

    def i16(self, v: int, field: str) -> FieldWriter:
        return self.pack(_I16, v, field)

    def i32(self, v: int, field: str) -> FieldWriter:
        return self.pack(_I32, v, field)

    def i64(self, v: int, field: str) -> FieldWriter:
        return self.pack(_I64, v, field)

    def uvarint(self, v: int) -> FieldWriter:
        if not 0 <= v < 1 << 32:
            raise self.error(f"{self.what}: unsigned varint {v} out of range")
        while v >= 0x80:
            self.b.append((v & 0x7F) | 0x80)
            v >>= 7
        self.b.append(v)
        return self

    def string(self, v: str, field: str, flexible: bool) -> FieldWriter:
        try:
            raw = v.encode()
        except UnicodeEncodeError as e:
            raise self.error(f"{self.what}: {field} is not encodable as UTF-8: {e}") from None
        if len(raw) > 0x7FFF:
            raise self.error(f"{self.what}: {field} is {len(raw)} bytes, more than 32767")
        return self._sized(raw, field, flexible, False)

    def nullable_string(self, v: str | None, field: str, flexible: bool) -> FieldWriter:
        return self._length(-1, field, flexible, False) if v is None else self.string(v, field, flexible)

    def nullable_bytes(self, v: bytes | None, field: str, flexible: bool) -> FieldWriter:
        return self._length(-1, field, flexible, True) if v is None else self._sized(v, field, flexible, True)

    def _length(self, n: int, field: str, flexible: bool, wide: bool) -> FieldWriter:
        """A length or count (-1 = null): flexible an unsigned varint n + 1, else an int16 (a
        string's) or, `wide`, an int32 (bytes', an array's)."""
        if flexible:
            return self.uvarint(n + 1)
        return self.i32(n, field) if wide else self.i16(n, field)

    def _sized(self, data: bytes, field: str, flexible: bool, wide: bool) -> FieldWriter:
        self._length(len(data), field, flexible, wide)
        self.b += data
        return self

    def array_len(self, n: int | None, field: str, flexible: bool) -> FieldWriter:
        return self._length(-1 if n is None else n, field, flexible, True)

    def raw(self, data: bytes) -> FieldWriter:
        self.b += data
        return self

    def uuid(self, v: uuidlib.UUID) -> FieldWriter:
        self.b += v.bytes
        return self

    def tagged_fields(self, tags: list[tuple[int, bytes]]) -> FieldWriter:
        """A tagged-field section: (tag, data) pairs in tag order."""
        self.uvarint(len(tags))
        for tag, data in sorted(tags):
            self.uvarint(tag).uvarint(len(data)).raw(data)
        return self


class FieldReader:
    def __init__(self, data: bytes, what: str, error: type[Exception] = RecordFieldError) -> None:
        self.d = bytes(data)
        self.p = 0
        self.what = what
        self.error = error

    def take(self, n: int, field: str) -> bytes:
        if n < 0 or self.p + n > len(self.d):
            raise self.error(
                f"{self.what}: truncated at {field} (byte {self.p}: need {n}, {len(self.d) - self.p} left)"
            )
        out = self.d[self.p : self.p + n]
        self.p += n
        return out

    def i8(self, field: str) -> int:
        return int(_I8.unpack(self.take(1, field))[0])

    def i16(self, field: str) -> int:
        return int(_I16.unpack(self.take(2, field))[0])

    def i32(self, field: str) -> int:
        return int(_I32.unpack(self.take(4, field))[0])

    def i64(self, field: str) -> int:
        return int(_I64.unpack(self.take(8, field))[0])

    def uvarint(self, field: str) -> int:
        v = 0
        for i in range(5):
            b = self.take(1, field)[0]
            v |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                if v >= 1 << 32:
                    raise self.error(f"{self.what}: {field}: unsigned varint does not fit in 32 bits")
                return v
        raise self.error(f"{self.what}: {field}: unsigned varint longer than 5 bytes")

    def _length(self, field: str, flexible: bool, wide: bool) -> int | None:
        """A length or count, None for null: flexible an unsigned varint - 1, else an int16
        (a string's) or, `wide`, an int32 (bytes', an array's)."""
        n = self.uvarint(field) - 1 if flexible else self.i32(field) if wide else self.i16(field)
        if n < -1:
            raise self.error(f"{self.what}: {field} has negative length {n}")
        return None if n == -1 else n

    def nullable_string(self, field: str, flexible: bool) -> str | None:
        n = self._length(field, flexible, False)
        if n is None:
            return None
        raw = self.take(n, field)
        try:
            return raw.decode()
        except UnicodeDecodeError as e:
            raise self.error(f"{self.what}: {field} is not valid UTF-8: {e}") from None

    def string(self, field: str, flexible: bool) -> str:
        v = self.nullable_string(field, flexible)
        if v is None:
            raise self.error(f"{self.what}: {field} is null")
        return v

    def nullable_bytes(self, field: str, flexible: bool) -> bytes | None:
        n = self._length(field, flexible, True)
        return None if n is None else self.take(n, field)

    def array_len(self, field: str, flexible: bool) -> int | None:
        return self._length(field, flexible, True)

    def uuid(self, field: str) -> uuidlib.UUID:
        return uuidlib.UUID(bytes=self.take(16, field))

    def tagged_fields(self, field: str) -> dict[int, bytes]:
        """The tagged-field section of a flexible struct, as tag -> raw data."""
        out: dict[int, bytes] = {}
        for _ in range(self.uvarint(f"{field} tagged field count")):
            tag = self.uvarint(f"{field} tag")
            size = self.uvarint(f"{field} tag {tag} size")
            out[tag] = self.take(size, f"{field} tag {tag} data")
        return out

    def end(self) -> None:
        if self.p != len(self.d):
            raise self.error(f"{self.what}: {len(self.d) - self.p} trailing bytes after byte {self.p}")
