"""Client telemetry (KIP-714), as Kafka's ClientMetricsManager: which metrics each client
pushes and how often (GetTelemetrySubscriptions, 71), and what it pushed (PushTelemetry, 72),
kept for the metrics endpoint.

Subscriptions are the client-metrics config resources of the metadata image
(common/client_metrics.py); whenever they change every client instance's subscription is
worked out again at its next request. A client asks first with the zero client instance id
and is given a random one. Its subscription is the union of the `metrics` of every
subscription whose `match` selects it (client_instance_id, client_id, client_software_name and
_version from its ApiVersions, client_source_address and _port), "*" alone when one of them
asks for all; the push interval is the smallest `interval.ms` of those (300000 without one);
the subscription id is a CRC-32C of the sorted metrics and the interval xor the instance id's
hash (Kafka's formula, with the metrics sorted so that every broker gives the same id). No
matching subscription: no metrics, and the client pushes nothing.

A push is refused, in Kafka's order and words: an instance that said it was terminating
(INVALID_REQUEST), a push sooner than the interval after the last one unless a
GetTelemetrySubscriptions came in between (THROTTLING_QUOTA_EXCEEDED), a stale subscription
id (UNKNOWN_SUBSCRIPTION_ID: the client asks again), an unknown compression type
(UNSUPPORTED_COMPRESSION_TYPE), more than `telemetry.max.bytes` (TELEMETRY_TOO_LARGE); a
payload that does not decompress or decode as OTLP MetricsData is INVALID_RECORD (Kafka's
answer when its receiver fails). GetTelemetrySubscriptions sooner than the interval after the
last request is THROTTLING_QUOTA_EXCEEDED, unless the subscriptions changed or the last push
failed with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE.

Pushed data points (broker/otlp.py) are kept per client instance and shown on the metrics
endpoint as `kafka_client_<metric name, every character outside [a-zA-Z0-9_] as _>` with the
point's attributes and `client_instance_id` (Kafka's printed Uuid) and `client_id` as labels:
a gauge's last value; a monotonic sum as a counter (DELTA points added up, CUMULATIVE ones as
sent); another sum as a gauge. A client's metrics go three push intervals after its last
push. An instance is forgotten when its connection closes or after max(60 s, 3 intervals)
without a request, as Kafka's cache.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import re
import time
import uuid

from logbroker import _core
from logbroker.broker.otlp import DataPoint, OtlpError, decode_metrics_data
from logbroker.common import client_metrics
from logbroker.common.directory_id import text as uuid_text
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.telemetry")

# CompressionType ids the broker decompresses, in Kafka's order of preference
ACCEPTED_COMPRESSION = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CACHE_MAX = 16384  # client instances kept (Kafka's CACHE_MAX_SIZE)
CACHE_EXPIRY_MS = 60_000
SERIES_MAX = 10_000  # data series kept per client instance
DECOMPRESSED_MAX_FACTOR = 64  # a push may expand to at most this times telemetry.max.bytes
RESERVED_IDS = (uuid.UUID(int=0), uuid.UUID(int=1))  # Kafka's Uuid.RESERVED: zero, metadata topic, one
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(otlp_name: str) -> str:
    """The metrics endpoint's name of a client metric."""
    return "kafka_client_" + _NAME_CHARS.sub("_", otlp_name)


def label_name(key: str) -> str:
    """A data point attribute's label name (Prometheus: [a-zA-Z_][a-zA-Z0-9_]*, "__" reserved)."""
    name = _NAME_CHARS.sub("_", key) or "_"
    if name[0].isdigit():
        name = "_" + name
    return "attr" + name if name.startswith("__") else name


def _uuid_hash(u: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode: the two longs xor-ed, then the two halves of that."""
    h = (u.int >> 64) ^ (u.int & (2**64 - 1))
    return ((h >> 32) ^ h) & 0xFFFFFFFF


def subscription_id(metrics: list[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    text = "[" + ", ".join(sorted(metrics)) + "]" + str(interval_ms)
    v = _core.crc32c(text.encode()) ^ _uuid_hash(instance_id)
    return v - 2**32 if v >= 2**31 else v


@dataclasses.dataclass
class ClientInfo:
    """What the broker knows of the client sending a request (the selectors' values)."""

    client_id: str
    software_name: str | None
    software_version: str | None
    address: str | None
    port: str | None
    connection: int | None = None

    @classmethod
    def of(cls, ctx) -> ClientInfo:
        conn = ctx.connection or {}
        host, _, port = ctx.peer.rpartition(":")
        return cls(
            ctx.header.client_id or "",
            conn.get("client_software_name"),
            conn.get("client_software_version"),
            host.strip("[]") or None,
            port or None,
            conn.get("id"),
        )


@dataclasses.dataclass
class ClientInstance:
    instance_id: uuid.UUID
    attributes: dict[str, str | None]
    version: int  # the subscriptions' version it was worked out at
    metrics: list[str]
    interval_ms: int
    subscription_id: int
    last_get_ms: float = 0.0
    last_push_ms: float = 0.0
    last_error: int = ErrorCode.NONE
    terminating: bool = False
    expires_ms: float = 0.0


@dataclasses.dataclass
class ClientSeries:
    """What one client instance pushed: (metric, labels) -> [kind, value]."""

    client_id: str
    expires_ms: float
    values: dict[tuple[str, tuple[tuple[str, str], ...]], list] = dataclasses.field(default_factory=dict)


class ClientTelemetryManager:
    def __init__(self, max_bytes: int, clock=time.monotonic) -> None:
        self.max_bytes = max_bytes
        self.clock = clock
        self.instances: collections.OrderedDict[uuid.UUID, ClientInstance] = collections.OrderedDict()
        self.connections: dict[int, uuid.UUID] = {}
        self.series: dict[uuid.UUID, ClientSeries] = {}
        self._source: dict | None = None
        self._configs: dict[str, dict[str, str]] = {}
        self.subscriptions: dict[str, client_metrics.Subscription] = {}
        self.version = 0

    def _now_ms(self) -> float:
        return self.clock() * 1000.0

    # --- subscriptions ------------------------------------------------------------------

    def update_subscriptions(self, configs: dict[str, dict[str, str]]) -> None:
        """The image's client-metrics resources; a change bumps the version, so every
        instance's subscription is worked out again at its next request."""
        if configs is self._source:
            return
        self._source = configs
        if configs == self._configs:
            return
        subs = {}
        for name, c in configs.items():
            try:
                subs[name] = client_metrics.Subscription.from_configs(name, c)
            except client_metrics.ClientMetricsConfigError as e:  # checked when set: only an old log could
                log.warning("client-metrics subscription %s ignored: %s", name, e.message)
        self._configs = {n: dict(c) for n, c in configs.items()}
        self.subscriptions = subs
        self.version += 1
        log.info("client-metrics subscriptions now %s (version %d)", sorted(subs) or "none", self.version)

    def _work_out(self, instance_id: uuid.UUID, attributes: dict[str, str | None]) -> ClientInstance:
        metrics: set[str] = set()
        interval = client_metrics.DEFAULT_INTERVAL_MS
        everything = False
        for sub in self.subscriptions.values():
            if sub.matches(attributes):
                everything = everything or client_metrics.ALL_METRICS in sub.metrics
                metrics |= sub.metrics
                interval = min(interval, sub.interval_ms)
        chosen = [client_metrics.ALL_METRICS] if everything else sorted(metrics)
        return ClientInstance(
            instance_id, attributes, self.version, chosen, interval, subscription_id(chosen, interval, instance_id)
        )

    def _instance(self, instance_id: uuid.UUID, client: ClientInfo, now: float) -> ClientInstance:
        self._expire(now)
        inst = self.instances.get(instance_id)
        if inst is None or inst.version < self.version:
            attributes = (
                inst.attributes
                if inst is not None
                else {
                    "client_instance_id": uuid_text(instance_id),
                    "client_id": client.client_id,
                    "client_software_name": client.software_name,
                    "client_software_version": client.software_version,
                    "client_source_address": client.address,
                    "client_source_port": client.port,
                }
            )
            inst = self._work_out(instance_id, attributes)
            self.instances[instance_id] = inst
            while len(self.instances) > CACHE_MAX:
                self.instances.popitem(last=False)
        self.instances.move_to_end(instance_id)
        if client.connection is not None:
            self.connections[client.connection] = instance_id
        inst.expires_ms = now + max(CACHE_EXPIRY_MS, 3 * inst.interval_ms)
        return inst

    def _expire(self, now: float) -> None:
        for iid in [i for i, inst in self.instances.items() if inst.expires_ms and inst.expires_ms < now]:
            del self.instances[iid]
        for iid in [i for i, s in self.series.items() if s.expires_ms < now]:
            del self.series[iid]

    def connection_closed(self, connection: int) -> None:
        """Kafka forgets a client instance when its connection closes (its pushed metrics stay
        until they expire)."""
        iid = self.connections.pop(connection, None)
        if iid is not None:
            self.instances.pop(iid, None)

    # --- the two APIs -------------------------------------------------------------------

    def get_subscriptions(self, requested: uuid.UUID, client: ClientInfo, configs: dict[str, dict[str, str]]):
        """GetTelemetrySubscriptions: (error, message, instance id, ClientInstance)."""
        self.update_subscriptions(configs)
        now = self._now_ms()
        instance_id = requested
        if instance_id == RESERVED_IDS[0]:
            instance_id = uuid.uuid4()
            while instance_id in self.instances or instance_id in RESERVED_IDS:
                instance_id = uuid.uuid4()
        inst = self._instance(instance_id, client, now)
        if (
            max(inst.last_get_ms, inst.last_push_ms)
            and now - max(inst.last_get_ms, inst.last_push_ms) < inst.interval_ms
            and inst.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        ):
            return (
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"Request from the client [{uuid_text(requested)}] arrived before the next push interval time",
                instance_id,
                inst,
            )
        inst.last_get_ms = now
        inst.last_error = ErrorCode.NONE
        return ErrorCode.NONE, None, instance_id, inst

    def push(self, request, client: ClientInfo, configs: dict[str, dict[str, str]]) -> tuple[int, str | None]:
        """PushTelemetry: (error, message); the metrics pushed are kept for the endpoint."""
        self.update_subscriptions(configs)
        iid = request.client_instance_id
        name = uuid_text(iid)
        if iid in RESERVED_IDS:
            return ErrorCode.INVALID_REQUEST, f"Invalid request from the client [{name}], invalid client instance id"
        now = self._now_ms()
        inst = self._instance(iid, client, now)
        code, message = self._check_push(request, inst, name, now)
        inst.terminating = request.terminating
        if code:
            inst.last_error = code
            log.debug(
                "PushTelemetry from %s (client id %r) refused: %s",
                client.address,
                client.client_id,
                message,
                extra=fields(peer=f"{client.address}:{client.port}"),
            )
            return code, message
        metrics = request.metrics
        if metrics:
            try:
                raw = _core.decompress(
                    CODECS[request.compression_type], metrics, self.max_bytes * DECOMPRESSED_MAX_FACTOR
                )
                points = decode_metrics_data(raw)
            except (ValueError, OtlpError) as e:
                inst.last_error = ErrorCode.INVALID_RECORD
                log.warning(
                    "PushTelemetry from client instance %s (client id %r, %s): %d bytes of %s do not decode: %s",
                    name,
                    client.client_id,
                    client.address,
                    len(metrics),
                    CODECS[request.compression_type],
                    e,
                )
                return ErrorCode.INVALID_RECORD, f"the metrics of client instance {name} do not decode: {e}"
            self._record(iid, client.client_id, points, now + 3 * inst.interval_ms)
        inst.last_error = ErrorCode.NONE
        return ErrorCode.NONE, None

    def _check_push(self, request, inst: ClientInstance, name: str, now: float) -> tuple[int, str | None]:
        if inst.terminating:
            return (
                ErrorCode.INVALID_REQUEST,
                f"Client [{name}] sent the previous request with state terminating to "
                "TRUE, can not accept any requests after that",
            )
        # a push right after GetTelemetrySubscriptions is accepted whenever it comes (clients
        # add jitter to the interval); otherwise one per interval
        if inst.last_get_ms > inst.last_push_ms or not inst.last_push_ms or now - inst.last_push_ms >= inst.interval_ms:
            inst.last_push_ms = now
        elif not request.terminating:
            return (
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"Request from the client [{name}] arrived before the next push interval time",
            )
        if request.subscription_id != inst.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID, f"Unknown client subscription id for the client [{name}]"
        if request.compression_type not in CODECS:
            return (
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                f"Unknown compression type [{request.compression_type}] is received in telemetry request from [{name}]",
            )
        if request.metrics is not None and len(request.metrics) > self.max_bytes:
            return (
                ErrorCode.TELEMETRY_TOO_LARGE,
                f"Telemetry request from [{name}] is larger than the maximum allowed size [{self.max_bytes}]",
            )
        return ErrorCode.NONE, None

    def _record(self, iid: uuid.UUID, client_id: str, points: list[DataPoint], expires_ms: float) -> None:
        series = self.series.get(iid)
        if series is None:
            series = self.series[iid] = ClientSeries(client_id, expires_ms)
        series.client_id, series.expires_ms = client_id, expires_ms
        for p in points:
            labels = {label_name(k): v for k, v in p.attributes.items()}
            labels["client_instance_id"] = uuid_text(iid)
            labels["client_id"] = client_id
            key = (metric_name(p.metric), tuple(sorted(labels.items())))
            kind = "counter" if p.kind == "sum" and p.monotonic else "gauge"
            entry = series.values.get(key)
            if entry is None:
                if len(series.values) >= SERIES_MAX:
                    continue
                series.values[key] = [kind, p.value]
            elif p.kind == "sum" and p.delta:
                entry[1] += p.value
            else:
                entry[1] = p.value

    def samples(self) -> list[tuple[str, str, dict[str, str], float]]:
        """(name, kind, labels, value) of every client metric not expired, by name."""
        self._expire(self._now_ms())
        out = []
        for series in self.series.values():
            for (name, labels), (kind, value) in series.values.items():
                out.append((name, kind, dict(labels), value))
        out.sort(key=lambda s: s[0])
        return out
