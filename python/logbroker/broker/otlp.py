"""A reader of the OpenTelemetry metrics clients push (KIP-714's PushTelemetry carries an
OTLP `MetricsData` protobuf, opentelemetry/proto/metrics/v1/metrics.proto), enough for the
metrics endpoint: every Gauge and Sum data point with its value and attributes.

    MetricsData      1 resource_metrics (ResourceMetrics, repeated)
    ResourceMetrics  1 resource (Resource: 1 attributes, KeyValue repeated), 2 scope_metrics
    ScopeMetrics     2 metrics (Metric, repeated)
    Metric           1 name, 5 gauge (Gauge: 1 data_points), 7 sum (Sum: 1 data_points,
                     2 aggregation_temporality, 3 is_monotonic); histograms, summaries: skipped
    NumberDataPoint  7 attributes (KeyValue), 3 time_unix_nano (fixed64), 4 as_double
                     (double), 6 as_int (sfixed64)
    KeyValue         1 key, 2 value (AnyValue: 1 string, 2 bool, 3 int, 4 double; others as
                     their bytes' hex)

The protobuf wire format: each field a varint key (field number << 3 | wire type), then a
varint (0), 8 bytes (1), a varint length and that many bytes (2) or 4 bytes (5). Unknown
fields are skipped; a malformed message is `OtlpError` saying where.
"""

from __future__ import annotations

import dataclasses
import struct

TEMPORALITY_DELTA, TEMPORALITY_CUMULATIVE = 1, 2


class OtlpError(ValueError):
    pass


@dataclasses.dataclass
class DataPoint:
    metric: str  # the metric's name
    kind: str  # "gauge" or "sum"
    value: float
    attributes: dict[str, str]  # the point's and its resource's (the point's win)
    monotonic: bool = False  # a sum's is_monotonic
    delta: bool = False  # a sum's aggregation temporality is DELTA
    time_unix_nano: int = 0


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise OtlpError(f"varint cut short at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise OtlpError(f"varint longer than 10 bytes at byte {pos}")


def _fields(buf: bytes, start: int, end: int):
    """(field number, wire type, value) of each field in buf[start:end]: an int for wire
    types 0, 1 and 5 (the raw bits), (start, end) of the bytes for type 2."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos, end)
        elif wire == 1:
            if pos + 8 > end:
                raise OtlpError(f"field {number}: 8 bytes wanted at byte {pos}, {end - pos} left")
            value = int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wire == 5:
            if pos + 4 > end:
                raise OtlpError(f"field {number}: 4 bytes wanted at byte {pos}, {end - pos} left")
            value = int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        elif wire == 2:
            n, pos = _varint(buf, pos, end)
            if pos + n > end:
                raise OtlpError(f"field {number}: {n} bytes wanted at byte {pos}, {end - pos} left")
            value = (pos, pos + n)
            pos += n
        else:
            raise OtlpError(f"field {number}: wire type {wire} at byte {pos} is not supported")
        yield number, wire, value


def _text(buf: bytes, span: tuple[int, int]) -> str:
    return bytes(buf[span[0] : span[1]]).decode("utf-8", "replace")


def _double(bits: int) -> float:
    return struct.unpack("<d", bits.to_bytes(8, "little"))[0]


def _signed64(bits: int) -> int:
    return bits - (1 << 64) if bits >= 1 << 63 else bits


def _any_value(buf: bytes, span: tuple[int, int]) -> str:
    for number, wire, v in _fields(buf, *span):
        if number == 1 and wire == 2:
            return _text(buf, v)
        if number == 2 and wire == 0:
            return "true" if v else "false"
        if number == 3 and wire == 0:
            return str(_signed64(v))
        if number == 4 and wire == 1:
            return repr(_double(v))
        if wire == 2:
            return bytes(buf[v[0] : v[1]]).hex()
    return ""


def _key_value(buf: bytes, span: tuple[int, int]) -> tuple[str, str]:
    key, value = "", ""
    for number, wire, v in _fields(buf, *span):
        if number == 1 and wire == 2:
            key = _text(buf, v)
        elif number == 2 and wire == 2:
            value = _any_value(buf, v)
    return key, value


def _number_point(buf: bytes, span: tuple[int, int]) -> tuple[float | None, dict[str, str], int]:
    value: float | None = None
    attributes: dict[str, str] = {}
    when = 0
    for number, wire, v in _fields(buf, *span):
        if number == 4 and wire == 1:
            value = _double(v)
        elif number == 6 and wire == 1:
            value = float(_signed64(v))
        elif number == 7 and wire == 2:
            k, val = _key_value(buf, v)
            attributes[k] = val
        elif number == 3 and wire == 1:
            when = v
    return value, attributes, when


def _metric(buf: bytes, span: tuple[int, int], resource: dict[str, str], out: list[DataPoint]) -> None:
    name = ""
    bodies = []
    for number, wire, v in _fields(buf, *span):
        if number == 1 and wire == 2:
            name = _text(buf, v)
        elif number in (5, 7) and wire == 2:
            bodies.append((number, v))
    for number, body in bodies:
        points, temporality, monotonic = [], 0, False
        for n, wire, v in _fields(buf, *body):
            if n == 1 and wire == 2:
                points.append(v)
            elif n == 2 and wire == 0:
                temporality = v
            elif n == 3 and wire == 0:
                monotonic = bool(v)
        for p in points:
            value, attributes, when = _number_point(buf, p)
            if value is None:
                continue
            out.append(
                DataPoint(
                    name,
                    "gauge" if number == 5 else "sum",
                    value,
                    {**resource, **attributes},
                    monotonic=monotonic,
                    delta=temporality == TEMPORALITY_DELTA,
                    time_unix_nano=when,
                )
            )


def decode_metrics_data(buf: bytes) -> list[DataPoint]:
    """Every gauge and sum data point of an OTLP MetricsData message."""
    out: list[DataPoint] = []
    for number, wire, rm in _fields(buf, 0, len(buf)):
        if number != 1 or wire != 2:
            continue
        resource: dict[str, str] = {}
        scopes = []
        for n, w, v in _fields(buf, *rm):
            if n == 1 and w == 2:
                for n2, w2, kv in _fields(buf, *v):
                    if n2 == 1 and w2 == 2:
                        k, val = _key_value(buf, kv)
                        resource[k] = val
            elif n == 2 and w == 2:
                scopes.append(v)
        for scope in scopes:
            for n, w, m in _fields(buf, *scope):
                if n == 2 and w == 2:
                    _metric(buf, m, resource, out)
    return out


# --- writing: the same messages, for tests and tools -----------------------------------------


def _put_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(number: int, body: bytes) -> bytes:
    return _put_varint(number << 3 | 2) + _put_varint(len(body)) + body


def _kv(key: str, value: str) -> bytes:
    return _len_field(1, key.encode()) + _len_field(2, _len_field(1, value.encode()))


def encode_metrics_data(points: list[DataPoint], resource: dict[str, str] | None = None) -> bytes:
    """A MetricsData of one resource and one scope holding `points`, one Metric each."""
    metrics = b""
    for p in points:
        point = b"".join(_len_field(7, _kv(k, v)) for k, v in p.attributes.items())
        point += _put_varint(3 << 3 | 1) + p.time_unix_nano.to_bytes(8, "little")
        point += _put_varint(4 << 3 | 1) + struct.pack("<d", p.value)
        if p.kind == "gauge":
            body = _len_field(5, _len_field(1, point))
        else:
            inner = (
                _len_field(1, point)
                + _put_varint(2 << 3)
                + _put_varint(TEMPORALITY_DELTA if p.delta else TEMPORALITY_CUMULATIVE)
                + _put_varint(3 << 3)
                + _put_varint(int(p.monotonic))
            )
            body = _len_field(7, inner)
        metrics += _len_field(2, _len_field(1, p.metric.encode()) + body)
    res = b"".join(_len_field(1, _kv(k, v)) for k, v in (resource or {}).items())
    return _len_field(1, _len_field(1, res) + _len_field(2, metrics))
