"""Client metrics (KIP-714) and ListConfigResources (KIP-1142): client-metrics subscriptions
(CLIENT_METRICS config resources, type 16) set, checked, described, listed and deleted, kept
in the metadata log (a restart and every node see them); GetTelemetrySubscriptions and
PushTelemetry as Kafka's ClientMetricsManager; what clients push shown on the metrics
endpoint. Kafka's own kafka-client-metrics tool, the Java client and librdkafka against a
real broker on loopback."""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from conftest import kafka_configs, needs_java, wait_until
from rawclient import RawClient

from logbroker import Broker, Cluster
from logbroker.broker.otlp import DataPoint, decode_metrics_data, encode_metrics_data
from logbroker.common.directory_id import text as uuid_text
from logbroker.protocol import REQUESTS, ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

Describe, Alter, Incremental, ApiVersions = REQUESTS[32], REQUESTS[33], REQUESTS[44], REQUESTS[18]
ListConfigResources, GetSubscriptions, Push = REQUESTS[74], REQUESTS[71], REQUESTS[72]
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
CLIENT_METRICS_CONFIG, DEFAULT_CONFIG = 7, 5
ZERO = uuid.UUID(int=0)
TELEMETRY_CLIENT = str(Path(__file__).resolve().parent / "java" / "TelemetryClient.java")


def alter(c: RawClient, name: str, changes: dict, validate_only: bool = False):
    """IncrementalAlterConfigs on one subscription: {key: value | None (DELETE) | (op, value)}."""
    configs = []
    for k, v in changes.items():
        op, value = v if isinstance(v, tuple) else (DELETE, None) if v is None else (SET, v)
        configs.append(Incremental.AlterableConfig(name=k, config_operation=op, value=value))
    req = Incremental(
        resources=[Incremental.AlterConfigsResource(resource_type=CLIENT_METRICS, resource_name=name, configs=configs)],
        validate_only=validate_only,
    )
    return c.request(44, 1, req).responses[0]


def describe(c: RawClient, name: str, synonyms: bool = False):
    r = c.request(
        32,
        4,
        Describe(
            resources=[
                Describe.DescribeConfigsResource(
                    resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None
                )
            ],
            include_synonyms=synonyms,
            include_documentation=True,
        ),
    ).results[0]
    assert r.error_code == 0, r.error_message
    return {e.name: e for e in r.configs}


def values(c: RawClient, name: str) -> dict[str, tuple[str, int]]:
    return {k: (e.value, e.config_source) for k, e in describe(c, name).items()}


def listed(c: RawClient, version: int = 0, types: list[int] | None = None):
    r = c.request(74, version, ListConfigResources(resource_types=types or []))
    assert r.error_code == 0, r
    return [(e.resource_name, e.resource_type) for e in r.config_resources]


def subscribe(c: RawClient, name: str, metrics: str, interval_ms: int, match: str | None = None) -> None:
    changes = {"metrics": metrics, "interval.ms": str(interval_ms)}
    if match is not None:
        changes["match"] = match
    r = alter(c, name, changes)
    assert r.error_code == 0, r.error_message


def hello(c: RawClient, name: str = "logbroker-tests", version: str = "1.0") -> None:
    """ApiVersions v3 naming the client software (the selectors client_software_*)."""
    assert c.request(18, 3, ApiVersions(client_software_name=name, client_software_version=version)).error_code == 0


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def client_lines(text: str, instance: str | None = None, client_id: str | None = None) -> list[str]:
    out = []
    for line in text.splitlines():
        if not line.startswith("kafka_client_"):
            continue
        if instance is not None and f'client_instance_id="{instance}"' not in line:
            continue
        if client_id is not None and f'client_id="{client_id}"' not in line:
            continue
        out.append(line)
    return out


# --------------------------------------------------------------------------- configs


def test_subscriptions_set_checked_described_listed_deleted_and_kept(tmp_path):
    with Broker(data_dir=tmp_path / "d") as b, RawClient(b.bootstrap_servers) as c:
        assert listed(c) == []
        d = values(c, "none-yet")  # an unknown subscription: the defaults, as Kafka
        assert d == {
            "metrics": ("", DEFAULT_CONFIG),
            "interval.ms": ("300000", DEFAULT_CONFIG),
            "match": ("", DEFAULT_CONFIG),
        }
        assert (
            alter(
                c,
                "prod",
                {
                    "metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.fetch",
                    "interval.ms": "1000",
                    "match": "client_id=app-.*,client_software_name=java",
                },
            ).error_code
            == 0
        )
        full = describe(c, "prod", synonyms=True)
        assert (full["metrics"].value, full["metrics"].config_source, full["metrics"].config_type) == (
            "org.apache.kafka.producer.,org.apache.kafka.consumer.fetch",
            CLIENT_METRICS_CONFIG,
            7,
        )
        assert (full["interval.ms"].value, full["interval.ms"].config_type) == ("1000", 3)
        assert [(s.name, s.value, s.source) for s in full["interval.ms"].synonyms] == [
            ("interval.ms", "1000", CLIENT_METRICS_CONFIG)
        ]
        assert full["match"].value == "client_id=app-.*,client_software_name=java"
        assert full["interval.ms"].documentation == "Metrics push interval in milliseconds"

        # refused, in Kafka's words, naming the key and the value; nothing changes
        bad = {
            "interval.ms=50": (
                alter(c, "prod", {"interval.ms": "50"}),
                ErrorCode.INVALID_REQUEST,
                "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
            ),
            "interval.ms=3600001": (
                alter(c, "prod", {"interval.ms": "3600001"}),
                ErrorCode.INVALID_REQUEST,
                "Invalid value 3600001 for interval.ms",
            ),
            "interval.ms=soon": (
                alter(c, "prod", {"interval.ms": "soon"}),
                ErrorCode.INVALID_CONFIG,
                "Invalid value soon for configuration interval.ms: Not a number of type INT",
            ),
            "bad regex": (
                alter(c, "prod", {"match": "client_id=[unclosed"}),
                ErrorCode.INVALID_CONFIG,
                "Illegal client matching pattern: client_id=[unclosed",
            ),
            "bad selector": (
                alter(c, "prod", {"match": "hostname=x"}),
                ErrorCode.INVALID_CONFIG,
                "Illegal client matching pattern: hostname=x",
            ),
            "no value": (
                alter(c, "prod", {"match": "client_id"}),
                ErrorCode.INVALID_CONFIG,
                "Illegal client matching pattern: client_id",
            ),
            "duplicate": (
                alter(c, "prod", {"metrics": "a,a"}),
                ErrorCode.INVALID_CONFIG,
                "Configuration 'metrics' values must not be duplicated.",
            ),
            "unknown key": (
                alter(c, "prod", {"push.everything": "yes"}),
                ErrorCode.INVALID_REQUEST,
                "Unknown client metrics configuration: push.everything",
            ),
            "no name": (alter(c, "", {"metrics": "*"}), ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"),
        }
        for what, (r, code, message) in bad.items():
            assert (r.error_code, message in (r.error_message or "")) == (code, True), (what, r)
        assert alter(c, "prod", {"interval.ms": "2000"}, validate_only=True).error_code == 0
        assert values(c, "prod")["interval.ms"] == ("1000", CLIENT_METRICS_CONFIG), "refused and validate-only: kept"

        # APPEND and SUBTRACT on the list keys
        assert alter(c, "prod", {"metrics": (APPEND, "org.apache.kafka.producer.,x.y")}).error_code == 0
        assert values(c, "prod")["metrics"][0] == "org.apache.kafka.producer.,org.apache.kafka.consumer.fetch,x.y"
        assert alter(c, "prod", {"metrics": (SUBTRACT, "org.apache.kafka.consumer.fetch,x.y")}).error_code == 0
        assert values(c, "prod")["metrics"][0] == "org.apache.kafka.producer."
        r = alter(c, "prod", {"interval.ms": (APPEND, "5")})
        assert r.error_code == ErrorCode.INVALID_CONFIG and "interval.ms" in r.error_message

        # AlterConfigs replaces the whole subscription
        r = c.request(
            33,
            2,
            Alter(
                resources=[
                    Alter.AlterConfigsResource(
                        resource_type=CLIENT_METRICS,
                        resource_name="all",
                        configs=[Alter.AlterableConfig(name="metrics", value="*")],
                    )
                ],
                validate_only=False,
            ),
        )
        assert r.responses[0].error_code == 0
        assert values(c, "all") == {
            "metrics": ("*", CLIENT_METRICS_CONFIG),
            "interval.ms": ("300000", DEFAULT_CONFIG),
            "match": ("", DEFAULT_CONFIG),
        }
        assert alter(c, "doomed", {"metrics": "a."}).error_code == 0
        assert listed(c) == [("all", CLIENT_METRICS), ("doomed", CLIENT_METRICS), ("prod", CLIENT_METRICS)]
        # deleting every key deletes the subscription; deleting a key never set changes nothing
        assert alter(c, "doomed", {"metrics": None, "interval.ms": None, "match": None}).error_code == 0
        assert alter(c, "never", {"metrics": None}).error_code == 0
        assert listed(c) == [("all", CLIENT_METRICS), ("prod", CLIENT_METRICS)]

        # ListConfigResources v1: every type (Kafka's order: groups, client metrics, broker
        # loggers, brokers, topics), or the types asked for; an unsupported type is refused
        assert (
            c.request(
                44,
                1,
                Incremental(
                    resources=[
                        Incremental.AlterConfigsResource(
                            resource_type=GROUP,
                            resource_name="grp",
                            configs=[
                                Incremental.AlterableConfig(
                                    name="consumer.session.timeout.ms", config_operation=SET, value="50000"
                                )
                            ],
                        )
                    ],
                    validate_only=False,
                ),
            )
            .responses[0]
            .error_code
            == 0
        )
        from test_bad_input import create_topic

        assert create_topic(c, "tpc", 1) == 0
        assert listed(c, 1) == [
            ("grp", GROUP),
            ("all", CLIENT_METRICS),
            ("prod", CLIENT_METRICS),
            ("1", BROKER_LOGGER),
            ("1", BROKER),
            ("tpc", TOPIC),
        ]
        assert listed(c, 1, [TOPIC, CLIENT_METRICS]) == [
            ("all", CLIENT_METRICS),
            ("prod", CLIENT_METRICS),
            ("tpc", TOPIC),
        ]
        assert listed(c, 0) == [("all", CLIENT_METRICS), ("prod", CLIENT_METRICS)]
        for version, types in ((1, [1]), (1, [TOPIC, 64])):
            r = c.request(74, version, ListConfigResources(resource_types=types))
            assert (r.error_code, r.config_resources) == (ErrorCode.UNSUPPORTED_VERSION, []), types
    with Broker(data_dir=tmp_path / "d") as b, RawClient(b.bootstrap_servers) as c:
        assert listed(c) == [("all", CLIENT_METRICS), ("prod", CLIENT_METRICS)], "kept in the metadata log"
        assert values(c, "prod")["metrics"] == ("org.apache.kafka.producer.", CLIENT_METRICS_CONFIG)
        assert values(c, "prod")["interval.ms"] == ("1000", CLIENT_METRICS_CONFIG)


def test_authorization_is_on_the_cluster(tmp_path):
    acls = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
    }
    with Broker(data_dir=tmp_path / "d", config=acls) as b, RawClient(b.bootstrap_servers) as c:
        r = c.request(
            32,
            4,
            Describe(
                resources=[
                    Describe.DescribeConfigsResource(
                        resource_type=CLIENT_METRICS, resource_name="s", configuration_keys=None
                    )
                ]
            ),
        )
        assert r.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert alter(c, "s", {"metrics": "*"}).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        r = c.request(74, 1, ListConfigResources(resource_types=[]))
        assert (r.error_code, r.config_resources) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
        assert b.server.controller.image.client_metrics == {}
    with (
        Broker(data_dir=tmp_path / "e", config={**acls, "super.users": "User:ANONYMOUS"}) as b,
        RawClient(b.bootstrap_servers) as c,
    ):
        assert alter(c, "s", {"metrics": "*"}).error_code == 0
        assert listed(c) == [("s", CLIENT_METRICS)]


def test_subscriptions_are_forwarded_and_reach_every_node(tmp_path):
    with Cluster(3, data_dir=tmp_path) as cluster:
        leader = cluster.controller_id()
        nodes = [cluster.node(i) for i in (1, 2, 3)]
        other = next(n for n in nodes if n.node_id != leader)  # not the active controller: forwarded
        with RawClient(other.bootstrap_servers) as c:
            subscribe(c, "everywhere", "org.apache.kafka.", 5000)
            r = alter(c, "everywhere", {"interval.ms": "10"})
            assert r.error_code == ErrorCode.INVALID_REQUEST and "Invalid value 10 for interval.ms" in r.error_message
        for n in nodes:
            with RawClient(n.bootstrap_servers) as c:
                # each node applies the committed record from its own copy of the metadata log:
                # the change reaches them all, not at the same instant (Kafka's too)
                wait_until(
                    lambda: listed(c) == [("everywhere", CLIENT_METRICS)],
                    30,
                    f"node {n.node_id} to list the subscription",
                )
                assert values(c, "everywhere")["interval.ms"] == ("5000", CLIENT_METRICS_CONFIG), n.node_id
                hello(c)
                g = c.request(71, 0, GetSubscriptions(client_instance_id=ZERO))
                assert (g.error_code, g.requested_metrics, g.push_interval_ms) == (0, ["org.apache.kafka."], 5000)


# --------------------------------------------------------------------------- telemetry


def test_get_subscriptions_and_push_as_kafka(tmp_path):
    cfg = {"telemetry.max.bytes": "2000"}
    with (
        Broker(data_dir=tmp_path / "d", config=cfg, metrics_listen="127.0.0.1:0") as b,
        RawClient(b.bootstrap_servers) as c,
    ):
        hello(c, "logbroker-tests", "1.0")
        # no subscription: no metrics (the client pushes nothing), Kafka's default interval
        g = c.request(71, 0, GetSubscriptions(client_instance_id=ZERO))
        assert g.error_code == 0 and g.client_instance_id != ZERO
        assert (g.requested_metrics, g.push_interval_ms, g.telemetry_max_bytes, g.delta_temporality) == (
            [],
            300000,
            2000,
            True,
        )
        assert g.accepted_compression_types == [4, 3, 1, 2]  # zstd, lz4, gzip, snappy
        idle = g.client_instance_id
        # selected by software name and version (from ApiVersions), client id, address
        subscribe(
            c,
            "tests",
            "org.apache.kafka.producer.",
            200,
            "client_software_name=logbroker-tests,client_software_version=1\\..*,client_id=raw,"
            "client_source_address=127\\.0\\.0\\.1",
        )
        subscribe(c, "all-java", "*", 100, "client_software_name=apache-kafka-java")
        subscribe(c, "wide", "org.apache.kafka.consumer.", 250)
        g = c.request(71, 0, GetSubscriptions(client_instance_id=ZERO))
        assert (sorted(g.requested_metrics), g.push_interval_ms) == (
            ["org.apache.kafka.consumer.", "org.apache.kafka.producer."],
            200,
        ), "union of matches, smallest interval"
        me, sub_id = g.client_instance_id, g.subscription_id
        with RawClient(b.bootstrap_servers) as java:
            hello(java, "apache-kafka-java", "4.4.0")
            j = java.request(71, 0, GetSubscriptions(client_instance_id=ZERO))
            assert (j.requested_metrics, j.push_interval_ms) == (["*"], 100), "'*' alone when one asks for all"
        # asked again before the interval: throttled
        again = c.request(71, 0, GetSubscriptions(client_instance_id=me))
        assert again.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED

        points = [
            DataPoint(
                "org.apache.kafka.producer.record.send.total", "sum", 5, {"topic": "t1"}, monotonic=True, delta=True
            ),
            DataPoint("org.apache.kafka.producer.buffer.available.bytes", "gauge", 1024.5, {}),
        ]
        payload = gzip.compress(encode_metrics_data(points, {"client.rack": "r1"}))

        def push(metrics=payload, codec=1, sub=None, instance=me, terminating=False):
            return c.request(
                72,
                0,
                Push(
                    client_instance_id=instance,
                    subscription_id=sub_id if sub is None else sub,
                    terminating=terminating,
                    compression_type=codec,
                    metrics=metrics,
                ),
            ).error_code

        assert push() == 0, "the first push right after GetTelemetrySubscriptions"
        assert push() == ErrorCode.THROTTLING_QUOTA_EXCEEDED, "sooner than the interval"
        time.sleep(0.25)
        assert push() == 0
        name = uuid_text(me)
        text = scrape(b.metrics_url)
        assert (
            f'kafka_client_org_apache_kafka_producer_record_send_total{{client_id="raw",'
            f'client_instance_id="{name}",client_rack="r1",topic="t1"}} 10' in text
        ), "DELTA sums added up"
        assert (
            f'kafka_client_org_apache_kafka_producer_buffer_available_bytes{{client_id="raw",'
            f'client_instance_id="{name}",client_rack="r1"}} 1024.5' in text
        )
        assert "# TYPE kafka_client_org_apache_kafka_producer_record_send_total counter" in text
        assert "# TYPE kafka_client_org_apache_kafka_producer_buffer_available_bytes gauge" in text
        assert client_lines(text, uuid_text(idle)) == [], "no subscription, nothing pushed"

        # errors, in Kafka's order
        time.sleep(0.25)
        assert push(sub=sub_id + 1) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        time.sleep(0.25)
        assert push(codec=7) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        time.sleep(0.25)
        assert push(metrics=b"x" * 2001, codec=0) == ErrorCode.TELEMETRY_TOO_LARGE
        time.sleep(0.25)
        assert push(metrics=b"\x1f\x8b not gzip at all") == ErrorCode.INVALID_RECORD
        assert push(instance=ZERO) == ErrorCode.INVALID_REQUEST
        # every codec the broker accepts
        import lz4.frame
        import snappy
        import zstandard

        raw = encode_metrics_data(points)
        for codec, data in (
            (2, snappy.compress(raw)),
            (3, lz4.frame.compress(raw)),
            (4, zstandard.ZstdCompressor().compress(raw)),
            (0, raw),
        ):
            time.sleep(0.25)
            assert push(metrics=data, codec=codec) == 0, codec
        # a subscription change gives a new subscription id: the old one is stale
        subscribe(c, "wide", "org.apache.kafka.consumer.,org.apache.kafka.admin.", 250)
        assert push() == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        g2 = c.request(71, 0, GetSubscriptions(client_instance_id=me))
        assert g2.error_code == 0 and g2.client_instance_id == me and g2.subscription_id != sub_id
        assert "org.apache.kafka.admin." in g2.requested_metrics
        sub_id = g2.subscription_id
        assert push(terminating=True) == 0, "a terminating push is taken whenever it comes"
        assert push() == ErrorCode.INVALID_REQUEST, "nothing after terminating"
        # a client that stops pushing: its metrics go after three push intervals
        wait_until(lambda: not client_lines(scrape(b.metrics_url), name), 10, "the client's metrics to expire")


def test_otlp_reader_takes_what_it_writes():
    points = [
        DataPoint("a.b", "gauge", -2.5, {"k": "v"}),
        DataPoint("c", "sum", 7, {}, monotonic=True, delta=True),
        DataPoint("d", "sum", 3, {"x": "1"}, monotonic=False, delta=False),
    ]
    got = decode_metrics_data(encode_metrics_data(points, {"r": "s"}))
    assert [(p.metric, p.kind, p.value, p.attributes, p.monotonic, p.delta) for p in got] == [
        ("a.b", "gauge", -2.5, {"r": "s", "k": "v"}, False, False),
        ("c", "sum", 7.0, {"r": "s"}, True, True),
        ("d", "sum", 3.0, {"r": "s", "x": "1"}, False, False),
    ]


# --------------------------------------------------------------------------- real clients


def _tools():
    from benches.peers.kafka import install

    return install()


def client_metrics_tool(tools, bs: str, *args: str, ok: bool = True, stdout_only: bool = False) -> str:
    """The tool's output; its errors come on stderr, so both unless `stdout_only` (stderr may
    also carry the JVM's own notes, such as the JDK_JAVA_OPTIONS the tests set)."""
    cmd = tools.tools_java("org.apache.kafka.tools.ClientMetricsCommand", ["--bootstrap-server", bs, *args])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert (r.returncode == 0) == ok, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout if stdout_only else r.stdout + r.stderr


@needs_java
def test_kafka_client_metrics_tool(broker_process, tmp_path):
    tools = _tools()
    bp = broker_process(tmp_path / "d")
    bs = bp.bootstrap_servers
    out = client_metrics_tool(
        tools,
        bs,
        "--alter",
        "--name",
        "producers",
        "--metrics",
        "org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator.rebalance.latency.max",
        "--interval",
        "60000",
        "--match",
        "client_software_name=apache-kafka-java,client_id=app.*",
    )
    assert "Altered client metrics config for producers." in out
    client_metrics_tool(tools, bs, "--alter", "--name", "everything", "--metrics", "*")
    assert client_metrics_tool(tools, bs, "--list", stdout_only=True).split() == ["everything", "producers"]
    out = client_metrics_tool(tools, bs, "--describe", "--name", "producers")
    assert "Client metrics configs for producers are:" in out
    assert "interval.ms=60000" in out
    assert "metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator.rebalance.latency.max" in out
    assert "match=client_software_name=apache-kafka-java,client_id=app.*" in out
    out = client_metrics_tool(tools, bs, "--describe")
    assert "Client metrics configs for everything are:" in out and "Client metrics configs for producers are:" in out
    out = client_metrics_tool(tools, bs, "--alter", "--name", "producers", "--interval", "10", ok=False)
    assert "Invalid value 10 for interval.ms, interval must be between 100 and 3600000 (1 hour)" in out
    out = client_metrics_tool(tools, bs, "--alter", "--name", "producers", "--match", "client_id=(", ok=False)
    assert "Illegal client matching pattern: client_id=(" in out
    # a restart keeps them (the metadata log)
    bp.stop()
    bp.start()
    out = client_metrics_tool(tools, bs, "--describe", "--name", "producers")
    assert "interval.ms=60000" in out
    # kafka-configs manages them too (--entity-type client-metrics)
    kafka_configs(
        tools,
        bs,
        "--alter",
        "--entity-type",
        "client-metrics",
        "--entity-name",
        "producers",
        "--add-config",
        "interval.ms=30000",
    )
    out = kafka_configs(tools, bs, "--describe", "--entity-type", "client-metrics", "--entity-name", "producers")
    assert "interval.ms=30000 sensitive=false synonyms={DYNAMIC_CLIENT_METRICS_CONFIG:interval.ms=30000}" in out
    assert "Deleted client metrics config for everything." in client_metrics_tool(
        tools, bs, "--delete", "--name", "everything"
    )
    assert client_metrics_tool(tools, bs, "--list", stdout_only=True).split() == ["producers"]
    out = client_metrics_tool(tools, bs, "--describe", "--name", "everything")
    assert "The client metric resource everything doesn't exist and doesn't have dynamic config." in out


def _java_client(tools, bs: str, mode: str, client_id: str, topic: str, seconds: int) -> subprocess.Popen:
    cmd = [
        "java",
        "-Xmx256m",
        f"-Dlog4j2.configurationFile={tools.tools_log4j}",
        "-cp",
        tools.tools_cp,
        TELEMETRY_CLIENT,
        bs,
        mode,
        client_id,
        topic,
        str(seconds),
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _instance_of(proc: subprocess.Popen) -> str:
    line = proc.stdout.readline()
    if not line.startswith("instance "):
        proc.kill()
        raise AssertionError(f"no client instance id from the Java client: {line!r} {proc.stderr.read()[-3000:]}")
    return line.split()[1]


@needs_java
def test_java_clients_push_their_metrics(tmp_path):
    tools = _tools()
    with Broker(data_dir=tmp_path / "d", metrics_listen="127.0.0.1:0") as b:
        bs = b.bootstrap_servers
        with RawClient(bs) as c:
            subscribe(c, "java-producers", "org.apache.kafka.producer.", 1000, "client_id=telemetry-.*")
        producer = _java_client(tools, bs, "producer", "telemetry-producer", "telemetry-topic", 15)
        bystander = _java_client(tools, bs, "admin", "bystander", "-", 15)  # no subscription selects it
        try:
            instance = _instance_of(producer)
            idle = _instance_of(bystander)
            assert re.fullmatch(r"[A-Za-z0-9_-]{22}", instance), instance

            def pushed():
                lines = client_lines(scrape(b.metrics_url), instance)
                return lines if any("kafka_client_org_apache_kafka_producer_" in ln for ln in lines) else None

            lines = wait_until(pushed, 30, "the Java producer's metrics on the endpoint")
            assert all('client_id="telemetry-producer"' in ln for ln in lines)
            assert all(ln.startswith("kafka_client_org_apache_kafka_producer_") for ln in lines), lines[:5]
            assert any(ln.startswith("kafka_client_org_apache_kafka_producer_record_send") for ln in lines), lines
            telemetry = b.server.client_telemetry
            iid = next(i for i in telemetry.instances if uuid_text(i) == idle)
            assert telemetry.instances[iid].metrics == [], "the admin client asked and got no metrics"
            assert client_lines(scrape(b.metrics_url), idle) == [], "and pushed none"
            for p in (producer, bystander):
                out, err = p.communicate(timeout=60)
                assert p.returncode == 0 and out.strip().endswith("done"), err[-3000:]
        finally:
            for p in (producer, bystander):
                if p.poll() is None:
                    p.kill()


def test_librdkafka_pushes_its_metrics(tmp_path):
    from confluent_kafka import Producer

    with Broker(data_dir=tmp_path / "d", metrics_listen="127.0.0.1:0") as b:
        bs = b.bootstrap_servers
        with RawClient(bs) as c:
            subscribe(c, "rdkafka", "org.apache.kafka.producer.", 1000, "client_id=rdk-telemetry")
        p = Producer({"bootstrap.servers": bs, "client.id": "rdk-telemetry", "enable.metrics.push": True})
        other = Producer({"bootstrap.servers": bs, "client.id": "rdk-unsubscribed"})
        deadline = time.monotonic() + 30
        lines: list[str] = []
        while time.monotonic() < deadline and not lines:
            for prod in (p, other):
                prod.produce("rdk-telemetry", b"v")
                prod.poll(0.2)
            lines = client_lines(scrape(b.metrics_url), client_id="rdk-telemetry")
        assert lines, "librdkafka pushed no metrics"
        assert all(ln.startswith("kafka_client_org_apache_kafka_producer_") for ln in lines), lines[:5]
        names = {re.match(r"(kafka_client_\w+)", ln).group(1) for ln in lines}
        assert "kafka_client_org_apache_kafka_producer_node_request_latency_avg" in names, names
        telemetry = b.server.client_telemetry
        software = {
            inst.attributes["client_id"]: (inst.attributes["client_software_name"], inst.metrics)
            for inst in telemetry.instances.values()
        }
        assert software["rdk-telemetry"][1] == ["org.apache.kafka.producer."]
        assert software["rdk-unsubscribed"][1] == [], "no subscription selects it"
        assert client_lines(scrape(b.metrics_url), client_id="rdk-unsubscribed") == []
        for prod in (p, other):
            prod.flush(10)
