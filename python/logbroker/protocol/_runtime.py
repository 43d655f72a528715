"""Support code shared by the generated message modules (`messages/*.py`).

Nothing here walks a spec: the generated modules hold one straight-line decode and
encode function per distinct wire layout. This module gives them

* `Struct`, the base class of every message and nested struct: `decode`, `encode`,
  `__repr__`, `__eq__`, built on the per-version function tables `_dec` and `_enc`
  that each generated class fills in;
* `Writer`, the output buffer (one `bytearray` plus zero-copy file regions);
* unsigned varint helpers, precompiled `struct.Struct`s and the error constructors the
  generated code raises.

Value conventions (see also `logbroker.protocol.__init__`):

* `uuid` fields are `uuid.UUID` (default `ZERO_UUID`, all zero bits);
* `string` fields are `str`, `bytes` fields `bytes`, `records` fields a zero-copy
  `memoryview` slice of the decoded buffer (or None); arrays are lists;
* nullable fields use None for null.

Error mapping: every generated function catches the low-level exceptions its
straight-line code can raise on bad input (`struct.error`, `IndexError`,
`UnicodeDecodeError`, `ValueError`) and converts them into `ProtocolError`. The field is
found from the line number the exception came from, through the `_LINES` table that
the generator appends to each module, so the hot path carries no bookkeeping.
"""

from __future__ import annotations

import bisect
import struct
import uuid
from collections import namedtuple

from logbroker.protocol.errors import ErrorCode, ProtocolError

__all__ = ["FieldInfo", "Struct", "Writer", "ZERO_UUID"]

ZERO_UUID = uuid.UUID(int=0)

# Highest API version the spec syntax "N+" stands for.
MAX_VERSION = 0x7FFF

FieldInfo = namedtuple(
    "FieldInfo",
    "attr name type kind elem versions nullable tag tagged ignorable default about",
)
FieldInfo.__doc__ = """Spec metadata of one field (for tests, tools and repr; unused on the hot path).

attr: Python attribute (snake_case); name: spec name; type: spec type string;
kind: int8|int16|int32|int64|uint16|float64|bool|string|bytes|records|uuid|array|struct;
elem: for arrays the element kind (str) or struct class, for structs the class;
versions / nullable / tagged: (lo, hi) inclusive or None, hi = 32767 for "N+";
tag: tag number or None; ignorable: spec "ignorable"; default: default value (for
arrays and structs a fresh one is made per instance); about: spec text."""

_new = object.__new__
_MISSING = object()

S_b = struct.Struct(">b")
S_h = struct.Struct(">h")
S_i = struct.Struct(">i")
unpack_from = struct.unpack_from
pack = struct.pack

# Exceptions the generated straight-line code can raise on bad bytes / bad values.
LOW_DEC = (struct.error, IndexError, ValueError)  # UnicodeDecodeError is a ValueError
LOW_ENC = (struct.error, TypeError, AttributeError, ValueError, OverflowError, IndexError)


# --------------------------------------------------------------------------- varints


def read_uvarint(buf, pos: int):
    """Decode an unsigned varint (at most 5 bytes, value < 2**32) at `pos`.

    Returns (value, new_pos). Raises IndexError when the buffer ends inside the varint
    and ValueError when it is too long; generated callers map both onto ProtocolError.
    """
    b = buf[pos]
    pos += 1
    if b < 0x80:
        return b, pos
    result = b & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result > 0xFFFFFFFF:
                raise ValueError("unsigned varint exceeds 32 bits")
            return result, pos
        shift += 7
        if shift >= 35:
            raise ValueError("unsigned varint longer than 5 bytes")


def uvarint_bytes(v: int) -> bytes:
    """Encode a non-negative int as an unsigned varint."""
    if v < 0x80:
        if v < 0:
            raise ValueError(f"unsigned varint cannot hold {v}")
        return bytes((v,))
    if v > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint cannot hold {v}")
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def make_uuid(raw) -> uuid.UUID:
    """uuid.UUID from 16 bytes (bytes or memoryview), skipping UUID.__init__'s parsing."""
    u = _new(uuid.UUID)
    object.__setattr__(u, "int", int.from_bytes(raw, "big"))
    object.__setattr__(u, "is_safe", uuid.SafeUUID.unknown)
    return u


# --------------------------------------------------------------------------- errors


def short(field: str, pos: int, length: int, end: int) -> ProtocolError:
    return ProtocolError(f"length {length} runs past the end of the buffer ({end - pos} bytes left)",
                         field=field, position=pos)


def bad_null(field: str, pos: int) -> ProtocolError:
    return ProtocolError("null in a non-nullable field", field=field, position=pos)


def bad_length(field: str, pos: int, length: int) -> ProtocolError:
    return ProtocolError(f"invalid length {length}", field=field, position=pos)


def too_many(field: str, pos: int, count: int, end: int) -> ProtocolError:
    return ProtocolError(f"array of {count} elements cannot fit in the {end - pos} bytes left",
                         field=field, position=pos)


def tag_size(field: str, pos: int, expected_end: int) -> ProtocolError:
    return ProtocolError(f"tagged field ended at byte {pos}, its size says {expected_end}",
                         field=field, position=pos)


def enc_null(field: str) -> ProtocolError:
    return ProtocolError("cannot encode null in a non-nullable field", field=field)


def enc_too_long(field: str, n: int) -> ProtocolError:
    return ProtocolError(f"string of {n} bytes is longer than 32767", field=field)


def enc_absent(field: str) -> ProtocolError:
    return ProtocolError("non-default value in a field this version cannot carry",
                         field=field, error_code=ErrorCode.UNSUPPORTED_VERSION)


def _field_at(lines, exc: BaseException):
    tb = exc.__traceback__
    if tb is None or not lines:
        return None
    nos, names = lines
    i = bisect.bisect_right(nos, tb.tb_lineno) - 1
    return names[i] if i >= 0 else None


def malformed(exc: BaseException, lines, pos: int) -> ProtocolError:
    """Convert a low-level decode exception raised in a generated function."""
    if isinstance(exc, UnicodeDecodeError):
        reason = "invalid UTF-8 in string"
    elif isinstance(exc, (IndexError, struct.error)):
        reason = "truncated input"
    else:
        reason = str(exc) or type(exc).__name__
    return ProtocolError(reason, field=_field_at(lines, exc), position=pos)


def unencodable(exc: BaseException, lines) -> ProtocolError:
    """Convert a low-level encode exception raised in a generated function."""
    return ProtocolError(f"cannot encode value: {type(exc).__name__}: {exc}", field=_field_at(lines, exc))


# --------------------------------------------------------------------------- writer


class Writer:
    """Output buffer for encoders.

    Bytes accumulate in one `bytearray` (`buf`, which generated encoders append to
    directly). A records value that is a file region (any object with
    `is_file_region = True` and `__len__`, such as the Rust `FileRegion`) is not copied:
    it is recorded with the offset in `buf` where it belongs, and `chunks()` returns the
    output as byte strings interleaved with the regions, ready for send/sendfile.

    Not thread-safe. After an encoder raises, the content is unspecified.
    """

    __slots__ = ("buf", "_regions", "_region_bytes")

    def __init__(self) -> None:
        self.buf = bytearray()
        self._regions: list = []  # [(offset in buf, region)]
        self._region_bytes = 0

    # -- plain writes
    def write(self, data) -> None:
        self.buf += data

    def write_int8(self, v: int) -> None:
        self.buf += S_b.pack(v)

    def write_int16(self, v: int) -> None:
        self.buf += S_h.pack(v)

    def write_int32(self, v: int) -> None:
        self.buf += S_i.pack(v)

    def write_int64(self, v: int) -> None:
        self.buf += pack(">q", v)

    def write_uvarint(self, v: int) -> None:
        self.buf += uvarint_bytes(v)

    def add_region(self, region) -> None:
        """Append a file region (no length prefix) without copying it."""
        n = len(region)
        if n:
            self._regions.append((len(self.buf), region))
            self._region_bytes += n

    def write_records(self, value, compact: bool) -> None:
        """Write a nullable `records` value with its length prefix (see class doc)."""
        buf = self.buf
        if value is None:
            if compact:
                buf.append(0)
            else:
                buf += b"\xff\xff\xff\xff"
            return
        if isinstance(value, (bytes, bytearray, memoryview)):
            n = value.nbytes if type(value) is memoryview else len(value)
            buf += uvarint_bytes(n + 1) if compact else S_i.pack(n)
            buf += value
            return
        if isinstance(value, (list, tuple)):
            pieces = value
        elif getattr(value, "is_file_region", False):
            pieces = (value,)
        else:
            raise ProtocolError(f"records value of type {type(value).__name__} is not bytes, a file region or a list of them")
        n = 0
        for p in pieces:
            if isinstance(p, (bytes, bytearray)):
                n += len(p)
            elif type(p) is memoryview:
                n += p.nbytes
            elif getattr(p, "is_file_region", False):
                n += len(p)
            else:
                raise ProtocolError(f"records piece of type {type(p).__name__} is not bytes or a file region")
        buf += uvarint_bytes(n + 1) if compact else S_i.pack(n)
        for p in pieces:
            if isinstance(p, (bytes, bytearray, memoryview)):
                buf += p
            else:
                self.add_region(p)

    # -- results
    @property
    def nbytes(self) -> int:
        return len(self.buf) + self._region_bytes

    def chunks(self) -> list:
        """The output as `bytes` pieces and regions, in order; adjacent bytes merged."""
        if not self._regions:
            return [bytes(self.buf)] if self.buf else []
        out: list = []
        start = 0
        buf = self.buf
        for off, region in self._regions:
            if off > start:
                out.append(bytes(buf[start:off]))
            out.append(region)
            start = off
        if start < len(buf):
            out.append(bytes(buf[start:]))
        return out

    def getvalue(self) -> bytes:
        """The output as one `bytes`; only when no file regions were written."""
        if self._regions:
            raise ValueError("Writer holds file regions; use chunks()")
        return bytes(self.buf)


def write_tags(b: bytearray, known, unknown) -> None:
    """Write a tagged-field section: known [(tag, payload)] merged with unknown {tag: bytes}."""
    if unknown:
        fields = dict(unknown)
        if known:
            fields.update(known)
    else:
        fields = dict(known) if known else {}
    b += uvarint_bytes(len(fields))
    for tag in sorted(fields):
        payload = fields[tag]
        b += uvarint_bytes(tag)
        b += uvarint_bytes(len(payload))
        b += payload


# --------------------------------------------------------------------------- base class


class Struct:
    """Base of every generated message and nested struct class.

    Generated subclasses set `__slots__`, `__init__`, `_fields` (FieldInfo tuple),
    `_msg` (top-level message name), `_lo`/`_hi` (version range) and the per-version
    function tables `_dec`/`_enc` (index = version - `_lo`).
    """

    __slots__ = ()
    _msg = "?"
    _lo = 0
    _hi = -1
    _dec: tuple = ()
    _enc: tuple = ()
    _fields: tuple = ()

    @classmethod
    def decode(cls, buf, pos: int, version: int):
        """Decode one instance at `buf[pos:]`; returns (obj, end position)."""
        lo = cls._lo
        if not lo <= version <= cls._hi:
            raise ProtocolError(
                f"version {version} is outside {cls._lo}-{cls._hi}",
                api=cls._msg, version=version, error_code=ErrorCode.UNSUPPORTED_VERSION,
            )
        if type(buf) is not memoryview:
            buf = memoryview(buf)
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        try:
            return cls._dec[version - lo](buf, pos)
        except ProtocolError as e:
            e._fill(cls._msg, version)
            raise

    def encode(self, version: int, w: Writer) -> None:
        """Append this object's encoding at `version` to `w`."""
        cls = type(self)
        lo = cls._lo
        if not lo <= version <= cls._hi:
            raise ProtocolError(
                f"version {version} is outside {cls._lo}-{cls._hi}",
                api=cls._msg, version=version, error_code=ErrorCode.UNSUPPORTED_VERSION,
            )
        try:
            cls._enc[version - lo](self, w.buf, w)
        except ProtocolError as e:
            e._fill(cls._msg, version)
            raise

    def to_bytes(self, version: int) -> bytes:
        """Convenience: the encoding as bytes (no file regions allowed)."""
        w = Writer()
        self.encode(version, w)
        return w.getvalue()

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        for name in type(self).__slots__:
            if getattr(self, name) != getattr(other, name):
                return False
        return True

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        cls = type(self)
        parts = []
        for name in cls.__slots__:
            v = getattr(self, name, None)
            if name == "unknown_tagged_fields" and not v:
                continue
            if type(v) is memoryview:
                v = f"<memoryview {v.nbytes} bytes>"
                parts.append(f"{name}={v}")
            else:
                parts.append(f"{name}={v!r}")
        return f"{cls.__qualname__}({', '.join(parts)})"
