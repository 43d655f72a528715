"""A real Apache Kafka broker as the comparison peer: KRaft combined mode (broker and
controller in one JVM) on loopback with a temp data directory; one node, or one node of a
PeerCluster (static `controller.quorum.voters`, every node formatted with one cluster id).

Install (idempotent; also done on first use):

    python -m benches.peers.kafka install [--refresh]

downloads org.apache.kafka:kafka_2.13 and org.apache.kafka:kafka-tools, with their runtime
dependencies and a log4j2 binding, from Maven Central with Maven into
~/.cache/logbroker-bench/ (override: LOGBROKER_BENCH_CACHE). Nothing lands in the repo.
The version is the newest 4.x that Maven Central lists *and* whose whole dependency set
resolves; versions skipped on the way are recorded with the reason.

`install_tier(inst)` (on first use by benches/bench_tiered_storage.py) adds Kafka's test tier,
LocalTieredStorage from kafka-storage's test fixtures jar (its test jar before 4.4), into
<kafka home>/tier/; a broker started with `extra_classpath=[inst.tier_cp]` can load it.

Run one by hand:

    python -m benches.peers.kafka run
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from benches.peers.common import Peer, one_at_a_time, run_cli

HERE = Path(__file__).resolve().parent
POMS = {"broker": HERE / "maven" / "broker" / "pom.xml", "tools": HERE / "maven" / "tools" / "pom.xml"}
TIER_POM = HERE / "maven" / "tiered" / "pom.xml"
# Kafka's frameworks (install_frameworks): Streams at the peer's version, Connect at the one
# maven/connect/pom.xml names (its file connectors).
FRAMEWORK_POMS = {"streams": HERE / "maven" / "streams" / "pom.xml", "connect": HERE / "maven" / "connect" / "pom.xml"}
# Kafka's test tier, a RemoteStorageManager over a local directory (storage/src/test in Kafka's
# tree). 4.4 publishes it in kafka-storage's test fixtures jar, 4.3 and earlier in its test jar.
LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
TIER_CLASSIFIERS = ("test-fixtures", "test")
CACHE = Path(os.environ.get("LOGBROKER_BENCH_CACHE", "~/.cache/logbroker-bench")).expanduser()
M2 = CACHE / "m2"  # Maven's local repository for these downloads
GROUP_PATH = "org/apache/kafka/kafka_2.13"

# What kafka-server-start.sh / kafka-run-class.sh use by default (KAFKA_HEAP_OPTS and
# KAFKA_JVM_PERFORMANCE_OPTS), so the broker runs the way an operator would start it.
HEAP_OPTS = ["-Xms1g", "-Xmx1g"]
JVM_PERF_OPTS = [
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
]
# Brokers that live for one test or module (tests/conftest.py sets LOGBROKER_KAFKA_SHORT_LIVED=1):
# C1 alone, the serial collector and a small initial heap, as short-lived tools run
# (KafkaInstall.tools_java): G1's concurrent threads and C2's compiles are most of a young
# JVM's CPU on two cores. No benchmark sets it.
SHORT_LIVED_OPTS = ["-Xms256m", "-Xmx1g", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
SHORT_LIVED_ENV = "LOGBROKER_KAFKA_SHORT_LIVED"


def broker_jvm_opts() -> list[str]:
    if os.environ.get(SHORT_LIVED_ENV) == "1":
        return list(SHORT_LIVED_OPTS)
    return HEAP_OPTS + JVM_PERF_OPTS


LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""

TOOLS_LOG4J2 = """\
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""


@dataclass
class KafkaInstall:
    version: str
    home: Path
    skipped: list[dict] = field(default_factory=list)

    @property
    def broker_cp(self) -> str:
        return str(self.home / "broker" / "*")

    @property
    def tools_cp(self) -> str:
        return str(self.home / "tools" / "*")

    @property
    def tier_cp(self) -> str:
        """LocalTieredStorage's jar (`install_tier`)."""
        return str(self.home / "tier" / "*")

    def framework_java(self, framework: str, main: str, args: list[str], heap: str = "-Xmx512m") -> list[str]:
        """The command running `main` (a class, or a single-file Java program) on the classpath
        of `framework` ("streams" or "connect", `install_frameworks`), as a test's client runs."""
        return self._java(str(self.home / framework / "*"), main, args, heap, short_lived=True, archive=False)

    @property
    def broker_log4j(self) -> Path:
        return self.home / "log4j2-broker.properties"

    @property
    def tools_log4j(self) -> Path:
        return self.home / "log4j2-tools.properties"

    @property
    def tools_archive(self) -> Path:
        """The class-data archive of a tools run (`make_tools_archive`)."""
        return self.home / "tools.jsa"

    def tools_java(self, main: str, args: list[str], heap: str = "-Xmx512m", short_lived: bool = True) -> list[str]:
        """The command running one of Kafka's tools (or a Java client program) on the tools'
        classpath. `short_lived` (a command-line tool, a test's client): C1 alone and the
        serial collector, and the classes of a tools run mapped from `tools_archive` when it
        was made (kafka-topics on 2 cores, user CPU: a default JVM 2.2-2.7 s, C1 alone
        1.3-1.7 s, C1 with the serial collector and the archive 0.7-0.8 s): C2's compiler
        threads and loading classes from jars are most of a run of a few seconds. Off for
        throughput (ProducerPerformance, benches). JVM warnings go to stderr (a mismatched
        archive is ignored, with a warning)."""
        return self._java(self.tools_cp, main, args, heap, short_lived, archive=True)

    def _java(self, cp: str, main: str, args: list[str], heap: str, short_lived: bool, archive: bool) -> list[str]:
        jvm = ["java", heap]
        if short_lived:
            jvm += ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xlog:disable", "-Xlog:all=warning:stderr"]
            if archive and self.tools_archive.exists():  # the tools' classes: their classpath only
                jvm.append(f"-XX:SharedArchiveFile={self.tools_archive}")
        return [*jvm, f"-Dlog4j2.configurationFile={self.tools_log4j}", "-cp", cp, main, *args]


def _mvn(args: list[str], verbose: bool) -> subprocess.CompletedProcess:
    cmd = ["mvn", "-B", "-q", f"-Dmaven.repo.local={M2}", *args]
    if verbose:
        print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, capture_output=True, text=True)


def _copy_dependencies(pom: Path, version: str, out: Path, verbose: bool) -> str | None:
    """Download what `pom` names at Kafka `version` (its runtime dependencies) into `out`;
    None, or Maven's first error line."""
    r = _mvn(
        [
            "-U",
            "-f",
            str(pom),
            f"-Dkafka.version={version}",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={out}",
        ],
        verbose,
    )
    if r.returncode == 0:
        return None
    reason = next((ln for ln in (r.stdout + r.stderr).splitlines() if "ERROR" in ln), "mvn failed")
    return re.sub(r"\x1b\[[0-9;]*m", "", reason).replace("[ERROR] ", "")[:300]


def _vkey(v: str) -> tuple:
    return tuple(int(x) for x in v.split("."))


def available_versions(verbose: bool = False) -> list[str]:
    """4.x release versions of kafka_2.13 that Maven Central lists, newest first."""
    with tempfile.TemporaryDirectory() as td:
        pom = Path(td) / "pom.xml"
        pom.write_text(
            '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>probe</groupId><artifactId>probe</artifactId><version>1</version>"
            "<packaging>pom</packaging></project>"
        )
        # resolving the LATEST pom makes Maven fetch the artifact's maven-metadata.xml
        _mvn(
            [
                "-U",
                "-f",
                str(pom),
                "dependency:get",
                "-Dtransitive=false",
                "-Dartifact=org.apache.kafka:kafka_2.13:LATEST:pom",
            ],
            verbose,
        )
    versions: set[str] = set()
    for meta in (M2 / GROUP_PATH).glob("maven-metadata*.xml"):
        for v in ET.parse(meta).getroot().iter("version"):
            if v.text and re.fullmatch(r"4\.\d+\.\d+", v.text.strip()):
                versions.add(v.text.strip())
    return sorted(versions, key=_vkey, reverse=True)


def _write_support_files(home: Path) -> None:
    (home / "log4j2-broker.properties").write_text(LOG4J2)
    (home / "log4j2-tools.properties").write_text(TOOLS_LOG4J2)


@one_at_a_time(lambda: CACHE / ".install.lock")
def install(refresh: bool = False, verbose: bool = False) -> KafkaInstall:
    """Install (once) and return the Kafka broker and tools classpaths."""
    marker = CACHE / "kafka-installed.json"
    if marker.exists() and not refresh:
        info = json.loads(marker.read_text())
        inst = KafkaInstall(info["version"], Path(info["home"]), info.get("skipped", []))
        if (inst.home / "broker").is_dir() and (inst.home / "tools").is_dir():
            _write_support_files(inst.home)
            return inst
    CACHE.mkdir(parents=True, exist_ok=True)
    versions = available_versions(verbose)
    if not versions:
        raise RuntimeError("Maven Central lists no 4.x kafka_2.13 (is Maven Central reachable?)")
    skipped: list[dict] = []
    for v in versions:
        home = CACHE / f"kafka-{v}"
        ok = True
        for part, pom in POMS.items():
            out = home / part
            reason = _copy_dependencies(pom, v, out, verbose)
            if reason is not None:
                skipped.append({"version": v, "part": part, "reason": reason})
                if verbose:
                    print(f"kafka {v}: {part} does not resolve: {reason}", file=sys.stderr)
                ok = False
                break
        if ok:
            _write_support_files(home)
            inst = KafkaInstall(v, home, skipped)
            marker.write_text(json.dumps({"version": v, "home": str(home), "skipped": skipped}, indent=1))
            return inst
    raise RuntimeError(f"no Kafka 4.x version resolves from Maven Central: {skipped[:3]}")


@one_at_a_time(lambda: CACHE / ".install.lock")
def install_tier(inst: KafkaInstall, verbose: bool = False) -> Path:
    """Install (once) Kafka's LocalTieredStorage for `inst`'s version into <home>/tier/ and
    return that directory. Only that jar is copied: what it needs at run time (kafka-storage,
    kafka-storage-api, kafka-clients, kafka-server-common, slf4j) is on the broker's classpath
    already. It refers to TestUtils of kafka-clients' test fixtures, which Maven Central does
    not carry for 4.4, but only when no directory is configured (`rsm.config.dir`)."""
    out = inst.home / "tier"
    if any(out.glob("kafka-storage-*.jar")):
        return out
    reasons = []
    for classifier in TIER_CLASSIFIERS:
        r = _mvn(
            [
                "-f",
                str(TIER_POM),
                f"-Dkafka.version={inst.version}",
                f"-Dtier.classifier={classifier}",
                "dependency:copy-dependencies",
                "-DexcludeTransitive=true",
                f"-DoutputDirectory={out}",
            ],
            verbose,
        )
        if r.returncode == 0:
            return out
        reasons.append(next((ln for ln in (r.stdout + r.stderr).splitlines() if "ERROR" in ln), "mvn failed"))
    raise RuntimeError(f"no kafka-storage test jar for Kafka {inst.version} on Maven Central: {reasons}")


@one_at_a_time(lambda: CACHE / ".install.lock")
def install_frameworks(inst: KafkaInstall, verbose: bool = False) -> dict[str, Path]:
    """Install (once) Kafka Streams (at `inst`'s version) and Kafka Connect (the distributed
    worker, the file connectors, the JSON converter; maven/connect/pom.xml says which version
    and why) into <home>/streams/ and <home>/connect/; returns those directories."""
    out = {}
    for name, pom in FRAMEWORK_POMS.items():
        d = inst.home / name
        out[name] = d
        if (d / ".complete").exists():
            continue
        reason = _copy_dependencies(pom, inst.version, d, verbose)
        if reason is not None:
            raise RuntimeError(f"Kafka's {name} ({pom}) does not resolve from Maven Central: {reason}")
        (d / ".complete").write_text(inst.version)
    return out


@one_at_a_time(lambda: CACHE / ".install.lock")
def make_tools_archive(inst: KafkaInstall, bootstrap: str) -> Path:
    """Once per install: runs kafka-topics --create against `bootstrap` (a broker of any kind)
    with -XX:ArchiveClassesAtExit, so later short-lived tool runs map the classes it loaded
    (the JDK's, kafka-clients', the admin client's, log4j's) instead of loading them from the
    jars (`tools_java`). Made by tests/prepare.py before the tests start. A JDK other than
    the one that made it ignores it."""
    out = inst.tools_archive
    if out.exists():
        return out
    tmp = out.with_suffix(".jsa.tmp")
    cmd = inst.tools_java(
        "org.apache.kafka.tools.TopicCommand",
        ["--bootstrap-server", bootstrap, "--create", "--topic", "class-data-archive", "--partitions", "1"],
        short_lived=False,
    )
    cmd[2:2] = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", f"-XX:ArchiveClassesAtExit={tmp}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0 or not tmp.exists():
        raise RuntimeError(
            f"the tools' class-data archive was not made (rc {r.returncode}): {(r.stdout + r.stderr)[-2000:]}"
        )
    os.replace(tmp, out)
    return out


class KafkaPeer(Peer):
    name = "kafka"

    def __init__(
        self,
        *a,
        install_info: KafkaInstall | None = None,
        extra_classpath: list[str] | None = None,
        metadata_dir: bool = False,
        **kw,
    ):
        """`extra_classpath`: entries after the broker's jars (a RemoteStorageManager's jar).
        `metadata_dir`: the metadata log in a directory of its own (metadata.log.dir,
        <temp dir>/metadata), so log.dirs holds nothing but partition data and meta.properties."""
        super().__init__(*a, **kw)
        self.inst = install_info
        self.extra_classpath = list(extra_classpath or [])
        self.metadata_dir = metadata_dir
        self.t_format = 0.0

    @staticmethod
    def new_cluster_id() -> str:
        """A Kafka-style id (16 random bytes, URL-safe base64); one starting with "-" would be
        read as an option by kafka-storage's argument parser."""
        import base64
        import uuid

        cluster_id = "-"
        while cluster_id.startswith("-"):
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        return cluster_id

    def _props(self) -> dict[str, str]:
        rf, min_isr = str(self.replication_factor), str(self.min_insync_replicas)
        controller = self.roles != "broker"
        return {
            "process.roles": self.roles,
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters or f"{self.node_id}@127.0.0.1:{self.cport}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}"
            + (f",CONTROLLER://127.0.0.1:{self.cport}" if controller else ""),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.log_dirs_setting,
            **({"metadata.log.dir": self.metadata_log_dir_setting} if self.metadata_dir else {}),
            "num.partitions": "1",
            "default.replication.factor": rf,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": rf,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": min_isr,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min_isr,
            "group.initial.rebalance.delay.ms": "0",
            "log.segment.bytes": str(self.segment_bytes),
            # no fsync per write: Kafka's defaults, spelled out (flush left to the OS)
            "log.flush.interval.messages": str(2**63 - 1),
            "log.flush.interval.ms": str(2**63 - 1),
            "log.index.interval.bytes": "4096",
            "message.max.bytes": "1048588",
            "auto.create.topics.enable": "true",
        } | self.extra

    @property
    def metadata_log_dir_setting(self) -> str:
        return str(self.workdir / "metadata") if self.workdir else "<temp dir>/metadata"

    def settings(self) -> dict[str, str]:
        s = dict(self._props())
        s["(jvm)"] = " ".join(broker_jvm_opts())
        s["(threads)"] = "num.network.threads=3, num.io.threads=8 (Kafka defaults)"
        return s

    def prepare(self) -> None:
        import time

        if self.inst is None:
            self.inst = install()
        super().prepare()
        assert self.workdir is not None
        props = self.workdir / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self._props().items()))
        if not self.cluster_id:
            self.cluster_id = self.new_cluster_id()
        t0 = time.monotonic()
        r = subprocess.run(
            [
                "java",
                "-Xmx256m",
                "-XX:TieredStopAtLevel=1",  # a tool's run of a few seconds (tools_java)
                "-XX:+UseSerialGC",
                f"-Dlog4j2.configurationFile={self.inst.tools_log4j}",
                "-cp",
                self.inst.broker_cp,
                "kafka.tools.StorageTool",
                "format",
                "-t",
                self.cluster_id,
                "-c",
                str(props),
            ],
            capture_output=True,
            text=True,
        )
        self.t_format = time.monotonic() - t0
        if r.returncode != 0:
            raise RuntimeError(f"kafka storage format failed: {r.stdout}\n{r.stderr}")

    def _launch(self) -> subprocess.Popen:
        assert self.inst is not None and self.workdir is not None
        cmd = [
            "java",
            *broker_jvm_opts(),
            f"-Dkafka.logs.dir={self.workdir}",
            f"-Dlog4j2.configurationFile={self.inst.broker_log4j}",
            "-cp",
            os.pathsep.join([self.inst.broker_cp, *self.extra_classpath]),
            "kafka.Kafka",
            str(self.workdir / "server.properties"),
        ]
        out = self._open_log("stdout.log")
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir)


if __name__ == "__main__":
    sys.exit(run_cli(KafkaPeer))
