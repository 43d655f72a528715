"""Everything the tests need that is slow to make, made before pytest starts (./scripts/test
runs `python -m tests.prepare`), so that no test pays for a cold cache inside its timeout and
a cold machine passes as a warm one does:

    Apache Kafka's broker and tools jars     benches/peers/kafka.py install() (Maven Central)
    the tools' class-data archive            benches/peers/kafka.py make_tools_archive() (one
                                             kafka-topics run against a logbroker broker)
    Kafka Streams and Connect's jars         benches/peers/kafka.py install_frameworks()
    Spark's Kafka connector jars             spark/jars.py (Maven Central)
    Iceberg's REST catalog server            tests/iceberg_rest_catalog.py classpath() (Maven Central)
    librdkafka 2.8.0 and its test runner     tests/compat/librdkafka.py (Debian build packages, a build)
    franz-go's kgo test binary               tests/compat/franz_go.py (Go modules, a build)
    the Go programs the tests run            tests/go/build.py (tests/go/tiered_reader: a kgo
                                             consumer; the same franz-go, a build)
    Kafka's tools for the operator suite     tests/compat/kafka_tools.py (the jars above)
    the `spark` extra's packages             pip's cache (tests/test_install_extras.py installs
                                             'logbroker[spark]': the newest pyspark is an sdist,
                                             built into a wheel once, about a minute cold)

(The Iceberg Spark job's environment, spark/iceberg_env.py, is made by ./scripts/test just
before.) Each step is cached (under ~/.cache) and guarded by a file lock, so the tests,
which call the same functions, find it done; a test run by hand on a cold machine still
makes what it needs, one worker at a time. A step that fails stops the run naming it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests", ROOT / "spark"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def _kafka() -> str:
    from benches.peers.kafka import install, make_tools_archive
    from logbroker import Broker

    inst = install()
    if not inst.tools_archive.exists():  # the classes of a tools run, for every later one
        with Broker() as b:
            make_tools_archive(inst, b.bootstrap_servers)
    return f"Apache Kafka {inst.version} (and the tools' class-data archive)"


def _spark_jars() -> str:
    from jars import connector_jars

    return f"{len(connector_jars())} jars"


def _iceberg_rest() -> str:
    from iceberg_rest_catalog import classpath

    return f"{len(classpath().split(':'))} jars on the classpath"


def _spark_extra() -> str:
    import subprocess
    import tempfile
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["optional-dependencies"]["spark"]
    with tempfile.TemporaryDirectory() as d:
        # pip wheel builds an sdist into the same wheel cache that `pip install` reads
        cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", d, *reqs]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"`{' '.join(cmd)}` failed ({r.returncode}): {(r.stdout + r.stderr)[-2000:]}")
        return ", ".join(sorted(w.name for w in Path(d).iterdir()))


def _compat(name: str):
    def make() -> str:
        import importlib

        return str(importlib.import_module(f"tests.compat.{name}").prepare(True))

    return make


def _go_program(name: str):
    def make() -> str:
        from tests.go.build import program

        return str(program(name))

    return make


STEPS = [
    ("Apache Kafka (broker and tools jars)", _kafka),
    ("Kafka Streams and Kafka Connect (jars)", _compat("frameworks")),
    ("Spark's Kafka connector jars", _spark_jars),
    ("Iceberg's REST catalog server", _iceberg_rest),
    ("librdkafka and its test runner", _compat("librdkafka")),
    ("franz-go's kgo test binary", _compat("franz_go")),
    # after the suite's build: franz-go's modules are downloaded and its dependencies compiled
    ("tests/go/tiered_reader (franz-go's kgo reading a tiered topic)", _go_program("tiered_reader")),
    ("Kafka's tools suite", _compat("kafka_tools")),
    ("the spark extra's packages in pip's cache", _spark_extra),
]


def main() -> int:
    for what, make in STEPS:
        t0 = time.monotonic()
        print(f"== prepare: {what} ...", flush=True)
        try:
            detail = make()
        except Exception as e:  # noqa: BLE001 - named and fatal
            print(f"== prepare: {what} FAILED after {time.monotonic() - t0:.0f} s: {e}", file=sys.stderr, flush=True)
            return 1
        print(f"== prepare: {what}: {detail} ({time.monotonic() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
