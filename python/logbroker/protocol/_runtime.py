"""The base class of the generated message classes (`messages/*.py`), and the one place
where the Rust codec's errors become `ProtocolError`.

The generated classes are data only: `__slots__`, a keyword-only `__init__` with the spec
defaults, `_fields` (FieldInfo metadata for tests and tools) and `_rs`, the struct's id
in the Rust codec (`logbroker._core.protocol_decode` / `protocol_encode`), which reads and
writes every byte.

Value conventions (see also `logbroker.protocol.__init__`):

* `uuid` fields are `uuid.UUID` (default `ZERO_UUID`, all zero bits);
* `string` fields are `str`, `bytes` fields `bytes`, `records` fields a zero-copy
  `memoryview` slice of the decoded buffer (or None); arrays are lists;
* nullable fields use None for null.
"""

from __future__ import annotations

import re
import uuid
from collections import namedtuple
from typing import TYPE_CHECKING, Any, ClassVar

from logbroker import _core
from logbroker.protocol.errors import ErrorCode, ProtocolError

__all__ = ["FieldInfo", "Message", "Struct", "ZERO_UUID", "check_version", "codec_error"]

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

_MISSING = object()

# "<Struct>.<Field>: <reason>" (the Rust codec's messages start with the spec field)
_FIELD = re.compile(r"^([A-Za-z0-9_]+\.(?:<tagged fields>|[A-Za-z0-9_\[\]]+)): (.*)$", re.S)
_POSITION = re.compile(r"at position (\d+)")
_ABSENT = "does not carry it"  # ProtocolError::absent_field in rust/src/protocol/codec.rs


def codec_error(e: Exception, api: str | None, version: int | None, base: int = 0) -> ProtocolError:
    """`ProtocolError` for a `KafkaProtocolError` from the Rust codec: the field and the byte
    position (relative to the decoded buffer, `base` added) parsed from its message."""
    text = str(e)
    field = None
    m = _FIELD.match(text)
    if m:
        field, text = m.group(1), m.group(2)
    pos = _POSITION.search(text)
    # a value the version cannot carry: the version is what the peer cannot take
    code = ErrorCode.UNSUPPORTED_VERSION if _ABSENT in text else ErrorCode.INVALID_REQUEST
    return ProtocolError(
        text,
        api=api,
        version=version,
        field=field,
        error_code=code,
        position=None if pos is None else base + int(pos.group(1)),
    )


def check_version(cls, version: int) -> None:
    """UNSUPPORTED_VERSION unless `version` is in the message class's range."""
    if not cls._lo <= version <= cls._hi:
        raise ProtocolError(
            f"version {version} is outside {cls._lo}-{cls._hi}",
            api=cls._msg,
            version=version,
            error_code=ErrorCode.UNSUPPORTED_VERSION,
        )


class Struct:
    """Base of every generated message and nested struct class.

    Generated subclasses set `__slots__`, `__init__`, `_fields` (FieldInfo tuple),
    `_msg` (top-level message name), `_lo`/`_hi` (version range) and `_rs` (Rust id).
    """

    __slots__ = ()
    _msg = "?"
    _lo = 0
    _hi = -1
    _rs = -1
    _fields: tuple = ()

    @classmethod
    def decode(cls, buf, pos: int, version: int):
        """Decode one instance at `buf[pos:]` (any bytes-like object); returns (obj, end
        position). Records fields are memoryview slices of `buf`."""
        check_version(cls, version)
        try:
            return _core.protocol_decode(cls._rs, buf, pos, version)
        except _core.KafkaProtocolError as e:
            raise codec_error(e, cls._msg, version, pos) from None

    def to_bytes(self, version: int) -> bytes:
        """The encoding at `version`."""
        cls = type(self)
        check_version(cls, version)
        try:
            return _core.protocol_encode(cls._rs, self, version)
        except _core.KafkaProtocolError as e:
            raise codec_error(e, cls._msg, version) from None

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


class Message(Struct):
    """Base of every generated top-level message class (what `REQUESTS` and `RESPONSES`
    hold): the class attributes a message has beyond a struct's."""

    __slots__ = ()
    api_key: ClassVar[int | None]
    name: ClassVar[str]
    valid_versions: ClassVar[tuple[int, int]]
    flexible_versions_min: ClassVar[int | None]

    if TYPE_CHECKING:  # each generated subclass defines its own fields and __init__

        def __init__(self, **fields: Any) -> None: ...
        def __getattr__(self, name: str) -> Any: ...
