"""The metrics endpoint: Prometheus text exposition (format 0.0.4) over HTTP on
`metrics.listen` (HOST:PORT; empty, the default, serves none; broker/http.py's server, one
request per connection). `GET /metrics` answers the
current values; everything is computed at scrape time, nothing is sampled in between.

Names follow Kafka's JMX names the way the Prometheus JMX exporter writes them: domain, type
and name lowercased and joined with `_`, meters as counters ending in `_total` (the scraper
takes rates), e.g. kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=T ->
`kafka_server_brokertopicmetrics_bytesinpersec_total{topic="T",partition="0"}`. Where Kafka
has no such metric the name starts with `logbroker_` (or follows a common exporter:
`kafka_consumergroup_lag`, and the standard `process_*` metrics).

Sources: the data path's counters (bytes and records per partition, requests and their
times per API, rust/src/server/metrics.rs), the logs (size, segments, offsets), the
replica manager and replication (ISR state, ISR changes), the controller (elections,
offline partitions, on the active controller only as in Kafka), the group coordinator
(consumer-group lag of the groups it coordinates: the partition's HW less the committed
offset, the HW read from each partition's leader, broker/end_offsets.py) and /proc (CPU,
memory, file descriptors), the client quotas (responses throttled and their total throttle
time, per quota type), and the metrics clients push (KIP-714, broker/client_telemetry.py:
`kafka_client_<metric>{client_instance_id=...,client_id=...,...}`).
"""

from __future__ import annotations

import logging
import os
import time

import trio

from logbroker._core import NetworkServer
from logbroker.broker.end_offsets import end_offsets
from logbroker.broker.http import HttpError, HttpServer, Request, Response, text_response
from logbroker.broker.http_basic_auth import BasicAuth, Unauthenticated
from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.broker_channel import BrokerChannel
from logbroker.coord.peer_security import inter_broker_security
from logbroker.protocol import API_NAMES

log = logging.getLogger("logbroker.metrics")

MAX_BODY_BYTES = 8192  # GET only: nothing to read, but a client's stray body is skipped
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: dict[str, object]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items()) + "}"


def _number(v: float) -> str:
    if v == float("inf"):
        return "+Inf"
    if isinstance(v, int) or float(v).is_integer():
        return str(int(v))
    return repr(float(v))


class Exposition:
    """Prometheus text, one metric family at a time (HELP and TYPE once per name)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._declared: set[str] = set()

    def family(self, name: str, kind: str, help_text: str) -> None:
        if name not in self._declared:
            self._declared.add(name)
            self.lines.append(f"# HELP {name} {help_text}")
            self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, value: float, labels: dict[str, object] | None = None) -> None:
        self.lines.append(f"{name}{_labels(labels or {})} {_number(value)}")

    def one(self, name: str, kind: str, help_text: str, value: float, labels: dict[str, object] | None = None) -> None:
        self.family(name, kind, help_text)
        self.sample(name, value, labels)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class MetricsServer:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.channel = BrokerChannel(broker.node_id, inter_broker_security(broker.config))
        self.started = time.time()
        self.address: tuple[str, int] | None = None
        self.http = HttpServer(self._handle, "metrics", max_body=MAX_BODY_BYTES, keep_alive=False)
        # metrics.authentication.method=BASIC: the scraper's user (None: anyone), and with an
        # authorizer authorize(principal, host, resource type, name, operation)
        self.auth: BasicAuth | None = None
        self.authorize = None

    # --- collecting ----------------------------------------------------------------------

    async def collect(self) -> str:
        out = Exposition()
        b = self.broker
        self._requests(out, b.server.net)
        self._partitions(out, b.partition_table)
        self._quotas(out, b.partition_table)
        if b.replicas is not None:
            self._replication(out, b.replicas)
            self._remote(out, b.replicas)
        if b.controller is not None:
            self._controller(out, b.controller)
        if b.groups is not None and b.controller is not None and b.replicas is not None:
            await self._group_lag(out, b.groups, b.controller, b.replicas)
        self._process(out)
        telemetry = getattr(b, "client_telemetry", None)
        if telemetry is not None:
            self._client_metrics(out, telemetry)
        return out.text()

    @staticmethod
    def _client_metrics(out: Exposition, telemetry) -> None:
        """The metrics clients pushed (PushTelemetry), each named by its OTLP name."""
        for name, kind, labels, value in telemetry.samples():
            out.family(name, kind, "Client metric pushed by the client (KIP-714)")
            out.sample(name, value, labels)

    @staticmethod
    def _requests(out: Exposition, net: NetworkServer | None) -> None:
        if net is None:
            return
        stats = net.stats()
        out.one(
            "kafka_server_socketservermetrics_connectioncount",
            "gauge",
            "Open client connections.",
            stats["connections"],
        )
        out.one(
            "kafka_server_fetchsessioncache_numincrementalfetchsessions",
            "gauge",
            "Incremental fetch sessions (KIP-227) open, of consumers and followers.",
            stats["fetch_sessions"],
        )
        out.one(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "gauge",
            "Partitions held by the incremental fetch sessions, all together.",
            stats["fetch_session_partitions"],
        )
        bounds = NetworkServer.latency_buckets_ms()
        rows = net.request_stats()
        out.family(
            "kafka_network_requestmetrics_requestspersec_total",
            "counter",
            "Requests answered, by API (Kafka's RequestsPerSec).",
        )
        for key, count, _total, _b in rows:
            out.sample(
                "kafka_network_requestmetrics_requestspersec_total", count, {"request": API_NAMES.get(key, str(key))}
            )
        name = "kafka_network_requestmetrics_totaltimems"
        out.family(
            name,
            "histogram",
            "Time from a request's last byte read to its response queued, in "
            "milliseconds, by API (Kafka's TotalTimeMs).",
        )
        for key, count, total, buckets in rows:
            request = API_NAMES.get(key, str(key))
            for bound, n in zip([*bounds, float("inf")], buckets):
                out.sample(f"{name}_bucket", n, {"request": request, "le": _number(bound)})
            out.sample(f"{name}_sum", total, {"request": request})
            out.sample(f"{name}_count", count, {"request": request})

    @staticmethod
    def _partitions(out: Exposition, table) -> None:
        rows = sorted(table.partition_stats())
        counters = [
            ("kafka_server_brokertopicmetrics_bytesinpersec_total", 3, "Bytes appended by producers."),
            ("kafka_server_brokertopicmetrics_messagesinpersec_total", 4, "Records appended by producers."),
            ("kafka_server_brokertopicmetrics_bytesoutpersec_total", 5, "Bytes sent to consumers."),
            ("kafka_server_brokertopicmetrics_replicationbytesoutpersec_total", 6, "Bytes sent to followers."),
        ]
        for name, i, help_text in counters:
            out.family(name, "counter", help_text + " Per partition hosted here.")
            for row in rows:
                out.sample(name, row[i], {"topic": row[0], "partition": row[1]})
        gauges = [
            ("kafka_log_log_size", 7, "Bytes of the partition's log on disk."),
            ("kafka_log_log_numlogsegments", 8, "Segments of the partition's log."),
            ("kafka_log_log_logstartoffset", 9, "The log start offset."),
            ("kafka_log_log_logendoffset", 10, "The log end offset (LEO)."),
            ("logbroker_log_highwatermark", 11, "The high watermark."),
        ]
        for name, i, help_text in gauges:
            out.family(name, "gauge", help_text)
            for row in rows:
                out.sample(name, row[i], {"topic": row[0], "partition": row[1]})

    @staticmethod
    def _quotas(out: Exposition, table) -> None:
        stats = table.client_quotas.stats()
        for name, key, help_text in [
            ("logbroker_quota_throttled_total", "throttled", "Responses throttled by a client quota (KIP-13/55/124)."),
            (
                "logbroker_quota_throttle_time_ms_total",
                "throttle_ms",
                "Total throttle time of those responses, milliseconds.",
            ),
        ]:
            out.family(
                name,
                "counter",
                help_text + " By quota type: produce (producer_byte_rate), fetch (consumer_byte_rate),"
                " request (request_percentage).",
            )
            for kind in ("produce", "fetch", "request"):
                out.sample(name, stats[f"{kind}_{key}"], {"quota": kind})

    @staticmethod
    def _replication(out: Exposition, replicas) -> None:
        parts = list(replicas.partitions.values())
        led = [p for p in parts if p.is_leader and not p.deleted]
        out.one("kafka_server_replicamanager_partitioncount", "gauge", "Partitions hosted here.", len(parts))
        out.one("kafka_server_replicamanager_leadercount", "gauge", "Partitions led here.", len(led))
        out.one(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "gauge",
            "Partitions led here whose ISR is smaller than their replica set.",
            sum(len(p.isr) < len(p.replicas) for p in led),
        )
        out.one(
            "kafka_server_replicamanager_underminisrpartitioncount",
            "gauge",
            "Partitions led here whose ISR is below min.insync.replicas.",
            sum(len(p.isr) < p.min_insync_replicas for p in led),
        )
        replication = replicas.replication
        out.one(
            "kafka_server_replicamanager_isrshrinkspersec_total",
            "counter",
            "ISR shrinks this broker had committed as a leader.",
            replication.isr_shrinks,
        )
        out.one(
            "kafka_server_replicamanager_isrexpandspersec_total",
            "counter",
            "ISR expansions this broker had committed as a leader.",
            replication.isr_expands,
        )

    @staticmethod
    def _remote(out: Exposition, replicas) -> None:
        """Tiered storage (Kafka's remote-storage metrics of BrokerTopicMetrics): copy and
        fetch totals of this broker, and per partition led here the copy lag and the bytes
        and segments in remote storage; the reader's caches."""
        rlm = replicas.remote
        if rlm.storage is None:
            return
        st = rlm.stats()
        for name, key, what in (
            ("remotecopybytespersec", "copy_bytes", "Bytes copied to remote storage."),
            ("remotecopyrequestspersec", "copy_segments", "Segments copied to remote storage."),
            ("remotecopyerrorspersec", "copy_errors", "Segment copies that failed."),
            ("remotefetchbytespersec", "fetch_bytes", "Bytes served to consumers from remote storage."),
            ("remotefetchrequestspersec", "fetch_requests", "Partition reads served from remote storage."),
            ("remotefetcherrorspersec", "fetch_errors", "Partition reads from remote storage that failed."),
        ):
            out.one(f"kafka_server_brokertopicmetrics_{name}_total", "counter", what, st[key])
        for kind in ("chunk", "index"):
            out.one(
                f"logbroker_remote_{kind}_cache_bytes",
                "gauge",
                f"Bytes in the remote reader's {kind} cache.",
                st[f"{kind}_cache_bytes"],
            )
        out.one(
            "logbroker_remote_cache_hits_total", "counter", "Remote reads served from the caches.", st["cache_hits"]
        )
        out.one("logbroker_remote_cache_misses_total", "counter", "Remote reads that had to GET.", st["cache_misses"])
        out.one(
            "logbroker_remote_fetch_throttled_total",
            "counter",
            "Partition reads from remote storage skipped: remote.log.manager.fetch.max.bytes.per.second used up.",
            st["fetch_throttled"],
        )
        rows = [
            (p, rlm.lag.get((p.topic, p.index), (0, 0)), rlm.remote_size(p))
            for p in list(replicas.partitions.values())
            if p.is_leader and not p.deleted and rlm.tiered(p.topic)
        ]
        for name, what, value in (
            ("remotecopylagbytes", "Bytes rolled below the last stable offset and not yet copied.", lambda r: r[1][0]),
            (
                "remotecopylagsegments",
                "Segments rolled below the last stable offset and not yet copied.",
                lambda r: r[1][1],
            ),
            ("remotelogsizebytes", "Bytes of this partition in remote storage.", lambda r: r[2][0]),
            ("remotelogmetadatacount", "Segments of this partition in remote storage.", lambda r: r[2][1]),
        ):
            out.family(f"kafka_server_brokertopicmetrics_{name}", "gauge", what)
            for r in rows:
                out.sample(
                    f"kafka_server_brokertopicmetrics_{name}", value(r), {"topic": r[0].topic, "partition": r[0].index}
                )

    @staticmethod
    def _controller(out: Exposition, controller) -> None:
        active = controller.is_active
        image = controller.image
        out.one(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "gauge",
            "1 on the active controller, else 0.",
            int(active),
        )
        partitions = [ps for t in image.topics.values() for ps in t.partitions.values()] if active else []
        out.one(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "gauge",
            "Partitions without a leader (on the active controller).",
            sum(ps.leader < 0 for ps in partitions),
        )
        out.one(
            "kafka_controller_kafkacontroller_globalpartitioncount",
            "gauge",
            "Partitions in the cluster (on the active controller).",
            len(partitions),
        )
        out.one(
            "kafka_controller_kafkacontroller_globaltopiccount",
            "gauge",
            "Topics in the cluster (on the active controller).",
            len(image.topics) if active else 0,
        )
        out.one(
            "kafka_controller_controllerstats_leaderelectionrateandtimems_total",
            "counter",
            "Leader elections this node decided as the active controller.",
            controller.leader_elections,
        )
        out.one(
            "kafka_controller_controllerstats_uncleanleaderelectionspersec_total",
            "counter",
            "Unclean leader elections this node decided as the active controller.",
            controller.unclean_leader_elections,
        )
        out.one(
            "logbroker_controller_alterpartition_requests_total",
            "counter",
            "AlterPartition requests (ISR changes) this node handled as the active controller, its own "
            "broker's included.",
            controller.alter_partition_requests,
        )
        out.one(
            "logbroker_controller_alterpartition_partitions_total",
            "counter",
            "Partitions named by those AlterPartition requests.",
            controller.alter_partition_partitions,
        )

    async def _group_lag(self, out: Exposition, groups, controller, replicas) -> None:
        committed: list[tuple[str, str, int, int]] = []
        for gid, group in sorted(groups.groups.items()):
            for (topic, partition), meta in sorted(group.offsets.items()):
                committed.append((gid, topic, partition, meta.offset))
        name, offset_name = "kafka_consumergroup_lag", "kafka_consumergroup_current_offset"
        out.family(offset_name, "gauge", "A consumer group's committed offset (groups coordinated here).")
        out.family(
            name,
            "gauge",
            "A consumer group's lag: the partition's high watermark less its committed "
            "offset (groups coordinated here; -1 when the HW cannot be read).",
        )
        if not committed:
            return
        ends: dict[tuple[str, int], int] = {}
        with trio.move_on_after(5):
            ends = await end_offsets(
                self.channel, controller, replicas, self.broker.node_id, sorted({(t, p) for _, t, p, _ in committed})
            )
        for gid, topic, partition, offset in committed:
            labels = {"group": gid, "topic": topic, "partition": partition}
            out.sample(offset_name, offset, labels)
        for gid, topic, partition, offset in committed:
            end = ends.get((topic, partition), -1)
            out.sample(
                name, max(0, end - offset) if end >= 0 else -1, {"group": gid, "topic": topic, "partition": partition}
            )

    def _process(self, out: Exposition) -> None:
        ticks = os.sysconf("SC_CLK_TCK")
        page = os.sysconf("SC_PAGE_SIZE")
        try:
            with open("/proc/self/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open("/proc/self/statm") as f:
                vm_pages, rss_pages = (int(x) for x in f.read().split()[:2])
            fds = len(os.listdir("/proc/self/fd"))
        except OSError as e:
            log.debug("process metrics unavailable: %s", e)
            return
        # fields[0] is the state (field 3); utime and stime are fields 14 and 15
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        out.one("process_cpu_seconds_total", "counter", "User and system CPU time of the broker process.", cpu)
        out.one("process_resident_memory_bytes", "gauge", "Resident memory of the broker process.", rss_pages * page)
        out.one("process_virtual_memory_bytes", "gauge", "Virtual memory of the broker process.", vm_pages * page)
        out.one("process_open_fds", "gauge", "Open file descriptors of the broker process.", fds)
        out.one("process_start_time_seconds", "gauge", "When the broker started (Unix time).", self.started)

    # --- serving -------------------------------------------------------------------------

    async def serve(self, host: str, port: int, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self.address = await nursery.start(self.http.serve, host, port)
                log.info("metrics on http://%s:%d/metrics", *self.address)
                task_status.started(self.address)
        finally:
            await self.channel.aclose()

    async def _handle(self, request: Request) -> Response:
        if request.method != "GET":
            raise HttpError(405, "GET only")
        if self.auth is not None:
            try:
                principal = self.auth.principal(request.headers, request.peer)
            except Unauthenticated as e:
                return Response(401, f"{e}\n".encode(), headers={"WWW-Authenticate": 'Basic realm="metrics"'})
            if self.authorize is not None and not self.authorize(
                principal, request.peer, Res.CLUSTER, CLUSTER_NAME, Op.DESCRIBE
            ):
                return Response(
                    403, f"{principal} may not DESCRIBE the cluster, which reading metrics needs\n".encode()
                )
        if request.path == "/metrics":
            return Response(200, (await self.collect()).encode(), CONTENT_TYPE)
        if request.path == "/":
            return text_response("logbroker: metrics at /metrics\n")
        raise HttpError(404, "not found")
