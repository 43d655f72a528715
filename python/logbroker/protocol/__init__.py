"""Kafka wire-protocol codec: request/response headers, framing, and one generated class
per message (Apache Kafka 4.1.1 specs, vendored in `specs/`, generated into `messages/`
by `tools/gen_protocol.py`).

The codec does no I/O. A broker reads a size-prefixed frame and calls

    header, body = decode_request(frame)          # frame = bytes after the 4-byte size
    ...
    chunks = encode_response(header.request_api_key, header.request_api_version,
                             header.correlation_id, response_obj)

`chunks` is the whole response frame (size prefix, response header, body) as a list
of `bytes` (one item), ready to send.

The bytes are read and written by the Rust codec (rust/src/protocol, generated from the
same specs; rust/src/py/messages.rs converts its structs to and from these classes), the
one codec the broker's data path, the control plane and the client share.

Message classes (`REQUESTS[key]`, `RESPONSES[key]`, e.g. `ProduceRequest`) carry
`api_key`, `name`, `valid_versions = (lo, hi)`, `flexible_versions_min`; nested structs
are nested classes named after the spec's struct types (`ProduceRequest.TopicProduceData`,
`ProduceRequest.PartitionProduceData`, all directly under the message class). Every
class has

* `__init__(**fields)` (keyword-only; missing fields take the spec default),
* `decode(buf, pos, version) -> (obj, end)` and `to_bytes(version)`,
* `__eq__`/`__repr__`, and `unknown_tagged_fields` ({tag: bytes}, kept on re-encode).

Values: ints/bools as Python ints/bools; `string` as str; `bytes` as bytes; `records` as
a zero-copy memoryview slice of the input when decoding, and a bytes-like object or
a list of those when encoding; `uuid` as `uuid.UUID` (default `ZERO_UUID`, all zero
bits); arrays as lists; nullable fields use None. Defaults follow the spec (`default`
key, else 0 / "" / False / b"" / [] / a default struct; `records` default to None).

Encoding a non-default value in a field that the version cannot carry raises
`ProtocolError` unless the spec marks the field ignorable (then it is dropped, as Kafka
does). Decoding raises `ProtocolError` for any malformed or truncated input.
"""

from __future__ import annotations

import struct as _struct

from logbroker import _core
from logbroker.protocol._runtime import ZERO_UUID, FieldInfo, Struct, check_version, codec_error
from logbroker.protocol.errors import ErrorCode, ProtocolError
from logbroker.protocol.messages import API_NAMES, REQUESTS, RESPONSES
from logbroker.protocol.messages.request_header import RequestHeader
from logbroker.protocol.messages.response_header import ResponseHeader

__all__ = [
    "API_NAMES",
    "LOGBROKER_TAG",
    "REQUESTS",
    "RESPONSES",
    "ZERO_UUID",
    "ErrorCode",
    "FieldInfo",
    "ProtocolError",
    "RequestHeader",
    "ResponseHeader",
    "Struct",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_header",
    "request_header_version",
    "response_header_version",
]

API_VERSIONS_KEY = 18

# logbroker's own tagged field in Kafka's flexible structs ("LB"); Kafka's readers skip it.
# An AcknowledgementBatch's: a RELEASE's back-off, int32 ms (client/share_consumer.py ->
# broker/share_fetch.py). A StateBatch's (WriteShareGroupState, ReadShareGroupState,
# __share_group_state records): AvailableAt, int64 wall-clock ms (coord/groups/share_state_log.py).
LOGBROKER_TAG = 0x4C42

_HH = _struct.Struct(">hh")
_I = _struct.Struct(">i")


def _flexible(cls, version: int) -> bool:
    fmin = cls.flexible_versions_min
    lo, hi = cls.valid_versions
    return fmin is not None and lo <= version <= hi and version >= fmin


def request_header_version(api_key: int, api_version: int) -> int:
    """2 if the request at this version is flexible, else 1 (also for unknown APIs/versions)."""
    cls = REQUESTS.get(api_key)
    return 2 if cls is not None and _flexible(cls, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 if the response is flexible, else 0; ApiVersions always 0 (KIP-511)."""
    if api_key == API_VERSIONS_KEY:
        return 0
    cls = RESPONSES.get(api_key)
    return 1 if cls is not None and _flexible(cls, api_version) else 0


def _as_view(buf) -> memoryview:
    mv = buf if type(buf) is memoryview else memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def decode_request_header(buf) -> tuple[RequestHeader, int]:
    """Decode the request header at the start of `buf` (the frame after its size).

    Reads the API key and version first, then decodes header v2 (with tagged fields)
    if that API version is flexible, else v1. For an unknown API key or a version
    outside the spec range it decodes the v1 part and returns, so that the broker can
    answer UNSUPPORTED_VERSION (KIP-511). Returns (header, offset of the body).
    """
    mv = _as_view(buf)
    if len(mv) < 4:
        raise ProtocolError("truncated request header", api="RequestHeader", position=0)
    key, ver = _HH.unpack_from(mv, 0)
    return RequestHeader.decode(mv, 0, request_header_version(key, ver))


def decode_request(buf) -> tuple[RequestHeader, Struct]:
    """Decode a whole request frame (without the size prefix): (header, body object).

    Raises ProtocolError with error_code UNSUPPORTED_VERSION for a version outside the
    spec range and INVALID_REQUEST for an unknown API key or malformed bytes. Bytes after
    the body are ignored.
    """
    mv = _as_view(buf)
    header, pos = decode_request_header(mv)
    key = header.request_api_key
    cls = REQUESTS.get(key)
    if cls is None:
        raise ProtocolError(f"unknown API key {key}", version=header.request_api_version, position=0)
    body, _ = cls.decode(mv, pos, header.request_api_version)
    return header, body


def encode_response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    """Response header bytes: v1 (with an empty tagged-field section) iff flexible, else v0."""
    if response_header_version(api_key, api_version):
        return _I.pack(correlation_id) + b"\x00"
    return _I.pack(correlation_id)


def encode_response(api_key: int, version: int, correlation_id: int, body: Struct) -> list[bytes]:
    """The full response frame (4-byte size, response header, body) as a one-item list."""
    cls = RESPONSES.get(api_key)
    if cls is not None and type(body) is not cls:
        raise ProtocolError(f"{type(body).__qualname__} is not the response of API key {api_key}")
    return [
        _encode_frame(
            ResponseHeader(correlation_id=correlation_id), response_header_version(api_key, version), body, version
        )
    ]


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None, body: Struct) -> list[bytes]:
    """Client side: the full request frame (size, header v1/v2, body) as a one-item list."""
    hdr = RequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id=client_id
    )
    return [_encode_frame(hdr, request_header_version(api_key, version), body, version)]


def _encode_frame(header: Struct, header_version: int, body: Struct, version: int) -> bytes:
    cls = type(body)
    check_version(cls, version)
    try:
        return _core.protocol_encode_frame(type(header)._rs, header, header_version, cls._rs, body, version)
    except _core.KafkaProtocolError as e:
        raise codec_error(e, cls._msg, version) from None


def decode_response(api_key: int, version: int, buf) -> tuple[int, Struct]:
    """Client side: decode a response frame (without the size prefix) -> (correlation_id, body)."""
    mv = _as_view(buf)
    header, pos = ResponseHeader.decode(mv, 0, response_header_version(api_key, version))
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise ProtocolError(f"unknown API key {api_key}", version=version)
    body, _ = cls.decode(mv, pos, version)
    return header.correlation_id, body
