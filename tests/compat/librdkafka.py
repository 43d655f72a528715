"""librdkafka's own integration tests (tests/ of the 2.8.0 release) against a running broker.

Source: the upstream release tarball as Debian's pool carries it (librdkafka_2.8.0.orig.tar.gz,
sha256-pinned), built once with Debian's Build-Depends of that source (installed with apt-get
when missing) into ~/.cache/logbroker-compat/librdkafka-2.8.0/ (LOGBROKER_COMPAT_CACHE moves
it): ./configure, `make libs`, `make -C tests build` (test-runner); built.json marks it done.

Running: one test-runner invocation per test number (TESTS=<number>, flags -Q -L -E -K -p1:
quick mode, no local-only, sockem or known-issue tests, one at a time), each with a 600-s
timeout; the runner's SUMMARY table gives the test's state. test.conf names only
bootstrap.servers (the suite's test.conf.example); TEST_KAFKA_VERSION=4.1.1 on both brokers (the
Kafka version of logbroker's protocol specs, docs/protocol.md; the suite's version gates stop at
3.8, so Kafka 4.4.0 gets the same tests and code paths). CI=true as on the suite's own CI
(timing bounds warn instead of failing, test timeouts x3), except for 0055 (below). Each number's
whole output is kept in build/compat/librdkafka-logs/<broker>--<mode>/<number>.log.
Kafka's command-line tools, where a test runs them (kafka-topics.sh, kafka-acls.sh via
$KAFKA_PATH; the tests/java programs via `make java` and java/run-class.sh), are Kafka 4.4.0's
own classes from benches/peers' cached install, against either broker.

The tests run (TESTS): every test of test.c's table that needs a broker, less these groups:
- local tests (TEST_F_LOCAL: 0000 unit tests, 0004, 0006, 0009, 0022_local, 0025, 0031_mock,
  0033_local, 0034_mock, 0037, 0039_event/_log, 0043, 0045_*mock, 0046, 0053_stats_timing, 0058,
  0062, 0066, 0072, 0074, 0076_mock, 0078, 0080, 0084_local, 0086_local, 0095, 0097_local, 0100,
  0102_mock, 0103_local, 0104, 0105, 0106, 0113_local, 0116, 0117, 0120, 0121, 0124, 0125_mock,
  0128, 0131, 0133, 0134, 0136, 0138, 0143-0146) and 0139_offset_validation_mock and
  0150_telemetry_mock (flag 0, but they run on librdkafka's built-in mock cluster): no broker;
- sockem tests (TEST_F_SOCKEM: 0049, 0068, 0075, 0076_produce_retry, 0088, 0094): socket
  emulation, left out by the suite's own `make quick` (-E) too;
- known issues (TEST_F_KNOWN_ISSUE: 0028, 0047, 0079) and manual tests (8000, 8001): the runner
  skips them itself;
- the "noautocreate" scenario (0045_subscribe_update_topic_remove,
  0045_subscribe_update_non_exist_and_partchange, 0107, 0111): a broker with
  auto.create.topics.enable=false, a second configuration of the cluster;
- SSL and SASL (0097_ssl_verify: an SSL listener and certificates; 0126_oauthbearer_oidc: SASL
  OAUTHBEARER with an OIDC token endpoint; 0135_sasl_credentials, 0142_reauthentication: SASL
  users): neither peer has a SASL or SSL listener, and these tests skip themselves without one;
- 0101_fetch_from_follower: a broker.rack per broker and the rack-aware replica selector on three
  brokers (the peers set no racks).
0098_consumer_txn and 0103_transactions create their topics with replication factor 3: they run
on the three-node cluster (full mode), every other test on one node. 0082_fetch_max_bytes skips
itself whole in quick mode, and quick mode passes over every sub-test of 0018, 0019, 0026, 0045,
0050, 0061, 0089, 0102, 0122, 0127, 0132 and 0137 and the main one of 0022 (declared SUB_TEST,
not SUB_TEST_QUICK), so these run in the suite's normal mode (NOT_QUICK); 0113 runs its 4 quick
sub-tests of 25; 0055_producer_latency skips itself on CI and
runs without CI set.

The short form (SHORT_TESTS, CI against logbroker, about a minute): produce (0001), produce and
consume (0012), compression (0017), groups (0019 list groups, 0099 commit with metadata, 0130
store and commit offsets), ListOffsets (0031), ApiVersions (0035), cluster id (0063), headers
(0073), idempotence (0090), transactions and aborted records (0129).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from benches.peers.common import one_at_a_time
from tests.compat import brokers as _brokers  # noqa: F401  (puts benches/ on sys.path)
from tests.compat.results import RESULTS, Outcome

VERSION = "2.8.0"
URL = f"http://deb.debian.org/debian/pool/main/libr/librdkafka/librdkafka_{VERSION}.orig.tar.gz"
SHA256 = "5bd1c46f63265f31c6bfcedcde78703f77d28238eadf23821c2b43fc30be3e25"
# Build-Depends of Debian's librdkafka source package, plus the compilers
DEBIAN_DEPS = (
    "build-essential",
    "pkgconf",
    "libcurl4-openssl-dev",
    "liblz4-dev",
    "libsasl2-dev",
    "libssl-dev",
    "libzstd-dev",
    "python3",
    "rapidjson-dev",
    "zlib1g-dev",
)


def cache_dir() -> Path:
    root = os.environ.get("LOGBROKER_COMPAT_CACHE") or str(Path.home() / ".cache" / "logbroker-compat")
    return Path(root) / f"librdkafka-{VERSION}"


def _src() -> Path:
    return cache_dir() / f"librdkafka-{VERSION}"


def _runner() -> Path:
    return _src() / "tests" / "test-runner"


def _marker() -> Path:
    return cache_dir() / "built.json"


def _missing_debs() -> list[str]:
    missing = []
    for pkg in DEBIAN_DEPS:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
        if r.returncode != 0 or "install ok installed" not in r.stdout:
            missing.append(pkg)
    return missing


def _install_debs() -> None:
    if not shutil.which("dpkg-query") or not shutil.which("apt-get"):
        raise RuntimeError(
            "librdkafka suite: building librdkafka needs Debian's dpkg-query and apt-get "
            f"(to install {' '.join(DEBIAN_DEPS)})"
        )
    missing = _missing_debs()
    if not missing:
        return
    print(f"== librdkafka: installing Debian packages: {' '.join(missing)}", flush=True)
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in ([*sudo, "apt-get", "update", "-qq"], [*sudo, "apt-get", "install", "-y", "-qq", *missing]):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(
                f"librdkafka suite: `{' '.join(cmd)}` failed ({r.returncode}): {(r.stdout + r.stderr)[-2000:]}"
            )
    still = _missing_debs()
    if still:
        raise RuntimeError(f"librdkafka suite: Debian packages still missing after apt-get: {' '.join(still)}")


def _download(dest: Path) -> None:
    tmp = dest.with_suffix(".part")
    with urllib.request.urlopen(URL, timeout=120) as r, open(tmp, "wb") as f:
        shutil.copyfileobj(r, f)
    tmp.rename(dest)


def _make(args: list[str], cwd: Path, log: Path) -> None:
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(args)}  (in {cwd})\n")
        out.flush()
        r = subprocess.run(args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"librdkafka suite: `{' '.join(args)}` failed ({r.returncode}); log {log}:\n{tail}")


@one_at_a_time(lambda: cache_dir() / ".prepare.lock")
def prepare(short: bool) -> dict:
    """Download (sha256-pinned), configure and build librdkafka and its test-runner once into
    the cache; later calls only read the marker."""
    marker = _marker()
    if marker.exists() and _runner().exists():
        info = json.loads(marker.read_text())
        return {"librdkafka": VERSION, "build seconds (cold)": info["build_seconds"]}
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    _install_debs()
    tarball = cache / f"librdkafka_{VERSION}.orig.tar.gz"
    if not tarball.exists():
        print(f"== librdkafka: downloading {URL}", flush=True)
        _download(tarball)
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    if digest != SHA256:
        tarball.unlink()
        raise RuntimeError(f"librdkafka suite: {URL} has sha256 {digest}, expected {SHA256}")
    src = _src()
    if src.exists():
        shutil.rmtree(src)
    subprocess.run(["tar", "xzf", str(tarball), "-C", str(cache)], check=True)
    log = cache / "build.log"
    log.write_text("")
    print(f"== librdkafka: building {VERSION} and its test-runner (log {log})", flush=True)
    # no mklove module downloads: the release carries the ones it needs; the Debian packages
    # above provide the libraries (no source builds of dependencies)
    _make(["./configure", "--no-download"], src, log)
    _make(["make", "-j2", "libs"], src, log)
    _make(["make", "-j2", "-C", "tests", "build"], src, log)
    if not _runner().exists():
        raise RuntimeError(f"librdkafka suite: the build finished but {_runner()} is missing (log {log})")
    seconds = round(time.monotonic() - t0, 1)
    marker.write_text(json.dumps({"version": VERSION, "sha256": SHA256, "build_seconds": seconds}) + "\n")
    print(f"== librdkafka: built in {seconds} s", flush=True)
    return {"librdkafka": VERSION, "build seconds (cold)": seconds}


# ---------------------------------------------------------------------------------------------
# Which tests: test.c's table, less local/mock/sockem/manual/known-issue tests and the groups
# below (see the module docstring for each reason).

# The test-runner's broker tests in quick mode (-Q), by name; one test-runner invocation per
# number (TESTS=<number> selects every variant of a number; the summary gives each one's state).
TESTS = (
    "0001_multiobj",
    "0002_unkpart",
    "0003_msgmaxsize",
    "0005_order",
    "0007_autotopic",
    "0008_reqacks",
    "0011_produce_batch",
    "0012_produce_consume",
    "0013_null_msgs",
    "0014_reconsume_191",
    "0015_offsets_seek",
    "0016_client_swname",
    "0017_compression",
    "0018_cgrp_term",
    "0019_list_groups",
    "0020_destroy_hang",
    "0021_rkt_destroy",
    "0022_consume_batch",
    "0026_consume_pause",
    "0029_assign_offset",
    "0030_offset_commit",
    "0031_get_offsets",
    "0033_regex_subscribe",
    "0034_offset_reset",
    "0035_api_version",
    "0036_partial_fetch",
    "0038_performance",
    "0039_event_dr",
    "0040_io_event",
    "0041_fetch_max_bytes",
    "0042_many_topics",
    "0044_partition_cnt",
    "0045_subscribe_update",
    "0048_partitioner",
    "0050_subscribe_adds",
    "0051_assign_adds",
    "0052_msg_timestamps",
    "0053_stats",
    "0054_offset_time",
    "0055_producer_latency",
    "0056_balanced_group_mt",
    "0057_invalid_topic",
    "0059_bsearch",
    "0060_op_prio",
    "0061_consumer_lag",
    "0063_clusterid",
    "0064_interceptors",
    "0065_yield",
    "0067_empty_topic",
    "0069_consumer_add_parts",
    "0070_null_empty",
    "0073_headers",
    "0077_compaction",
    "0081_admin",
    "0082_fetch_max_bytes",
    "0083_cb_event",
    "0084_destroy_flags",
    "0085_headers",
    "0086_purge_remote",
    "0089_max_poll_interval",
    "0090_idempotence",
    "0091_max_poll_interval_timeout",
    "0092_mixed_msgver",
    "0093_holb_consumer",
    "0098_consumer_txn",
    "0099_commit_metadata",
    "0102_static_group_rebalance",
    "0103_transactions",
    "0109_auto_create_topics",
    "0110_batch_size",
    "0112_assign_unknown_part",
    "0113_cooperative_rebalance",
    "0114_sticky_partitioning",
    "0115_producer_auth",
    "0118_commit_rebalance",
    "0119_consumer_auth",
    "0122_buffer_cleaning_after_rebalance",
    "0123_connections_max_idle",
    "0125_immediate_flush",
    "0127_fetch_queue_backoff",
    "0129_fetch_aborted_msgs",
    "0130_store_offsets",
    "0132_strategy_ordering",
    "0137_barrier_batch_consume",
    "0140_commit_metadata",
)

SHORT_TESTS = (
    "0001_multiobj",
    "0012_produce_consume",
    "0017_compression",
    "0019_list_groups",
    "0031_get_offsets",
    "0035_api_version",
    "0063_clusterid",
    "0073_headers",
    "0090_idempotence",
    "0099_commit_metadata",
    "0129_fetch_aborted_msgs",
    "0130_store_offsets",
)

# tests that create their topics with replication factor 3 (the suite's reference cluster is
# three brokers): run on the three-node cluster only, the rest on one node
NEEDS_3_NODES = {"0098_consumer_txn", "0103_transactions"}

# tests that run Kafka's kafka-topics.sh / kafka-acls.sh ($KAFKA_PATH/bin, with $BROKERS) to
# create or alter topics and add ACLs: given Kafka 4.4.0's own TopicCommand and AclCommand
# (benches/peers' cached install) on both brokers
NEEDS_KAFKA_TOOLS = {"0045", "0052", "0077", "0098", "0109", "0113", "0115", "0119"}
# tests that run one of the suite's Java programs (tests/java, `make java` then
# java/run-class.sh in the runner's directory): compiled against Kafka 4.4.0's clients
NEEDS_JAVA = {"0098", "0113"}
JAVA_PROGRAMS = ("TransactionProducerCli", "IncrementalRebalanceCli")
# tests that quick mode empties: 0082 skips itself whole, the others run only sub-tests declared
# with SUB_TEST() (not SUB_TEST_QUICK()), which quick mode passes over, leaving a "pass" that ran
# nothing (0022: its main sub-test); these run in the suite's normal mode (0113 keeps its 4 quick
# sub-tests of 25: normal mode would take it past 10 minutes)
NOT_QUICK = {
    "0018",
    "0019",
    "0022",
    "0026",
    "0045",
    "0050",
    "0061",
    "0082",
    "0089",
    "0102",
    "0122",
    "0127",
    "0132",
    "0137",
}
# Every test runs as on the suite's own CI (CI set: a timing bound only warns, test timeouts x3,
# as upstream's CI judges them on shared machines), but for 0055, which skips itself there
# (its latency bounds are the test)
NOT_CI = {"0055"}
KAFKA_TOOLS = {
    "kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
    "kafka-acls.sh": "org.apache.kafka.tools.AclCommand",
}

# TEST_KAFKA_VERSION for both brokers: the Kafka version whose protocol specs logbroker's codec
# is generated from (docs/protocol.md); the suite's version gates stop at 3.8, so Kafka 4.4.0
# and this select the same tests and the same code paths
KAFKA_VERSION = "4.1.1"
TIMEOUT = 600  # seconds for one test-runner invocation (one test number)


def nodes(short: bool) -> list[int]:
    return [1] if short else [1, 3]


def broker_settings(nodes: int) -> dict[str, str]:
    """What the suite's own clusters have (tests/scenarios/default.json and the server.properties
    its trivup writes): topic auto-creation on, 4 partitions per auto-created topic, topic
    deletion on, Kafka's default group.initial.rebalance.delay.ms (3000 ms: 0118 joins its second
    consumer within it, and with 0 the first one holds a rebalance it is not polled to finish, on
    either broker), and on one node the KRaft ACL authorizer with everything allowed where no ACL
    matches (0081's ACL sub-tests, the deny ACLs of 0109/0115/0119). The three-node cluster runs
    without an authorizer: Kafka's controllers refuse each other's Vote requests as
    User:ANONYMOUS until the authorizer has loaded (AuthorizerNotReadyException), which only a
    super user passes, and the tests run there need no ACL."""
    s = {
        "auto.create.topics.enable": "true",
        "num.partitions": "4",
        "delete.topic.enable": "true",
        "group.initial.rebalance.delay.ms": "3000",
    }
    if nodes == 1:
        s |= {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
            "super.users": "User:admin",
        }
    return s


def _kafka_tools(workdir: Path) -> Path:
    """A $KAFKA_PATH whose bin/kafka-topics.sh and kafka-acls.sh run Kafka 4.4.0's TopicCommand
    and AclCommand (the cached install of benches/peers/kafka.py)."""
    from benches.peers.kafka import install

    inst = install()
    home = workdir / "kafka-tools"
    (home / "bin").mkdir(parents=True, exist_ok=True)
    for script, main in KAFKA_TOOLS.items():
        _script(home / "bin" / script, inst.tools_java(main, [], heap="-Xmx256m"))
    return home


def _script(path: Path, argv: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in argv) + ' "$@"\n')
    path.chmod(0o755)


def _java_programs(run_dir: Path) -> None:
    """The suite's Java programs, compiled against Kafka 4.4.0's client jars, behind the
    runner's `make -s java` (a no-op Makefile here) and java/run-class.sh."""
    from benches.peers.kafka import install

    inst = install()
    classes = run_dir.parent / "java-classes"
    classes.mkdir(exist_ok=True)
    srcs = [str(_src() / "tests" / "java" / f"{p}.java") for p in JAVA_PROGRAMS]
    r = subprocess.run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", inst.tools_cp, *srcs], capture_output=True, text=True
    )
    if r.returncode != 0:
        raise RuntimeError(f"librdkafka suite: javac of tests/java failed: {r.stdout}{r.stderr}")
    (run_dir / "Makefile").write_text("java:\n\t@true\n")
    _script(
        run_dir / "java" / "run-class.sh",
        ["java", "-Xmx256m", f"-Dlog4j2.configurationFile={inst.tools_log4j}", "-cp", f"{classes}:{inst.tools_cp}"],
    )


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ROW = re.compile(r"^\|\s*(\S+)\s*\|\s*(\w+)\s*\|\s*[0-9.]+s\s*\|(.*)$")


def _summary(text: str) -> dict[str, tuple[str, str]]:
    """test name -> (state, fail or skip reason) from the runner's SUMMARY table."""
    rows: dict[str, tuple[str, str]] = {}
    for line in _ANSI.sub("", text).splitlines():
        m = _ROW.match(line.strip())
        if m and m.group(1) != "<MAIN>":
            rows[m.group(1)] = (m.group(2), m.group(3).strip())
    return rows


def _run_number(num: str, names: list[str], env: dict, cwd: Path, logs: Path) -> list[Outcome]:
    """One test-runner invocation for test number `num`; an outcome for each of `names`."""
    t0 = time.monotonic()
    args = [str(_runner()), *([] if num in NOT_QUICK else ["-Q"]), "-L", "-E", "-K", "-p1"]
    env = dict(env, TESTS=num) if num in NOT_CI else dict(env, TESTS=num, CI="true")
    log = logs / f"{num}.log"
    with open(log, "wb") as f:
        p = subprocess.Popen(
            args, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        try:
            rc = p.wait(timeout=TIMEOUT)
            timed_out = ""
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the runner and what it started (Kafka's tools)
            rc = p.wait()
            timed_out = f"\n[killed after {TIMEOUT} s]"
    wall = round(time.monotonic() - t0, 2)
    out = _ANSI.sub("", log.read_text(errors="replace")) + timed_out
    rows = _summary(out)
    tail = out[-1900:]
    outcomes = []
    for name in names:
        state, why = rows.get(name, ("NO RESULT", ""))
        if state == "PASSED" and rc == 0:
            outcomes.append(Outcome(name, "pass", wall))
        elif state == "PASSED":
            outcomes.append(Outcome(name, "fail", wall, f"test-runner exited {rc} after the test passed:\n{tail}"))
        elif state == "SKIPPED":
            outcomes.append(Outcome(name, "fail", wall, f"skipped by test-runner: {why}\n{tail}"))
        else:
            head = f"{state} (exit {rc}): {why}\n" if why else f"{state} (exit {rc})\n"
            outcomes.append(Outcome(name, "fail", wall, head + tail))
    return outcomes


def run(target, short: bool, workdir: str) -> list[Outcome]:
    # the runner's directory: tests/ beside a src/ link (0053 reads ../src/statistics_schema.json);
    # its stats_*.json files stay in this run's temp dir, not in the shared build
    work = Path(workdir) / "librdkafka" / "tests"
    work.mkdir(parents=True, exist_ok=True)
    (work.parent / "src").symlink_to(_src() / "src")
    # each test number's whole output, kept after the run: build/compat/librdkafka-logs/
    label = target.broker if target.nodes == 1 else f"{target.broker}-{target.nodes}nodes"
    logs = RESULTS / "librdkafka-logs" / f"{label}--{'short' if short else 'full'}"
    if logs.exists():
        shutil.rmtree(logs)
    logs.mkdir(parents=True)
    conf = work / "test.conf"
    conf.write_text(f"bootstrap.servers={target.bootstrap}\n")
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("TEST")}
    libs = f"{_src() / 'src'}:{_src() / 'src-cpp'}"  # as run-test.sh: the libraries just built
    env.update(
        RDKAFKA_TEST_CONF=str(conf),
        TEST_KAFKA_VERSION=KAFKA_VERSION,
        BROKERS=target.bootstrap,
        LD_LIBRARY_PATH=libs + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""),
    )
    selected = [t for t in (SHORT_TESTS if short else TESTS) if (t in NEEDS_3_NODES) == (target.nodes >= 3)]
    by_num: dict[str, list[str]] = {}
    for name in selected:
        by_num.setdefault(name[:4], []).append(name)
    if NEEDS_KAFKA_TOOLS & set(by_num):
        env["KAFKA_PATH"] = str(_kafka_tools(work))
    if NEEDS_JAVA & set(by_num):
        _java_programs(work)
    outcomes: list[Outcome] = []
    for num, names in by_num.items():
        got = _run_number(num, names, env, work, logs)
        for o in got:
            print(f"   {o.test}: {o.status} ({o.seconds:.1f} s)", flush=True)
        outcomes += got
    return outcomes


DIFFERENCES: dict[str, str] = {
    # fails on both
    "0052_msg_timestamps": (
        "Its last cases produce as a 0.9 client (api.version.request=false, "
        "broker.version.fallback=0.9.0.0: Produce v1, message format v0/v1). Kafka 4 removed "
        "Produce v0-v2 (KIP-896) and closes the connection; logbroker serves Produce v3-v13 only "
        "and does the same. The CreateTime/LogAppendTime cases of the current protocol pass on both."
    ),
    "0077_compaction": (
        "Creates its topic with kafka-topics.sh --config segment.bytes=10000; Kafka 4.4.0's tool "
        "refuses it before sending anything (segment.bytes must be at least 1 MiB since Kafka "
        "4.0, KIP-1030), whichever broker it is pointed at."
    ),
    "0086_purge_remote": (
        "Needs the second produce batch to be in flight (held in a 50-s sockem delay set from the "
        "first Produce response) when rd_kafka_purge() runs, right after that response: a race "
        "inside the client between its broker thread sending the batch and the test thread "
        "purging. When the batch is not sent yet, messages 10-19 are purged from the queue "
        "(_PURGE_QUEUE) instead of in flight and the test fails; seen on both brokers, and "
        "passing on both in other runs."
    ),
    "0092_mixed_msgver": (
        "Sets the topic config message.format.version to produce older message formats; Kafka 4 "
        "removed the key (KIP-724), both brokers answer INVALID_CONFIG for it."
    ),
    # passes on logbroker, fails on Kafka
    "0129_fetch_aborted_msgs": (
        "Creates its topic with segment.bytes=20000 to spread aborted transactions over "
        "segments; Kafka 4 refuses segment.bytes below 1 MiB (KIP-1030), logbroker keeps the "
        "earlier minimum (14 bytes, config_keys.toml), creates it, and the test passes."
    ),
}
