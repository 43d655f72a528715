"""Apache Kafka's own command-line tools (the kafka-*.sh scripts of Kafka 4.4.0, run as their main
classes on the tools classpath of benches/peers/kafka.py) as a suite: each case is a short
operator scenario (set up, run the tool, check with the tool), judged by the tool's exit status
and by what its output says (the topic listed with its partitions, the config value read back,
the group's lag, the records deleted up to the offset, ...). The same scenario code runs
against logbroker and against Apache Kafka.

Tools and main classes (bin/*.sh in Kafka's source name them; all in kafka-tools-4.4.0.jar):
kafka-topics (TopicCommand; --describe uses DescribeTopicPartitions), kafka-configs
(ConfigCommand), kafka-consumer-groups (consumer.group.ConsumerGroupCommand), kafka-groups
(GroupsCommand), kafka-share-groups (consumer.group.ShareGroupCommand),
kafka-console-share-consumer (consumer.ConsoleShareConsumer), kafka-get-offsets
(GetOffsetShell), kafka-delete-records (DeleteRecordsCommand), kafka-log-dirs
(LogDirsCommand), kafka-metadata-quorum (MetadataQuorumCommand), kafka-features
(FeatureCommand), kafka-leader-election (LeaderElectionCommand), kafka-cluster (ClusterTool),
kafka-transactions (TransactionsCommand), kafka-broker-api-versions (BrokerApiVersionsCommand),
kafka-client-metrics (ClientMetricsCommand), kafka-dump-log (DumpLogSegments, on the broker's
own segment files: target.data_dirs), kafka-acls (AclCommand), kafka-reassign-partitions
(reassign.ReassignPartitionsCommand), kafka-delegation-tokens (DelegationTokenCommand).

Settings (broker_settings, the same keys on both brokers): the StandardAuthorizer with
User:ANONYMOUS as the super user, so kafka-acls has an authorizer to manage while every
PLAINTEXT client (the tools, the set-up clients, the brokers to each other) is allowed
everything. Every broker has two log directories (LOG_DIRS, Kafka's JBOD), so
kafka-log-dirs describes both and kafka-reassign-partitions can move a replica between them.

Not configured: SASL. kafka-delegation-tokens needs a SASL listener (and a token secret) to
create a token; the suite's case shows the refusal a PLAINTEXT listener gives instead (the
token itself: tests/test_delegation_tokens.py).

Sizes: every case declares the cluster sizes it runs on; the full form runs one node and three
nodes (leader election, reassignment and the quorum's followers need three), the short form
(CI) a handful of fast cases on one node. Set-up (topics, records, commits, transactions) uses
confluent-kafka for speed; what is judged is always the Kafka tool's own run and output.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.compat.results import Outcome

T = "org.apache.kafka.tools."
TOOLS = {
    "kafka-topics": T + "TopicCommand",
    "kafka-configs": T + "ConfigCommand",
    "kafka-consumer-groups": T + "consumer.group.ConsumerGroupCommand",
    "kafka-groups": T + "GroupsCommand",
    "kafka-share-groups": T + "consumer.group.ShareGroupCommand",
    "kafka-console-share-consumer": T + "consumer.ConsoleShareConsumer",
    "kafka-get-offsets": T + "GetOffsetShell",
    "kafka-delete-records": T + "DeleteRecordsCommand",
    "kafka-log-dirs": T + "LogDirsCommand",
    "kafka-metadata-quorum": T + "MetadataQuorumCommand",
    "kafka-features": T + "FeatureCommand",
    "kafka-leader-election": T + "LeaderElectionCommand",
    "kafka-cluster": T + "ClusterTool",
    "kafka-transactions": T + "TransactionsCommand",
    "kafka-broker-api-versions": T + "BrokerApiVersionsCommand",
    "kafka-client-metrics": T + "ClientMetricsCommand",
    "kafka-dump-log": T + "DumpLogSegments",
    "kafka-acls": T + "AclCommand",
    "kafka-reassign-partitions": T + "reassign.ReassignPartitionsCommand",
    "kafka-delegation-tokens": T + "DelegationTokenCommand",
}
TOOL_TIMEOUT = 120.0
PREFIX = "kt"  # of the topics, groups and transactional ids the cases create

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SETTINGS = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}
LOG_DIRS = 2  # log directories per broker (tests/compat/brokers.py started)

# test name -> why its outcome differs between the brokers (or why it fails on both)
DIFFERENCES: dict[str, str] = {
    "kafka-dump-log --cluster-metadata-decoder": (
        "Kafka's metadata log __cluster_metadata-0 is a KRaft partition of record-batch segments "
        "(00000000000000000000.log) that kafka-dump-log decodes. logbroker's controller quorum keeps its "
        "own Raft log there (raft.log of JSON entries, hardstate, voters: "
        "python/logbroker/coord/metadata/quorum.py), not Kafka's segment format, so there is no segment for the "
        "tool to read. Data partitions, __consumer_offsets and __transaction_state are Kafka's format "
        "(the other kafka-dump-log cases). A right difference of design, stated in docs."
    ),
}


def prepare(short: bool) -> dict:
    """Kafka's tools jars (benches/peers/kafka.py install(): Maven Central, cached)."""
    if shutil.which("java") is None:
        raise RuntimeError(
            "java not found on the PATH: the kafka-tools suite runs Kafka's own command-line tools "
            "(Java 17+; ./scripts/test installs Debian's default-jdk-headless)"
        )
    from benches.peers.kafka import install

    inst = install()
    return {"Apache Kafka tools": inst.version}


def nodes(short: bool) -> list[int]:
    return [1] if short else [1, 3]


def broker_settings(nodes: int) -> dict[str, str]:
    return dict(SETTINGS)


# --------------------------------------------------------------------------------------------
# the harness of one run: tools, checks, set-up clients


class CaseFailed(Exception):
    """A check failed: the message says what was expected."""


@dataclass
class ToolRun:
    cmd: str
    rc: int
    out: str  # stdout
    err: str  # stderr (log4j WARN/ERROR lines, stack traces)

    @property
    def all(self) -> str:
        return self.out + self.err


class Run:
    """One suite run against one target: the state cases share (fixtures) and what to close."""

    def __init__(self, target, workdir: str, inst) -> None:
        self.target = target
        self.bs = target.bootstrap
        self.n = target.nodes
        self.rf = min(target.nodes, 3)
        self.work = Path(workdir) / "kafka-tools"
        self.work.mkdir(parents=True, exist_ok=True)
        self.inst = inst
        self.fixtures: dict[str, object] = {}
        self.closers: list[Callable[[], None]] = []
        self._admin = None

    @property
    def admin(self):
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bs})
        return self._admin

    def close(self) -> None:
        for c in reversed(self.closers):
            try:
                c()
            except Exception:  # noqa: BLE001 - best effort at the end of a run
                pass


class Ctx:
    """What a case uses: the tools (with a transcript for the failure detail), checks, set-up."""

    def __init__(self, run: Run, case: str) -> None:
        self.run = run
        self.case = case
        self.transcript: list[str] = []
        self.bs = run.bs
        self.n = run.n
        self.rf = run.rf

    # -- tools ---------------------------------------------------------------------------
    def tool(self, name: str, *args: str, rc: int | None = 0, timeout: float = TOOL_TIMEOUT) -> ToolRun:
        """Run Kafka's `name` tool with `args`; CaseFailed unless it exits with `rc` (None: any)."""
        # a short-lived JVM: C1 alone, the serial collector, the tools' class-data archive
        cmd = self.run.inst.tools_java(TOOLS[name], list(args), heap="-Xmx256m")
        shown = f"$ {name} " + " ".join(args)
        try:
            p = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, cwd=self.run.work, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            self.transcript.append(f"{shown}\n{out}\n(killed after {timeout:.0f}s)")
            raise CaseFailed(f"{name} to finish within {timeout:.0f}s") from None
        r = ToolRun(shown, p.returncode, p.stdout, p.stderr)
        self.transcript.append(f"{shown}\n{r.out}{r.err}(exit {r.rc})")
        if rc is not None and r.rc != rc:
            raise CaseFailed(f"{name} to exit with status {rc} (it exited with {r.rc})")
        return r

    def kt(self, name: str, *args: str, **kw) -> ToolRun:
        """A tool taking --bootstrap-server first."""
        return self.tool(name, "--bootstrap-server", self.bs, *args, **kw)

    def until(self, what: str, attempt: Callable[[], bool], tries: int = 6, pause: float = 0.5) -> None:
        """Run `attempt` (which runs a tool and checks its output) until it returns True."""
        for i in range(tries):
            if attempt():
                return
            if i < tries - 1:
                time.sleep(pause)
        raise CaseFailed(what)

    # -- checks --------------------------------------------------------------------------
    def expect(self, cond: object, what: str) -> None:
        if not cond:
            raise CaseFailed(what)

    def expect_in(self, text: str, needle: str, what: str | None = None) -> None:
        if needle not in text:
            raise CaseFailed(what or f"the output to contain {needle!r}")

    def expect_re(self, text: str, pattern: str, what: str | None = None) -> re.Match:
        m = re.search(pattern, text, re.M)
        if m is None:
            raise CaseFailed(what or f"the output to match /{pattern}/")
        return m

    def detail(self, failure: str) -> str:
        """The transcript's end (each tool run's head and tail), then what was expected."""
        runs = [t if len(t) <= 1000 else f"{t[:450]}\n[...]\n{t[-500:]}" for t in self.transcript]
        return f"{chr(10).join(runs)[-1600:]}\n--- expected: {failure}"

    # -- set-up with confluent-kafka ----------------------------------------------------------
    def name(self, stem: str) -> str:
        return f"{PREFIX}-{stem}"

    def create_topic(
        self,
        topic: str,
        partitions: int = 1,
        rf: int | None = None,
        config: dict | None = None,
        assignment: list[list[int]] | None = None,
        timeout: float = 30.0,
    ) -> None:
        from confluent_kafka.admin import NewTopic

        if assignment is not None:
            nt = NewTopic(topic, len(assignment), replica_assignment=assignment, config=config or {})
            partitions, want_isr = len(assignment), len(assignment[0])
        else:
            nt = NewTopic(topic, partitions, rf or self.rf, config=config or {})
            want_isr = rf or self.rf
        self.run.admin.create_topics([nt], operation_timeout=timeout)[topic].result(timeout)
        deadline = time.monotonic() + timeout
        while True:
            t = self.run.admin.list_topics(topic, timeout=timeout).topics.get(topic)
            if (
                t is not None
                and t.error is None
                and len(t.partitions) == partitions
                and all(p.leader >= 0 and len(p.isrs) == want_isr for p in t.partitions.values())
            ):
                return
            if time.monotonic() > deadline:
                raise CaseFailed(f"set-up: topic {topic} to have leaders and a full ISR within {timeout:.0f}s")
            time.sleep(0.1)

    def leaders(self, topic: str) -> dict[int, int]:
        t = self.run.admin.list_topics(topic, timeout=10).topics[topic]
        return {p: md.leader for p, md in t.partitions.items()}

    def produce(
        self,
        topic: str,
        values: list[bytes],
        partition: int | None = None,
        timestamps: list[int] | None = None,
        keys: list[bytes] | None = None,
        **conf,
    ) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bs, "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000, **conf})
        errors: list = []
        for i, v in enumerate(values):
            kw: dict = {"on_delivery": lambda err, msg: errors.append(err) if err else None}
            if partition is not None:
                kw["partition"] = partition
            if timestamps is not None:
                kw["timestamp"] = timestamps[i]
            if keys is not None:
                kw["key"] = keys[i]
            while True:
                try:
                    p.produce(topic, v, **kw)
                    break
                except BufferError:
                    p.poll(0.1)
        left = p.flush(40)
        if left or errors:
            raise CaseFailed(
                f"set-up: {len(values)} records produced to {topic} ({left} undelivered, errors {errors[:3]})"
            )

    def commit(self, group: str, offsets: dict[tuple[str, int], int], timeout: float = 30.0) -> None:
        """Commit offsets for `group` without joining it (a simple consumer's commit), retrying
        while the group coordinator loads."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        c = Consumer({"bootstrap.servers": self.bs, "group.id": group, "enable.auto.commit": False})
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
                    return
                except KafkaException as e:
                    if time.monotonic() > deadline:
                        raise CaseFailed(f"set-up: commit of {group}'s offsets: {e}") from None
                    time.sleep(0.2)
        finally:
            c.close()

    def consume_all(
        self,
        group: str,
        topic: str,
        n: int,
        protocol: str = "classic",
        timeout: float = 30.0,
        client_id: str = "kafka-tools-suite",
    ) -> None:
        """A subscribed consumer of `group` reads `n` records of `topic` from the start, commits, leaves."""
        from confluent_kafka import Consumer

        c = Consumer(
            {
                "bootstrap.servers": self.bs,
                "group.id": group,
                "group.protocol": protocol,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "client.id": client_id,
            }
        )
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + timeout
        try:
            while got < n and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    got += 1
            if got < n:
                raise CaseFailed(f"set-up: group {group} ({protocol}) to read {n} records of {topic} (read {got})")
            c.commit(asynchronous=False)
        finally:
            c.close()

    def write(self, name: str, text: str) -> str:
        p = self.run.work / name
        p.write_text(text)
        return str(p)

    def fixture(self, key: str, build: Callable[[Ctx], object]) -> object:
        """State several cases share, built once per run by the first case that needs it; a
        failed build fails every case that needs it (with the build's reason)."""
        if key not in self.run.fixtures:
            try:
                self.run.fixtures[key] = ("ok", build(self))
            except CaseFailed as e:
                self.run.fixtures[key] = ("fail", str(e))
            except Exception as e:  # noqa: BLE001 - recorded for every dependent case
                self.run.fixtures[key] = ("fail", f"{type(e).__name__}: {e}")
        state, value = self.run.fixtures[key]
        if state == "fail":
            raise CaseFailed(f"set-up {key!r} to succeed ({value})")
        return value

    # -- files on the brokers' disks -----------------------------------------------------------
    def data_dir(self, node_id: int) -> Path:
        return Path(self.run.target.data_dirs[node_id - 1])

    def replica_dir(self, node_id: int, topic: str, partition: int) -> Path | None:
        """The partition's directory on node `node_id`, in whichever of its log directories."""
        for d in self.run.target.log_dirs[node_id - 1]:
            if (Path(d) / f"{topic}-{partition}").is_dir():
                return Path(d) / f"{topic}-{partition}"
        return None

    def partition_dir(self, topic: str, partition: int) -> Path:
        """The partition's directory on its leader."""
        leader = self.leaders(topic)[partition]
        found = self.replica_dir(leader, topic, partition)
        if found is None:
            raise CaseFailed(f"{topic}-{partition}'s directory in a log directory of its leader, broker {leader}")
        return found

    def cluster_id(self) -> str:
        meta = (self.data_dir(1) / "meta.properties").read_text()
        m = re.search(r"^cluster\.id=(\S+)", meta, re.M)
        self.expect(m, f"meta.properties of node 1 to name the cluster id: {meta!r}")
        return m.group(1)  # type: ignore[union-attr]


@dataclass
class Case:
    name: str
    fn: Callable[[Ctx], None]
    sizes: tuple[int, ...] = (1, 3)
    short: bool = False


CASES: list[Case] = []


def case(name: str, sizes: tuple[int, ...] = (1, 3), short: bool = False):
    def deco(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
        CASES.append(Case(name, fn, sizes, short))
        return fn

    return deco


def rows(text: str) -> list[list[str]]:
    """Whitespace-split lines of a table the tools print (blank lines dropped)."""
    return [line.split() for line in text.splitlines() if line.strip()]


def segments(pdir: Path) -> list[Path]:
    """A partition directory's segment files (Kafka's names: 20-digit base offset + .log), in order."""
    return sorted(p for p in pdir.glob("*.log") if re.fullmatch(r"\d{20}\.log", p.name))


# --------------------------------------------------------------------------------------------
# kafka-topics


@case("kafka-topics --create", short=True)
def topics_create(c: Ctx) -> None:
    t = c.name("created")
    r = c.kt(
        "kafka-topics",
        "--create",
        "--topic",
        t,
        "--partitions",
        "3",
        "--replication-factor",
        str(c.rf),
        "--config",
        "cleanup.policy=compact",
        "--config",
        "retention.ms=3600000",
    )
    c.expect_in(r.out, f"Created topic {t}.")
    d = c.kt("kafka-topics", "--describe", "--topic", t).out
    c.expect_re(
        d,
        rf"^Topic: {t}\s+TopicId: \S+\s+PartitionCount: 3\s+ReplicationFactor: {c.rf}\s",
        f"--describe: {t} with PartitionCount: 3 and ReplicationFactor: {c.rf}",
    )
    c.expect_re(d, r"Configs: .*cleanup\.policy=compact", "--describe: the topic's cleanup.policy=compact")
    c.expect_re(d, r"Configs: .*retention\.ms=3600000", "--describe: the topic's retention.ms=3600000")


@case("kafka-topics --list")
def topics_list(c: Ctx) -> None:
    a, b = c.name("list-a"), c.name("list-b")
    c.create_topic(a)
    c.create_topic(b, 2)
    names = c.kt("kafka-topics", "--list").out.split()
    c.expect(a in names and b in names, f"--list to name {a} and {b}")
    names = c.kt("kafka-topics", "--list", "--topic", "kt-list-.*").out.split()
    c.expect(sorted(names) == [a, b], f"--list --topic 'kt-list-.*' to name exactly {a} and {b}")


def check_described(c: Ctx, topic: str, partitions: int) -> None:
    d = c.kt("kafka-topics", "--describe", "--topic", topic).out
    c.expect_re(
        d,
        rf"^Topic: {topic}\s+TopicId: \S+\s+PartitionCount: {partitions}\s+ReplicationFactor: {c.rf}\s",
        f"--describe: PartitionCount: {partitions}, ReplicationFactor: {c.rf}",
    )
    parts = re.findall(rf"Topic: {topic}\s+Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]*)", d)
    c.expect(
        sorted(int(p) for p, *_ in parts) == list(range(partitions)),
        f"--describe: one row for each of partitions 0..{partitions - 1}",
    )
    leaders = c.leaders(topic)
    for p, leader, replicas, isr in parts:
        reps = replicas.split(",")
        c.expect(
            len(reps) == c.rf and leader in reps and sorted(isr.split(",")) == sorted(reps),
            f"--describe: partition {p} with {c.rf} replicas, its leader among them and every replica in the ISR",
        )
        c.expect(
            int(leader) == leaders[int(p)], f"--describe: partition {p}'s leader as Metadata has it ({leaders[int(p)]})"
        )


@case("kafka-topics --describe")
def topics_describe(c: Ctx) -> None:
    t = c.name("described")
    c.create_topic(t, 3)
    check_described(c, t, 3)


@case("kafka-topics --alter --partitions")
def topics_alter(c: Ctx) -> None:
    t = c.name("grown")
    c.create_topic(t, 2)
    c.kt("kafka-topics", "--alter", "--topic", t, "--partitions", "5")

    def grown() -> bool:
        d = c.kt("kafka-topics", "--describe", "--topic", t).out
        return (
            re.search(r"PartitionCount: 5\s", d) is not None and len(re.findall(r"Partition: \d+\s+Leader: \d", d)) == 5
        )

    c.until("--describe: PartitionCount: 5 and five partitions with leaders", grown)
    check_described(c, t, 5)


@case("kafka-topics --delete")
def topics_delete(c: Ctx) -> None:
    t = c.name("deleted")
    c.create_topic(t)
    c.kt("kafka-topics", "--delete", "--topic", t)
    c.until(f"--list no longer to name {t}", lambda: t not in c.kt("kafka-topics", "--list").out.split())


# --------------------------------------------------------------------------------------------
# kafka-configs


@case("kafka-configs topic --add-config", short=True)
def configs_topic_add(c: Ctx) -> None:
    t = c.name("configured")
    c.create_topic(t)
    r = c.kt(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        t,
        "--add-config",
        "retention.ms=7200000,cleanup.policy=compact",
    )
    c.expect_in(r.out, f"Completed updating config for topic {t}.")
    d = c.kt("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", t).out
    c.expect_in(d, f"Dynamic configs for topic {t} are:")
    c.expect_re(
        d,
        r"^\s+retention\.ms=7200000 sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG:retention\.ms=7200000",
        "--describe: retention.ms=7200000 as a DYNAMIC_TOPIC_CONFIG",
    )
    c.expect_re(
        d,
        r"^\s+cleanup\.policy=compact sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG:cleanup\.policy=compact",
        "--describe: cleanup.policy=compact as a DYNAMIC_TOPIC_CONFIG",
    )


@case("kafka-configs topic --delete-config")
def configs_topic_delete(c: Ctx) -> None:
    t = c.name("unconfigured")
    c.create_topic(t, config={"cleanup.policy": "compact", "retention.ms": "7200000"})
    c.kt("kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", t, "--delete-config", "cleanup.policy")
    d = c.kt("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", t).out
    c.expect_re(d, r"^\s+retention\.ms=7200000 ", "--describe: retention.ms=7200000 kept")
    c.expect("cleanup.policy=compact" not in d, "--describe: cleanup.policy=compact gone")
    a = c.kt("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", t, "--all").out
    c.expect_re(
        a,
        r"^\s+cleanup\.policy=delete sensitive=false synonyms=\{DEFAULT_CONFIG:log\.cleanup\.policy=delete\}",
        "--describe --all: cleanup.policy back to the default, delete (DEFAULT_CONFIG log.cleanup.policy)",
    )


@case("kafka-configs broker --add-config/--delete-config")
def configs_broker(c: Ctx) -> None:
    c.kt(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--add-config",
        "message.max.bytes=2000000,log.cleaner.min.cleanable.ratio=0.3",
    )
    d = c.kt("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "1").out
    c.expect_in(d, "Dynamic configs for broker 1 are:")
    c.expect_re(
        d,
        r"^\s+message\.max\.bytes=2000000 sensitive=false synonyms=\{DYNAMIC_BROKER_CONFIG:message\.max\.bytes=2000000",
        "--describe: message.max.bytes=2000000 as a DYNAMIC_BROKER_CONFIG of broker 1",
    )
    c.expect_re(
        d,
        r"^\s+log\.cleaner\.min\.cleanable\.ratio=0\.3 sensitive=false synonyms=\{DYNAMIC_BROKER_CONFIG:",
        "--describe: log.cleaner.min.cleanable.ratio=0.3 as a DYNAMIC_BROKER_CONFIG of broker 1",
    )
    c.kt(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--delete-config",
        "message.max.bytes,log.cleaner.min.cleanable.ratio",
    )
    d = c.kt("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "1").out
    c.expect(
        "message.max.bytes=2000000" not in d and "cleanable.ratio=0.3" not in d,
        "--describe after --delete-config: neither dynamic config left on broker 1",
    )


@case("kafka-configs broker --entity-default")
def configs_broker_default(c: Ctx) -> None:
    r = c.kt(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        "log.retention.ms=86400000",
    )
    c.expect_in(r.out, "Completed updating default config for brokers in the cluster.")
    d = c.kt("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-default").out
    c.expect_re(
        d,
        r"^\s+log\.retention\.ms=86400000 sensitive=false synonyms=\{DYNAMIC_DEFAULT_BROKER_CONFIG:log\.retention\.ms=86400000",
        "--describe --entity-default: log.retention.ms=86400000 as a DYNAMIC_DEFAULT_BROKER_CONFIG",
    )
    t = c.name("retention-default")
    c.create_topic(t)
    a = c.kt("kafka-configs", "--describe", "--entity-type", "topics", "--entity-name", t, "--all").out
    c.expect_re(
        a,
        r"^\s+retention\.ms=86400000 sensitive=false synonyms=\{DYNAMIC_DEFAULT_BROKER_CONFIG:log\.retention\.ms=86400000",
        "a new topic's retention.ms to be the cluster default 86400000",
    )
    c.kt(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--delete-config",
        "log.retention.ms",
    )


@case("kafka-configs broker --describe --all")
def configs_broker_all(c: Ctx) -> None:
    d = c.kt("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all").out
    c.expect_in(d, "All configs for broker 1 are:")
    c.expect_re(
        d,
        r"^\s+num\.partitions=1 sensitive=false synonyms=\{STATIC_BROKER_CONFIG:num\.partitions=1",
        "num.partitions=1 as a STATIC_BROKER_CONFIG (the suite's brokers start with it)",
    )
    c.expect_re(
        d,
        r"^\s+log\.segment\.bytes=268435456 sensitive=false synonyms=\{STATIC_BROKER_CONFIG:",
        "log.segment.bytes=268435456 as a STATIC_BROKER_CONFIG",
    )
    c.expect_re(
        d,
        rf"^\s+authorizer\.class\.name={re.escape(STANDARD_AUTHORIZER)} ",
        "authorizer.class.name: the StandardAuthorizer",
    )


@case("kafka-configs client quotas")
def configs_quotas(c: Ctx) -> None:
    c.kt(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-name",
        "app1",
        "--add-config",
        "producer_byte_rate=1048576,consumer_byte_rate=2097152",
    )
    d = c.kt(
        "kafka-configs",
        "--describe",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-name",
        "app1",
    ).out
    c.expect_in(
        d,
        "Quota configs for user-principal 'alice', client-id 'app1' are "
        "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0",
    )
    c.kt(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "clients",
        "--entity-default",
        "--add-config",
        "consumer_byte_rate=4194304",
    )
    d = c.kt("kafka-configs", "--describe", "--entity-type", "clients", "--entity-default").out
    c.expect_in(d, "Quota configs for the default client-id are consumer_byte_rate=4194304.0")


@case("kafka-configs client quota (request_percentage)")
def configs_quota_request_percentage(c: Ctx) -> None:
    c.kt(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        "app2",
        "--add-config",
        "request_percentage=50",
    )
    d = c.kt("kafka-configs", "--describe", "--entity-type", "clients", "--entity-name", "app2").out
    c.expect_in(d, "Quota configs for client-id 'app2' are request_percentage=50.0")


@case("kafka-configs users SCRAM credentials")
def configs_scram(c: Ctx) -> None:
    for mech in ("SCRAM-SHA-256=[iterations=8192,password=carol-secret]", "SCRAM-SHA-512=[password=carol-secret]"):
        r = c.kt("kafka-configs", "--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config", mech)
        c.expect_in(r.out, "Completed updating config for user carol.")
    d = c.kt("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", "carol").out
    m = c.expect_re(d, r"SCRAM credential configs for user-principal 'carol' are (.*)$")
    c.expect(
        sorted(x.strip() for x in m.group(1).split(","))
        == ["SCRAM-SHA-256=iterations=8192", "SCRAM-SHA-512=iterations=4096"],
        "both credentials with their iterations, in either order (Kafka's order varies)",
    )
    c.kt(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "carol",
        "--delete-config",
        "SCRAM-SHA-512",
    )
    d = c.kt("kafka-configs", "--describe", "--entity-type", "users", "--entity-name", "carol").out
    c.expect_re(
        d,
        r"SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192\s*$",
        "after --delete-config SCRAM-SHA-512: only the SCRAM-SHA-256 credential",
    )


@case("kafka-configs group --add-config")
def configs_group(c: Ctx) -> None:
    g = c.name("configured-group")
    r = c.kt(
        "kafka-configs",
        "--alter",
        "--entity-type",
        "groups",
        "--entity-name",
        g,
        "--add-config",
        "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000",
    )
    c.expect_in(r.out, f"Completed updating config for group {g}.")
    d = c.kt("kafka-configs", "--describe", "--entity-type", "groups", "--entity-name", g).out
    c.expect_re(d, r"^\s+consumer\.session\.timeout\.ms=50000 ", "--describe: consumer.session.timeout.ms=50000")
    c.expect_re(d, r"^\s+consumer\.heartbeat\.interval\.ms=6000 ", "--describe: consumer.heartbeat.interval.ms=6000")


# --------------------------------------------------------------------------------------------
# kafka-consumer-groups, kafka-groups


def lagged_group(c: Ctx, stem: str) -> tuple[str, str]:
    """A topic of 2 partitions with 10 records each and a group that committed 4 and 10."""
    t, g = c.name(f"{stem}-topic"), c.name(f"{stem}-group")
    c.create_topic(t, 2)
    c.produce(t, [str(i).encode() for i in range(10)], partition=0)
    c.produce(t, [str(i).encode() for i in range(10)], partition=1)
    c.commit(g, {(t, 0): 4, (t, 1): 10})
    return t, g


def offsets_table(c: Ctx, text: str, group: str) -> dict[tuple[str, int], list[str]]:
    """--describe's rows of `group`: (topic, partition) -> [current, log end, lag, consumer id, ...]."""
    return {(r[1], int(r[2])): r[3:] for r in rows(text) if len(r) >= 6 and r[0] == group and r[2].isdigit()}


@case("kafka-consumer-groups --list")
def groups_list(c: Ctx) -> None:
    t, g = lagged_group(c, "listed")
    out = c.kt("kafka-consumer-groups", "--list").out
    c.expect(g in out.split(), f"--list to name {g}")
    out = c.kt("kafka-consumer-groups", "--list", "--state").out
    c.expect([g, "Empty"] in rows(out), f"--list --state: {g} Empty")


@case("kafka-consumer-groups --describe (lag)", short=True)
def groups_describe_lag(c: Ctx) -> None:
    t, g = lagged_group(c, "lagging")
    out = c.kt("kafka-consumer-groups", "--describe", "--group", g).out
    table = offsets_table(c, out, g)
    c.expect(table.get((t, 0), [])[:3] == ["4", "10", "6"], f"--describe: {t} partition 0 at 4 of 10, LAG 6")
    c.expect(table.get((t, 1), [])[:3] == ["10", "10", "0"], f"--describe: {t} partition 1 at 10 of 10, LAG 0")


@case("kafka-consumer-groups --describe --members (active consumer)")
def groups_members(c: Ctx) -> None:
    from confluent_kafka import Consumer

    t, g = c.name("members-topic"), c.name("members-group")
    c.create_topic(t, 2)
    c.produce(t, [b"x"] * 4)
    stop = threading.Event()
    assigned = threading.Event()
    cons = Consumer(
        {"bootstrap.servers": c.bs, "group.id": g, "client.id": "kt-member", "auto.offset.reset": "earliest"}
    )

    def loop() -> None:
        cons.subscribe([t], on_assign=lambda _c, parts: assigned.set() if parts else None)
        while not stop.is_set():
            cons.poll(0.2)
        cons.close()

    th = threading.Thread(target=loop, daemon=True)
    th.start()
    try:
        c.expect(assigned.wait(30), f"set-up: a consumer of {g} to be assigned {t}'s partitions")
        out = c.kt("kafka-consumer-groups", "--describe", "--group", g, "--members").out
        m = [r for r in rows(out) if r and r[0] == g]
        c.expect(
            len(m) == 1 and m[0][-1] == "2" and m[0][3] == "kt-member" and m[0][1].startswith("kt-member"),
            f"--describe --members: one member of {g}, CLIENT-ID kt-member, #PARTITIONS 2",
        )
        out = c.kt("kafka-consumer-groups", "--describe", "--group", g, "--state").out
        st = [r for r in rows(out) if r and r[0] == g]
        c.expect(st and st[0][-2:] == ["Stable", "1"], f"--describe --state: {g} Stable with 1 member")
    finally:
        stop.set()
        th.join(15)


@case("kafka-consumer-groups --reset-offsets --execute")
def groups_reset(c: Ctx) -> None:
    t, g = lagged_group(c, "reset")
    out = c.kt("kafka-consumer-groups", "--reset-offsets", "--group", g, "--topic", t, "--to-earliest", "--execute").out
    c.expect(
        [g, t, "0", "0"] in rows(out) and [g, t, "1", "0"] in rows(out),
        "--reset-offsets --to-earliest: NEW-OFFSET 0 for partitions 0 and 1",
    )
    out = c.kt(
        "kafka-consumer-groups", "--reset-offsets", "--group", g, "--topic", f"{t}:1", "--to-offset", "3", "--execute"
    ).out
    c.expect([g, t, "1", "3"] in rows(out), "--reset-offsets --to-offset 3 on partition 1: NEW-OFFSET 3")
    table = offsets_table(c, c.kt("kafka-consumer-groups", "--describe", "--group", g).out, g)
    c.expect(
        table.get((t, 0), [])[:3] == ["0", "10", "10"] and table.get((t, 1), [])[:3] == ["3", "10", "7"],
        "--describe after the resets: partition 0 at 0 (LAG 10), partition 1 at 3 (LAG 7)",
    )


@case("kafka-consumer-groups --delete-offsets")
def groups_delete_offsets(c: Ctx) -> None:
    t, g = lagged_group(c, "offsets-deleted")
    out = c.kt("kafka-consumer-groups", "--delete-offsets", "--group", g, "--topic", f"{t}:1").out
    c.expect_in(out, f"Request succeeded for deleting offsets from group {g}.")
    c.expect([t, "1", "Successful"] in rows(out), f"--delete-offsets: {t} 1 Successful")
    table = offsets_table(c, c.kt("kafka-consumer-groups", "--describe", "--group", g).out, g)
    c.expect(sorted(table) == [(t, 0)], "--describe: partition 0's offset only")


@case("kafka-consumer-groups --delete")
def groups_delete(c: Ctx) -> None:
    t, g = lagged_group(c, "deleted")
    out = c.kt("kafka-consumer-groups", "--delete", "--group", g).out
    c.expect_in(out, f"Deletion of requested consumer groups ('{g}') was successful.")
    c.expect(g not in c.kt("kafka-consumer-groups", "--list").out.split(), f"--list no longer to name {g}")


@case("kafka-groups --list (types)")
def groups_types(c: Ctx) -> None:
    t = c.name("typed")
    c.create_topic(t)
    c.produce(t, [b"x"] * 5)
    classic, consumer = c.name("classic-group"), c.name("consumer-group")
    c.consume_all(classic, t, 5, "classic")
    c.consume_all(consumer, t, 5, "consumer")
    out = rows(c.kt("kafka-groups", "--list").out)
    c.expect([classic, "Classic", "consumer"] in out, f"--list: {classic} TYPE Classic PROTOCOL consumer")
    c.expect(
        [consumer, "Consumer", "consumer"] in out,
        f"--list: {consumer} (a KIP-848 group whose member left) TYPE Consumer PROTOCOL consumer",
    )
    out = rows(c.kt("kafka-groups", "--list", "--group-type", "consumer").out)
    c.expect(
        [consumer, "Consumer", "consumer"] in out and not any(r[0] == classic for r in out),
        f"--list --group-type consumer: {consumer} only",
    )


# --------------------------------------------------------------------------------------------
# share groups: kafka-console-share-consumer, kafka-share-groups, kafka-groups --share


def share_group_ran(c: Ctx) -> tuple[str, str]:
    """A share group (auto.offset.reset=earliest, a group config set with kafka-configs) whose
    console share consumer read all 10 records of a 2-partition topic and left."""

    def build(c: Ctx) -> tuple[str, str]:
        t, g = c.name("shared-topic"), c.name("share-group")
        c.create_topic(t, 2)
        c.produce(t, [str(i).encode() for i in range(10)], keys=[str(i).encode() for i in range(10)])
        c.kt(
            "kafka-configs",
            "--alter",
            "--entity-type",
            "groups",
            "--entity-name",
            g,
            "--add-config",
            "share.auto.offset.reset=earliest",
        )
        r = c.kt(
            "kafka-console-share-consumer", "--topic", t, "--group", g, "--max-messages", "10", "--timeout-ms", "30000"
        )
        got = sorted(int(v) for v in r.out.split())
        c.expect(got == list(range(10)), f"kafka-console-share-consumer to print the 10 values 0..9 (got {got})")
        return t, g

    return c.fixture("share group", build)  # type: ignore[return-value]


@case("kafka-console-share-consumer")
def share_consumer(c: Ctx) -> None:
    share_group_ran(c)


@case("kafka-share-groups --list")
def share_list(c: Ctx) -> None:
    _, g = share_group_ran(c)
    c.expect(g in c.kt("kafka-share-groups", "--list").out.split(), f"--list to name {g}")


@case("kafka-share-groups --describe")
def share_describe(c: Ctx) -> None:
    t, g = share_group_ran(c)
    out = rows(c.kt("kafka-share-groups", "--describe", "--group", g).out)
    parts = {(r[1], r[2]): r for r in out if r[0] == g and len(r) == 5}
    c.expect(
        sorted(parts) == [(t, "0"), (t, "1")] and all(r[4] == "0" for r in parts.values()),
        f"--describe: {t} partitions 0 and 1, LAG 0 (every record acknowledged)",
    )
    out = rows(c.kt("kafka-share-groups", "--describe", "--group", g, "--state").out)
    st = [r for r in out if r and r[0] == g]
    c.expect(st and st[0][-2:] == ["Empty", "0"], f"--describe --state: {g} Empty with 0 members")


@case("kafka-groups --list --share")
def groups_share(c: Ctx) -> None:
    _, g = share_group_ran(c)
    out = rows(c.kt("kafka-groups", "--list", "--share").out)
    c.expect([g, "Share", "share"] in out, f"--list --share: {g} TYPE Share PROTOCOL share")


# --------------------------------------------------------------------------------------------
# offsets and records: kafka-get-offsets, kafka-delete-records, kafka-log-dirs


@case("kafka-get-offsets", short=True)
def get_offsets(c: Ctx) -> None:
    t = c.name("offsets")
    c.create_topic(t, 2)
    base = (int(time.time()) - 3600) * 1000
    c.produce(t, [str(i).encode() for i in range(10)], partition=0, timestamps=[base + i * 1000 for i in range(10)])
    c.produce(t, [str(i).encode() for i in range(7)], partition=1)
    out = c.kt("kafka-get-offsets", "--topic", t).out.split()
    c.expect(sorted(out) == [f"{t}:0:10", f"{t}:1:7"], f"latest offsets {t}:0:10 and {t}:1:7")
    out = c.kt("kafka-get-offsets", "--topic", t, "--time", "-2").out.split()
    c.expect(sorted(out) == [f"{t}:0:0", f"{t}:1:0"], f"earliest offsets {t}:0:0 and {t}:1:0")
    out = c.kt("kafka-get-offsets", "--topic-partitions", f"{t}:0", "--time", str(base + 5500)).out.split()
    c.expect(out == [f"{t}:0:6"], f"the first offset at or after timestamp base+5.5s: {t}:0:6")


@case("kafka-delete-records")
def delete_records(c: Ctx) -> None:
    t = c.name("truncated")
    c.create_topic(t)
    c.produce(t, [str(i).encode() for i in range(10)])
    plan = c.write(
        "delete-records.json", json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "offset": 3}]})
    )
    out = c.kt("kafka-delete-records", "--offset-json-file", plan).out
    c.expect_re(out, rf"partition: {t}-0\s+low_watermark: 3", f"partition: {t}-0 low_watermark: 3")
    out = c.kt("kafka-get-offsets", "--topic", t, "--time", "-2").out.split()
    c.expect(out == [f"{t}:0:3"], f"kafka-get-offsets --time -2 after the deletion: {t}:0:3")


@case("kafka-log-dirs --describe")
def log_dirs(c: Ctx) -> None:
    t = c.name("on-disk")
    c.create_topic(t, 2)
    for partition in (0, 1):  # both partitions get records (a sticky partitioner may not spread 20)
        c.produce(t, [b"v" * 100] * 10, partition=partition)
    out = c.kt("kafka-log-dirs", "--describe", "--topic-list", t).out
    line = next((ln for ln in out.splitlines() if ln.startswith("{")), None)
    c.expect(line, "a JSON line describing the brokers' log directories")
    doc = json.loads(line)  # type: ignore[arg-type]
    brokers = {b["broker"]: b for b in doc["brokers"]}
    c.expect(sorted(brokers) == list(range(1, c.n + 1)), f"every broker (1..{c.n}) described")
    replicas: dict[str, int] = {}
    for bid, b in brokers.items():
        want = sorted(str(Path(d).resolve()) for d in c.run.target.log_dirs[bid - 1])
        dirs = [d for d in b["logDirs"] if d["error"] is None]
        c.expect(
            sorted(str(Path(d["logDir"]).resolve()) for d in dirs) == want,
            f"broker {bid}'s {len(want)} log directories, {want}, without error",
        )
        for d in dirs:
            for p in d["partitions"]:
                if p["partition"].startswith(t + "-"):
                    c.expect(
                        p["size"] > 0 and not p["isFuture"], f"broker {bid}: {p['partition']} with records (size > 0)"
                    )
                    replicas[p["partition"]] = replicas.get(p["partition"], 0) + 1
    c.expect(replicas == {f"{t}-0": c.rf, f"{t}-1": c.rf}, f"{t}-0 and {t}-1 each on {c.rf} broker(s)")


# --------------------------------------------------------------------------------------------
# the cluster: kafka-metadata-quorum, kafka-features, kafka-cluster, kafka-broker-api-versions


@case("kafka-metadata-quorum describe --status", short=True)
def quorum_status(c: Ctx) -> None:
    out = c.kt("kafka-metadata-quorum", "describe", "--status").out
    c.expect_re(out, rf"^ClusterId:\s+{re.escape(c.cluster_id())}$", "ClusterId: the cluster id of meta.properties")
    leader = int(c.expect_re(out, r"^LeaderId:\s+(\d+)$").group(1))
    c.expect(1 <= leader <= c.n, f"LeaderId: one of the nodes 1..{c.n}")
    c.expect_re(out, r"^HighWatermark:\s+\d+$", "HighWatermark: a number")
    voters = json.loads(c.expect_re(out, r"^CurrentVoters:\s+(\[.*\])$").group(1))
    c.expect(sorted(v["id"] for v in voters) == list(range(1, c.n + 1)), f"CurrentVoters: ids 1..{c.n}")
    if c.n > 1:
        c.expect(
            all(v.get("endpoints") and v["endpoints"][0].startswith("CONTROLLER://127.0.0.1:") for v in voters),
            "CurrentVoters: each voter's CONTROLLER endpoint",
        )


@case("kafka-metadata-quorum describe --replication")
def quorum_replication(c: Ctx) -> None:
    out = rows(c.kt("kafka-metadata-quorum", "describe", "--replication").out)
    body = [r for r in out[1:] if r and r[0].isdigit()]
    c.expect(sorted(int(r[0]) for r in body) == list(range(1, c.n + 1)), f"a row for each voter 1..{c.n}")
    status = sorted(r[-1] for r in body)
    c.expect(status == sorted(["Leader"] + ["Follower"] * (c.n - 1)), f"one Leader and {c.n - 1} Follower(s)")
    c.expect(all(r[3].isdigit() and int(r[3]) < 1000 for r in body), "every voter's Lag a small number")


@case("kafka-features describe", short=True)
def features(c: Ctx) -> None:
    out = c.kt("kafka-features", "describe").out
    finalized = dict(re.findall(r"^Feature: (\S+)\s+.*FinalizedVersionLevel: (\S+)\s", out, re.M))
    c.expect(
        re.fullmatch(r"\d+\.\d+-IV\d+", finalized.get("metadata.version", "")),
        "metadata.version finalized at a named level (e.g. 4.1-IV1)",
    )
    c.expect(finalized.get("group.version") == "1", "group.version finalized at 1 (KIP-848 consumer groups)")
    c.expect(finalized.get("transaction.version", "0") != "0", "transaction.version finalized above 0")
    c.expect(finalized.get("share.version", "0") != "0", "share.version finalized above 0 (share groups)")
    c.expect("kraft.version" in finalized, "kraft.version described")


@case("kafka-cluster cluster-id", short=True)
def cluster_id(c: Ctx) -> None:
    out = c.tool("kafka-cluster", "cluster-id", "--bootstrap-server", c.bs).out
    c.expect_re(out, rf"^Cluster ID: {re.escape(c.cluster_id())}$", "Cluster ID: the cluster id of meta.properties")


@case("kafka-cluster list-endpoints")
def cluster_endpoints(c: Ctx) -> None:
    out = rows(c.tool("kafka-cluster", "list-endpoints", "--bootstrap-server", c.bs).out)
    c.expect(out and out[0][:2] == ["ID", "HOST"], "a table with ID and HOST columns")
    ports = {i + 1: hp.rsplit(":", 1)[1] for i, hp in enumerate(c.bs.split(","))}
    got = {int(r[0]): r for r in out[1:]}
    c.expect(sorted(got) == list(range(1, c.n + 1)), f"a row for each broker 1..{c.n}")
    for nid, r in got.items():
        c.expect(
            r[1:3] == ["127.0.0.1", ports[nid]] and r[-2:] == ["unfenced", "broker"],
            f"broker {nid} at 127.0.0.1:{ports[nid]}, unfenced, ENDPOINT_TYPE broker",
        )


@case("kafka-broker-api-versions", short=True)
def api_versions(c: Ctx) -> None:
    out = c.kt("kafka-broker-api-versions").out
    blocks = re.split(r"^(?=\S+ \(id: \d+ rack)", out, flags=re.M)
    by_id = {int(m.group(1)): b for b in blocks if (m := re.match(r"\S+ \(id: (\d+) rack: null isFenced: false\)", b))}
    c.expect(sorted(by_id) == list(range(1, c.n + 1)), f"every broker 1..{c.n}, unfenced")
    for nid, b in by_id.items():
        for api in (
            "Produce(0)",
            "Fetch(1)",
            "ListOffsets(2)",
            "Metadata(3)",
            "ApiVersions(18)",
            "CreateTopics(19)",
            "DescribeTopicPartitions(75)",
        ):
            c.expect_re(
                b, rf"^\s+{re.escape(api)}: \d+( to \d+)? \[usable: \d+\]", f"broker {nid}: {api} with a usable version"
            )


# --------------------------------------------------------------------------------------------
# kafka-leader-election, kafka-reassign-partitions (three nodes)


def reassigned(c: Ctx, topic: str, plan: str) -> None:
    r = c.kt("kafka-reassign-partitions", "--reassignment-json-file", plan, "--execute").out
    c.expect_in(r, f"Successfully started partition reassignment for {topic}-0")
    c.until(
        f"--verify: 'Reassignment of partition {topic}-0 is completed.'",
        lambda: (
            f"Reassignment of partition {topic}-0 is completed."
            in c.kt("kafka-reassign-partitions", "--reassignment-json-file", plan, "--verify").out
        ),
        tries=20,
        pause=1.0,
    )


def replicas_line(c: Ctx, topic: str) -> tuple[int, list[str], list[str]]:
    d = c.kt("kafka-topics", "--describe", "--topic", topic).out
    m = c.expect_re(
        d, r"Partition: 0\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]*)", f"--describe: a row for {topic}-0"
    )
    return int(m.group(1)), m.group(2).split(","), m.group(3).split(",")


@case("kafka-leader-election --election-type preferred", sizes=(3,))
def leader_election(c: Ctx) -> None:
    t = c.name("elected")
    c.create_topic(t, assignment=[[1, 2]])
    c.produce(t, [str(i).encode() for i in range(20)])
    plan = c.write(
        "reorder.json", json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "replicas": [2, 1]}]})
    )
    reassigned(c, t, plan)  # the same replicas, 2 now preferred; 1 keeps the leadership
    leader, replicas, _ = replicas_line(c, t)
    c.expect(replicas == ["2", "1"] and leader == 1, "before the election: Replicas 2,1 with Leader 1")
    out = c.kt("kafka-leader-election", "--election-type", "preferred", "--topic", t, "--partition", "0").out
    c.expect_in(out, f"Successfully completed leader election (PREFERRED) for partitions {t}-0")
    c.until("--describe after the election: Leader 2 (the preferred replica)", lambda: replicas_line(c, t)[0] == 2)


@case("kafka-reassign-partitions --execute/--verify with log_dirs (a replica between log directories)", short=True)
def reassign_log_dirs(c: Ctx) -> None:
    """AlterReplicaLogDirs through the tool: the plan keeps the replicas and names a log
    directory for one replica, the other one of its broker's two (the leader's on one node, a
    follower's on three); --verify asks DescribeLogDirs until the replica is there. The records
    are all still readable, and on three nodes the moved follower keeps replicating (back in
    the ISR after more records)."""
    from confluent_kafka import Consumer, TopicPartition

    t = c.name("jbod")
    c.create_topic(t)
    values = [f"r{i}".encode() * 50 for i in range(2000)]
    c.produce(t, values[:1000])
    leader = c.leaders(t)[0]
    replicas = c.run.admin.list_topics(t, timeout=10).topics[t].partitions[0].replicas
    mover = leader if c.n == 1 else next(r for r in replicas if r != leader)
    here = c.replica_dir(mover, t, 0)
    c.expect(here is not None, f"{t}-0's directory on broker {mover}")
    src = here.parent  # type: ignore[union-attr]
    dest = next(Path(d) for d in c.run.target.log_dirs[mover - 1] if Path(d).resolve() != src.resolve())
    plan = c.write(
        "jbod.json",
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {
                        "topic": t,
                        "partition": 0,
                        "replicas": replicas,
                        "log_dirs": [str(dest.resolve()) if r == mover else "any" for r in replicas],
                    }
                ],
            }
        ),
    )
    out = c.kt("kafka-reassign-partitions", "--reassignment-json-file", plan, "--execute").out
    c.expect_in(
        out, f"Successfully started moving log directory to {dest.resolve()} for replica {t}-0 with broker {mover}"
    )
    c.until(
        f"--verify: 'Reassignment of replica {t}-0-{mover} completed successfully.'",
        lambda: (
            f"Reassignment of replica {t}-0-{mover} completed successfully."
            in c.kt("kafka-reassign-partitions", "--reassignment-json-file", plan, "--verify").out
        ),
        tries=30,
        pause=1.0,
    )
    c.until(
        f"{t}-0 in {dest} and no longer in {src} on broker {mover}",
        lambda: (
            (lambda d: d is not None and d.parent.resolve() == dest.resolve())(c.replica_dir(mover, t, 0))
            and not (src / f"{t}-0").exists()
        ),
        tries=20,
        pause=0.5,
    )
    c.produce(t, values[1000:])
    if c.n > 1:
        c.until(
            f"broker {mover}'s moved replica in the ISR after 1000 more records",
            lambda: sorted(c.run.admin.list_topics(t, timeout=10).topics[t].partitions[0].isrs) == sorted(replicas),
            tries=30,
            pause=0.5,
        )
    cons = Consumer({"bootstrap.servers": c.bs, "group.id": c.name("jbod-reader"), "enable.auto.commit": False})
    cons.assign([TopicPartition(t, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 2000 and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    cons.close()
    c.expect(got == values, f"all 2000 records of {t}-0 after the move, in order")


@case("kafka-reassign-partitions --generate", sizes=(3,))
def reassign_generate(c: Ctx) -> None:
    t = c.name("planned")
    c.create_topic(t, 3, rf=2)
    topics = c.write("topics-to-move.json", json.dumps({"version": 1, "topics": [{"topic": t}]}))
    out = c.kt(
        "kafka-reassign-partitions", "--topics-to-move-json-file", topics, "--broker-list", "1,2,3", "--generate"
    ).out
    m = re.search(
        r"Current partition replica assignment\s*\n(\{.*\})\s*\n+Proposed partition reassignment "
        r"configuration\s*\n(\{.*\})",
        out,
    )
    c.expect(m, "the current assignment and a proposed one, each as JSON")
    current, proposed = json.loads(m.group(1)), json.loads(m.group(2))  # type: ignore[union-attr]
    t_md = c.run.admin.list_topics(t, timeout=10).topics[t]
    c.expect(
        {p["partition"]: p["replicas"] for p in current["partitions"]}
        == {p: md.replicas for p, md in t_md.partitions.items()},
        "the current assignment as Metadata has it",
    )
    c.expect(
        sorted(p["partition"] for p in proposed["partitions"]) == [0, 1, 2]
        and all(len(set(p["replicas"])) == 2 and set(p["replicas"]) <= {1, 2, 3} for p in proposed["partitions"]),
        "a proposal for partitions 0..2, two distinct replicas each among brokers 1, 2, 3",
    )


@case("kafka-reassign-partitions --execute/--verify", sizes=(3,))
def reassign_execute(c: Ctx) -> None:
    from confluent_kafka import Consumer, TopicPartition

    t = c.name("moved")
    c.create_topic(t, assignment=[[1, 2]])
    c.produce(t, [str(i).encode() for i in range(100)])
    plan = c.write(
        "move.json", json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "replicas": [3, 2]}]})
    )
    reassigned(c, t, plan)
    c.until(
        "--describe after the move: Replicas 3,2 and both in the ISR",
        lambda: (lambda r: r[1] == ["3", "2"] and sorted(r[2]) == ["2", "3"])(replicas_line(c, t)),
    )
    c.until(
        f"{t}-0's copy gone from broker 1's log directory", lambda: c.replica_dir(1, t, 0) is None, tries=20, pause=0.5
    )
    on3 = c.replica_dir(3, t, 0)
    c.expect(on3 is not None and segments(on3), f"{t}-0's segments on broker 3")
    cons = Consumer({"bootstrap.servers": c.bs, "group.id": c.name("moved-reader"), "enable.auto.commit": False})
    cons.assign([TopicPartition(t, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 100 and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    cons.close()
    c.expect(got == [str(i).encode() for i in range(100)], "the 100 records readable, in order, after the move")


# --------------------------------------------------------------------------------------------
# kafka-transactions


def transactions(c: Ctx) -> tuple[str, str, str]:
    """A topic with a committed transaction (tx id 'kt-tx-done', 5 records) and an open one
    ('kt-tx-open', 1 record, left open until the run ends)."""

    def build(c: Ctx) -> tuple[str, str, str]:
        from confluent_kafka import Producer

        t, done, open_ = c.name("transactional"), c.name("tx-done"), c.name("tx-open")
        c.create_topic(t)
        p = Producer({"bootstrap.servers": c.bs, "transactional.id": done})
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(5):
            p.produce(t, str(i).encode())
        p.commit_transaction(60)
        # open for the rest of the run: longer than the default 60 s transaction timeout
        q = Producer({"bootstrap.servers": c.bs, "transactional.id": open_, "transaction.timeout.ms": 600000})
        q.init_transactions(60)
        q.begin_transaction()
        q.produce(t, b"open")
        c.expect(q.flush(30) == 0, "set-up: the open transaction's record delivered")
        c.run.closers.append(lambda: q.abort_transaction(30))
        return t, done, open_

    return c.fixture("transactions", build)  # type: ignore[return-value]


@case("kafka-transactions list")
def transactions_list(c: Ctx) -> None:
    _, done, open_ = transactions(c)
    out = rows(c.kt("kafka-transactions", "list").out)
    by_id = {r[0]: r for r in out[1:]}
    c.expect(by_id.get(done, [""])[-1] == "CompleteCommit", f"{done} in state CompleteCommit")
    c.expect(by_id.get(open_, [""])[-1] == "Ongoing", f"{open_} in state Ongoing")


@case("kafka-transactions describe")
def transactions_describe(c: Ctx) -> None:
    t, _, open_ = transactions(c)
    out = rows(c.kt("kafka-transactions", "describe", "--transactional-id", open_).out)
    c.expect(
        len(out) == 2 and out[1][1] == open_ and out[1][4] == "Ongoing" and out[1][-1] == f"{t}-0",
        f"{open_}: Ongoing, with {t}-0 among its TopicPartitions",
    )


@case("kafka-transactions describe-producers")
def transactions_producers(c: Ctx) -> None:
    t, _, _ = transactions(c)
    out = rows(c.kt("kafka-transactions", "describe-producers", "--topic", t, "--partition", "0").out)
    starts = sorted(r[-1] for r in out[1:])
    c.expect(
        starts == ["6", "None"],
        "two producers: the committed one (CurrentTransactionStartOffset None) and the "
        "open one (its transaction starting at offset 6, after 5 records and a marker)",
    )


# --------------------------------------------------------------------------------------------
# kafka-client-metrics


@case("kafka-client-metrics --alter/--describe")
def client_metrics(c: Ctx) -> None:
    r = c.kt(
        "kafka-client-metrics",
        "--alter",
        "--name",
        "kt-metrics",
        "--metrics",
        "org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator.rebalance.latency.max",
        "--interval",
        "60000",
        "--match",
        "client_id=app1",
    )
    c.expect_in(r.out, "Altered client metrics config for kt-metrics.")
    d = c.kt("kafka-client-metrics", "--describe", "--name", "kt-metrics").out
    c.expect_in(d, "Client metrics configs for kt-metrics are:")
    for line in (
        "interval.ms=60000",
        "match=client_id=app1",
        "metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator.rebalance.latency.max",
    ):
        c.expect_re(d, rf"^\s+{re.escape(line)}$", f"--describe: {line}")


@case("kafka-client-metrics --list")
def client_metrics_list(c: Ctx) -> None:
    c.kt(
        "kafka-client-metrics",
        "--alter",
        "--name",
        "kt-listed",
        "--metrics",
        "org.apache.kafka.producer.",
        "--interval",
        "30000",
    )
    out = c.kt("kafka-client-metrics", "--list").out.split()
    c.expect("kt-listed" in out, "--list to name kt-listed")


# --------------------------------------------------------------------------------------------
# kafka-dump-log: Kafka's tool reading the broker's own files


@case("kafka-dump-log --print-data-log", short=True)
def dump_records(c: Ctx) -> None:
    t = c.name("dumped")
    c.create_topic(t)
    c.produce(
        t,
        [f"value-{i}".encode() for i in range(20)],
        keys=[f"key-{i}".encode() for i in range(20)],
        **{"compression.type": "lz4", "linger.ms": 50},
    )
    seg = segments(c.partition_dir(t, 0))
    c.expect(seg, f"a segment file (00000000000000000000.log) in {t}-0's directory on its leader")
    out = c.tool("kafka-dump-log", "--files", str(seg[0]), "--print-data-log", "--deep-iteration").out
    c.expect_in(out, "Log starting offset: 0")
    batches = re.findall(
        r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*compresscodec: (\S+) crc: \d+ "
        r"isvalid: (\w+)$",
        out,
        re.M,
    )
    # librdkafka sends a batch uncompressed when lz4 would not make it smaller: a lone record
    # sent ahead of the rest (timing) is such a batch
    c.expect(
        batches
        and all(valid == "true" for *_, valid in batches)
        and all(codec == "lz4" for _, _, n, codec, _ in batches if int(n) > 1)
        and any(codec == "lz4" for *_, codec, _ in batches),
        "every batch with a valid CRC (isvalid: true), every batch of several records lz4-compressed",
    )
    c.expect(sum(int(n) for _, _, n, _, _ in batches) == 20, "20 records counted over the batches")
    recs = re.findall(
        r"^\| offset: (\d+) CreateTime: \d+ keySize: \d+ valueSize: \d+ sequence: -?\d+ headerKeys: "
        r"\[\] key: (\S+) payload: (\S+)$",
        out,
        re.M,
    )
    c.expect(
        recs == [(str(i), f"key-{i}", f"value-{i}") for i in range(20)],
        "records 0..19 in order, each with its key and value",
    )


@case("kafka-dump-log (transaction markers)")
def dump_markers(c: Ctx) -> None:
    t, _, _ = transactions(c)
    seg = segments(c.partition_dir(t, 0))
    c.expect(seg, f"a segment file in {t}-0's directory on its leader")
    out = c.tool("kafka-dump-log", "--files", str(seg[0]), "--print-data-log", "--deep-iteration").out
    c.expect_re(
        out,
        r"^baseOffset: 0 lastOffset: 4 count: 5 .*isTransactional: true isControl: false",
        "a transactional batch of offsets 0..4",
    )
    c.expect_re(out, r"^\| offset: 5 .*endTxnMarker: COMMIT coordinatorEpoch: \d+$", "a COMMIT marker at offset 5")
    c.expect_re(out, r"^\| offset: 6 .*payload: open$", "the open transaction's record at offset 6")


def file_holding(c: Ctx, topic_prefix: str, needle: bytes) -> list[Path]:
    """The segment files of the internal topic partition (on any node) whose records hold `needle`."""
    for d in (d for node in c.run.target.log_dirs for d in node):
        for pdir in sorted(Path(d).glob(f"{topic_prefix}-*")):
            segs = segments(pdir)
            if any(needle in s.read_bytes() for s in segs):
                return segs
    raise CaseFailed(f"a {topic_prefix} segment holding {needle!r}")


@case("kafka-dump-log --offsets-decoder")
def dump_offsets(c: Ctx) -> None:
    t, g = c.name("committed-topic"), c.name("decoded-group")
    c.create_topic(t)
    c.commit(g, {(t, 0): 7})
    segs = file_holding(c, "__consumer_offsets", g.encode())
    out = c.tool("kafka-dump-log", "--files", ",".join(map(str, segs)), "--offsets-decoder").out
    key = json.dumps({"type": "1", "data": {"group": g, "topic": t, "partition": 0}}, separators=(",", ":"))
    m = c.expect_re(out, rf"key: {re.escape(key)} payload: (\{{.*\}})$", f"an offset commit record with key {key}")
    c.expect(json.loads(m.group(1))["data"]["offset"] == 7, "its payload's offset 7")


@case("kafka-dump-log --transaction-log-decoder")
def dump_transaction_log(c: Ctx) -> None:
    _, done, _ = transactions(c)
    segs = file_holding(c, "__transaction_state", done.encode())
    out = c.tool("kafka-dump-log", "--files", ",".join(map(str, segs)), "--transaction-log-decoder").out
    key = json.dumps({"type": "0", "data": {"transactionalId": done}}, separators=(",", ":"))
    states = [
        json.loads(p)["data"]["transactionStatus"]
        for p in re.findall(rf"key: {re.escape(key)} payload: (\{{.*\}})$", out, re.M)
    ]
    c.expect(
        states and states[-1] == "CompleteCommit" and "Ongoing" in states,
        f"{done}'s transaction log records, Ongoing then (last) CompleteCommit",
    )


def rolled_segment(c: Ctx) -> Path:
    """A partition with a rolled segment (segment.bytes 1 MiB, 1500 records of 1 kB in ~16 kB
    batches): its first segment, no longer active, with both indexes written."""

    def build(c: Ctx) -> Path:
        t = c.name("rolled")
        c.create_topic(t, config={"segment.bytes": "1048576"})
        c.produce(
            t,
            [b"x" * 1000] * 1500,
            keys=[str(i).encode() for i in range(1500)],
            **{"batch.size": 16384, "compression.type": "none"},
        )
        pdir = c.partition_dir(t, 0)
        c.expect(len(segments(pdir)) >= 2, f"set-up: {t}-0 rolled to a second segment")
        return segments(pdir)[0]

    return c.fixture("rolled segment", build)  # type: ignore[return-value]


@case("kafka-dump-log (offset index of a rolled segment)")
def dump_offset_index(c: Ctx) -> None:
    log = rolled_segment(c)
    index = log.with_suffix(".index")
    c.expect(index.exists(), f"{index.name} next to {log.name}")
    out = c.tool("kafka-dump-log", "--files", str(index)).all  # mismatches are printed on stderr
    entries = re.findall(r"^offset: (\d+) position: (\d+)$", out, re.M)
    c.expect(len(entries) >= 10, "at least 10 index entries (one per 4 kB of batches)")
    c.expect("Mismatches in" not in out, "no 'Mismatches' between the index and the batches it points at")


@case("kafka-dump-log (time index of a rolled segment)")
def dump_time_index(c: Ctx) -> None:
    log = rolled_segment(c)
    index = log.with_suffix(".timeindex")
    c.expect(index.exists(), f"{index.name} next to {log.name}")
    out = c.tool("kafka-dump-log", "--files", str(index)).all  # mismatches are printed on stderr
    c.expect(re.search(r"^timestamp: \d+ offset: \d+$", out, re.M), "time index entries")
    c.expect(
        "Indexed offset" not in out and "timestamp mismatch" not in out.lower(),
        "no entry that differs from the batch it points at",
    )
    out = c.tool("kafka-dump-log", "--files", f"{log.with_suffix('.index')},{index}", "--index-sanity-check").out
    c.expect(out.count("passed sanity check") == 2, "--index-sanity-check: both indexes pass")


@case("kafka-dump-log --cluster-metadata-decoder")
def dump_metadata(c: Ctx) -> None:
    t = c.name("in-metadata")
    c.create_topic(t)
    mdir = c.data_dir(1) / "__cluster_metadata-0"
    segs = segments(mdir)
    c.expect(
        segs,
        f"a segment of the metadata log in {mdir.name} (files there: "
        f"{sorted(p.name for p in mdir.iterdir()) if mdir.is_dir() else 'none'})",
    )
    out = c.tool("kafka-dump-log", "--files", ",".join(map(str, segs)), "--cluster-metadata-decoder").out
    c.expect_re(
        out,
        rf'payload: \{{"type":"TOPIC_RECORD","version":\d+,"data":\{{"name":"{t}","topicId":"[^"]+"\}}\}}',
        f"a TOPIC_RECORD naming {t}",
    )


# --------------------------------------------------------------------------------------------
# kafka-acls, kafka-delegation-tokens


@case("kafka-acls --add/--list/--remove")
def acls(c: Ctx) -> None:
    topic = c.name("orders")
    r = c.kt(
        "kafka-acls",
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        topic,
    )
    c.expect_in(
        r.out, f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)`"
    )
    out = c.kt("kafka-acls", "--list", "--topic", topic).out
    for op in ("READ", "DESCRIBE"):
        c.expect_in(
            out,
            f"(principal=User:alice, host=*, operation={op}, permissionType=ALLOW)",
            f"--list --topic {topic}: alice's {op} ALLOW",
        )
    c.kt(
        "kafka-acls", "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic, "--force"
    )
    out = c.kt("kafka-acls", "--list", "--topic", topic).out
    c.expect(
        "operation=READ" not in out and "operation=DESCRIBE" in out,
        f"--list after --remove: alice's DESCRIBE on {topic} left, READ gone",
    )


@case("kafka-acls --producer/--consumer")
def acls_convenience(c: Ctx) -> None:
    topic, group, txid = c.name("events"), c.name("readers"), c.name("tx")
    c.kt(
        "kafka-acls",
        "--add",
        "--allow-principal",
        "User:dave",
        "--producer",
        "--topic",
        topic,
        "--transactional-id",
        txid,
    )
    c.kt("kafka-acls", "--add", "--allow-principal", "User:erin", "--consumer", "--topic", topic, "--group", group)
    out = c.kt("kafka-acls", "--list", "--principal", "User:dave").out
    for rt, name, ops in (
        ("TOPIC", topic, ("WRITE", "DESCRIBE", "CREATE")),
        ("TRANSACTIONAL_ID", txid, ("WRITE", "DESCRIBE")),
    ):
        c.expect_in(out, f"ResourcePattern(resourceType={rt}, name={name}, patternType=LITERAL)")
        for op in ops:
            c.expect_in(
                out,
                f"(principal=User:dave, host=*, operation={op}, permissionType=ALLOW)",
                f"--list --principal User:dave: {op} on {rt} {name}",
            )
    out = c.kt("kafka-acls", "--list", "--principal", "User:erin").out
    c.expect_in(out, f"ResourcePattern(resourceType=GROUP, name={group}, patternType=LITERAL)")
    c.expect("User:dave" not in out, "--list --principal User:erin: erin's ACLs only")


@case("kafka-delegation-tokens --create (PLAINTEXT listener)")
def delegation_tokens(c: Ctx) -> None:
    conf = c.write("token-client.properties", "client.id=kafka-tools-suite\n")
    r = c.kt(
        "kafka-delegation-tokens",
        "--command-config",
        conf,
        "--create",
        "--max-life-time-period",
        "-1",
        "--renewer-principal",
        "User:bob",
        rc=None,
    )
    c.expect(r.rc != 0, "a refusal (non-zero exit): no token over a PLAINTEXT listener")
    c.expect_in(
        r.all,
        "Delegation Token requests are not allowed on PLAINTEXT",
        "the refusal Kafka gives on PLAINTEXT: 'Delegation Token requests are not allowed on PLAINTEXT/1-way "
        "SSL channels'",
    )


# --------------------------------------------------------------------------------------------


def run(target, short: bool, workdir: str) -> list[Outcome]:
    from benches.peers.kafka import install

    state = Run(target, workdir, install())
    outcomes: list[Outcome] = []
    try:
        for cs in CASES:
            if target.nodes not in cs.sizes or (short and not cs.short):
                continue
            ctx = Ctx(state, cs.name)
            t0 = time.monotonic()
            try:
                cs.fn(ctx)
                status, detail = "pass", ""
            except CaseFailed as e:
                status, detail = "fail", ctx.detail(str(e))
            except Exception as e:  # noqa: BLE001 - a case's own error is its failure
                tb = "".join(traceback.format_exception(e)[-3:])
                status, detail = "fail", ctx.detail(f"no error in the scenario; got {type(e).__name__}: {e}\n{tb}")
            secs = round(time.monotonic() - t0, 2)
            outcomes.append(Outcome(cs.name, status, secs, detail))
            print(f"   {status:4} {secs:6.1f}s  {cs.name}", flush=True)
    finally:
        state.close()
    return outcomes
