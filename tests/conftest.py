"""Shared fixtures: real brokers on loopback, and the record model the client
round-trip tests check against."""

from __future__ import annotations

import dataclasses
import gc
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from polling import wait_until  # noqa: F401 - the tests import it from here

from logbroker import Broker
from logbroker.cluster import ClusterNode

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

# Apache Kafka brokers started by tests live for a module at most: the serial collector and
# a 256 MB initial heap besides C1 (JDK_JAVA_OPTIONS below; benches/peers/kafka.py
# broker_jvm_opts). Kafka's tools get the same and a class-data archive (tools_java).
# Benchmarks never set it.
os.environ["LOGBROKER_KAFKA_SHORT_LIVED"] = "1"


# Every `logbroker serve` process the running test started (BrokerProcess.start, and the
# nodes of a logbroker.Cluster: ClusterNode.spawn, wrapped below), so that a failure report
# carries the tail of their logs: a CI run leaves nothing else to read.
_STARTED: list[BrokerProcess | ClusterNode] = []
LOG_TAIL_LINES = 60
_spawn_node = ClusterNode.spawn


def _spawn_node_noted(node: ClusterNode) -> None:
    if node not in _STARTED:
        _STARTED.append(node)
    _spawn_node(node)


ClusterNode.spawn = _spawn_node_noted  # type: ignore[method-assign]


# Parallel runs (pytest-xdist, `--dist loadgroup`: ./scripts/test). Every test is isolated
# (ports from logbroker.cluster.free_port's per-worker slice, data under tmp_path, caches made
# by tests/prepare.py behind file locks); these run on one worker, one after another:
#   spark   the tests on the session's SparkSession (one JVM, started once for them all)
#   alone   tests that measure the machine or load it whole (see XDIST_ALONE)
XDIST_ALONE = {
    "test_scale_growth.py",  # CPU per partition while creating and restarting thousands
}
# Modules with a test of 20 s or more, longest first (fresh-clone run of 2026-11-29): handed
# out first, so the run does not end waiting on one long test begun late (xdist hands out
# groups first, largest first, then single tests in collection order). With collection order,
# pytest took 15.1 min for 3,252 test-seconds over 4 workers, 13.5 min at best.
LONG_FIRST = (
    "test_spark_pipelines.py",
    "test_compat_franz_go.py",
    "test_install_extras.py",
    "test_dynamic_quorum.py",
    "test_spark_exactly_once.py",
    "test_compat_librdkafka.py",
    "test_bench_smoke.py",
    "test_faults.py",
    "test_transaction_faults.py",
    "test_tiered_storage_compaction.py",
    "test_archive_spark.py",
    "test_share_groups_java.py",
    "test_iceberg_spark.py",
    "test_spark_delegation_tokens.py",
    "test_sasl.py",
    "test_cluster_tls.py",
    "test_cluster_transactions_copier.py",
    "test_cluster_sasl.py",
    "test_lakehouse_cluster.py",
    "test_mirror_apache_kafka.py",
    "test_schema_registry.py",
    "test_listeners.py",
    "test_cluster_elections.py",
    "test_consumer_group_persistence.py",
    "test_acls.py",
    "test_delegation_tokens.py",
    "test_pyclient_share.py",
    "test_pyclient_consumer.py",
    # with a test of 20 s or more in ci6 (2026-11-29) and not above: a module begun in the
    # last minute set the run's end
    "test_cluster_transactions.py",
    "test_share_state.py",
    "test_console.py",
    "test_scram_credentials.py",
    "test_replication.py",
    "test_wheel.py",
)


# Every JVM a test starts (Kafka's tools, Java clients, Apache Kafka as a peer, Spark) compiles
# with C1 only: they live seconds, and on two cores C2's compiler threads took CPU from the
# brokers under test (Kafka's kafka-topics --list: 2.3 CPU s with C2, 1.5 with C1; the Java
# client and ACL tool modules: 62 CPU s, 47 with C1). Set JDK_JAVA_OPTIONS to override. The
# benchmarks in benches/ never run under it.
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: modules stay whole
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark"))
        elif item.path.name in XDIST_ALONE:
            item.add_marker(pytest.mark.xdist_group("alone"))


@pytest.fixture(scope="module", autouse=True)
def _collect_garbage_per_module():
    """A client socket a test leaves in a reference cycle is closed by the garbage collector,
    whose ResourceWarning is an error (pyproject's filterwarnings): collected here, at the
    end of each module, the error names the module that leaked it, not whichever later test
    an automatic collection happens to fall in."""
    yield
    gc.collect()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _STARTED.clear()  # before the test's fixtures run: the nodes they start are its own


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when == "call":
        for bp in _STARTED:
            try:
                lines = [ln for ln in bp.log_path.read_text(errors="replace").splitlines() if " DEBUG " not in ln]
            except OSError as e:
                lines = [f"(cannot read {bp.log_path}: {e})"]
            tail = "\n".join(ln[:500] for ln in lines[-LOG_TAIL_LINES:])
            report.sections.append((f"broker log {bp.log_path.name} (last {LOG_TAIL_LINES} lines, no DEBUG)", tail))


@pytest.fixture
def broker(tmp_path):
    with Broker(data_dir=tmp_path / "data") as b:
        yield b


@dataclasses.dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def make_records(n: int, partitions: int, tag: str = "r") -> list[Rec]:
    """A deterministic workload: keys, values of varied sizes, headers, a null key and a
    tombstone now and then, spread round-robin over partitions."""
    out = []
    for i in range(n):
        key = None if i % 17 == 5 else f"{tag}-key-{i}".encode()
        value = None if i % 23 == 7 else (f"{tag}-value-{i}-".encode() * (1 + i % 9))
        if key is None and value is None:  # some clients refuse a record with neither
            key = f"{tag}-key-{i}".encode()
        headers = tuple((f"h{j}", f"{tag}-{i}-{j}".encode()) for j in range(i % 3))
        out.append(Rec(i % partitions, key, value, headers))
    return out


def check_partition_records(expected: list[Rec], got: dict[int, list[tuple[int, Rec]]]) -> None:
    """got: partition -> [(offset, Rec)] in consumption order. Checks every record and
    that offsets are dense and ordered from 0 in each partition."""
    by_part: dict[int, list[Rec]] = {}
    for r in expected:
        by_part.setdefault(r.partition, []).append(r)
    assert sorted(got) == sorted(by_part), f"partitions consumed {sorted(got)} != produced {sorted(by_part)}"
    for p, recs in by_part.items():
        offsets = [o for o, _ in got[p]]
        assert offsets == list(range(len(recs))), f"partition {p}: offsets not dense from 0: {offsets[:20]}..."
        for (off, g), e in zip(got[p], recs):
            assert g == e, f"partition {p} offset {off}: got {g}, expected {e}"


def free_port() -> int:
    """A free loopback port outside the ephemeral range (see logbroker.cluster.free_port)."""
    from logbroker.cluster import free_port as pick

    return pick()


class BrokerProcess:
    """`logbroker serve` as a child process, as a user runs it."""

    def __init__(self, data_dir: Path, port: int | None = None, extra: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.extra = extra or []
        self.proc: subprocess.Popen | None = None
        self.ready_line = ""

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> BrokerProcess:
        cmd = [
            sys.executable,
            "-m",
            "logbroker",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            f"127.0.0.1:{self.port}",
            *self.extra,
        ]
        self.log_path = self.data_dir.parent / f"broker-{self.port}.log"
        if self not in _STARTED:
            _STARTED.append(self)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if "ready" not in line or time.monotonic() > deadline:
            self.reap()
            raise RuntimeError(f"broker did not start: {line!r}; log:\n{self.log_path.read_text()}")
        self.ready_line = line
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self._close_files()
        self.proc = None
        return rc

    def _close_files(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def reap(self) -> None:
        """Kill it if it still runs (test teardown) and close its files."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._close_files()
            self.proc = None

    def log_text(self) -> str:
        return self.log_path.read_text()


def cluster_processes(tmp_path, n: int = 3, extra=()) -> list[BrokerProcess]:
    """N `logbroker serve` processes forming a cluster (node ids 1..n, each broker and
    controller on its own pair of loopback ports), started; `extra` goes to every node."""
    ports = {i: (free_port(), free_port()) for i in range(1, n + 1)}
    voters = ",".join(f"{i}@127.0.0.1:{c}" for i, (_, c) in ports.items())
    nodes = [
        BrokerProcess(
            tmp_path / f"node{i}",
            port=p,
            extra=[
                "--node-id",
                str(i),
                "--voters",
                voters,
                *extra,
                "--listen",
                f"PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}",
            ],
        )
        for i, (p, c) in ports.items()
    ]
    for bp in nodes:
        bp.start()
    return nodes


def require_java() -> None:
    """Fails the calling test (never skips it) when java or mvn is missing, naming them:
    the Java client and Kafka's tools are part of what the suite checks, and ./scripts/test
    installs them (Debian's default-jdk-headless and maven)."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        pytest.fail(
            f"{' and '.join(missing)} not found on the PATH: this test runs the Java client or Kafka's "
            "tools (Java 17+ and Maven; ./scripts/test installs Debian's default-jdk-headless and maven)",
            pytrace=False,
        )


@pytest.fixture
def java_present() -> None:
    require_java()


# Marks a test (or a module, as pytestmark) that needs Java: it fails, naming what is missing.
needs_java = pytest.mark.usefixtures("java_present")


def kafka_configs(tools, bs: str, *args: str) -> str:
    """Kafka's own kafka-configs (ConfigCommand) against `bs`: its output; an assertion
    with its output when it fails. `tools` is benches.peers.kafka.install()'s."""
    cmd = tools.tools_java("org.apache.kafka.tools.ConfigCommand", ["--bootstrap-server", bs, *args])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout


def rdkafka_values(conf: dict, topic: str, n: int, timeout: float = 60.0) -> list[bytes]:
    """Up to `n` record values of `topic` read by a librdkafka consumer (`conf` names the
    group and security settings; from the earliest offset unless it says otherwise), in
    the order they came, waiting at most `timeout` seconds."""
    from confluent_kafka import Consumer

    c = Consumer({"auto.offset.reset": "earliest", **conf})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return got


def kafka_python_values(kc, n: int, timeout: float = 30.0) -> list[bytes]:
    """The values a kafka-python consumer polls until it has `n` (or `timeout` passes); what
    it has then, for the caller's assertion. (Iterating the consumer with consumer_timeout_ms
    waits out that timeout after the last record every time.)"""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for records in kc.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    return got


def isr_sizes(admin, topic: str) -> list[int]:
    """The ISR size of each partition of `topic`, by partition, as a confluent-kafka
    AdminClient's Metadata shows it."""
    md = admin.list_topics(topic, timeout=10).topics[topic]
    return [len(p.isrs) for _, p in sorted(md.partitions.items())]


@pytest.fixture
def broker_process(tmp_path):
    procs = []

    def start(data_dir: Path | None = None, **kw) -> BrokerProcess:
        bp = BrokerProcess(data_dir or tmp_path / "data", **kw).start()
        procs.append(bp)
        return bp

    yield start
    for bp in procs:
        bp.reap()


def have(cmd: str) -> bool:
    return shutil.which(cmd) is not None


def kcat_bin() -> str:
    return shutil.which("kcat") or shutil.which("kafkacat") or "kcat"


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test run (a JVM cannot pick up connector jars
    for a second session), with Spark's own Kafka connector on the classpath. Records
    whether the `logbroker` format was registered at start-up (pyspark_logbroker) before
    register() is called."""
    import sys
    from pathlib import Path

    from pyspark.sql import SparkSession

    from logbroker.spark import register

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
    from jars import connector_jars  # Spark's own Kafka connector, from Maven Central

    session = (
        SparkSession.builder.master("local[2]")
        .appName("logbroker-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars", ",".join(connector_jars()))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.logbroker_registered_at_start = (
        session._jsparkSession.sessionState().dataSourceManager().dataSourceExists("logbroker")
    )
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def iceberg_spark():
    """Runs spark/iceberg_read.py (a PySpark job reading an Iceberg topic's table) under
    pyspark 4.1, in the environment spark/iceberg_env.py makes once (Iceberg's Spark runtime
    exists for Spark 4.1 at newest; the tests' own pyspark is 4.2). Returns run(args) -> the
    job's JSON."""
    import json
    import subprocess

    spark_dir = Path(__file__).resolve().parents[1] / "spark"
    sys.path.insert(0, str(spark_dir))
    from iceberg_env import iceberg_python

    py = iceberg_python()
    job = spark_dir / "iceberg_read.py"

    def run(*args: str) -> dict:
        import os

        env = {**os.environ, "PYSPARK_PYTHON": str(py)}  # the job's own pyspark, not the tests' 4.2
        res = subprocess.run([str(py), str(job), *args], capture_output=True, text=True, timeout=600, env=env)
        if res.returncode != 0:
            raise AssertionError(f"the Iceberg Spark job failed ({res.returncode}): {res.stderr[-4000:]}")
        return json.loads(res.stdout.strip().splitlines()[-1])

    return run
