"""Install Spark's Kafka connector jars (spark-sql-kafka-0-10 for the installed pyspark
version, with kafka-clients and commons-pool2), Iceberg's Spark runtime and the SQLite JDBC
driver (maven/pom.xml) from Maven Central and print the comma-separated list for
`spark.jars`:

    python spark/jars.py            # -> /root/.cache/logbroker-spark/jars-4.3.0/...jar,...

Jars that pyspark already ships (Scala, spark-*, lz4, snappy, zstd, slf4j) are left out.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("LOGBROKER_SPARK_CACHE", "~/.cache/logbroker-spark")).expanduser()


def _fetch(out: Path, done: Path, version: str) -> None:
    if not done.exists():
        cmd = [
            "mvn",
            "-B",
            "-q",
            "-s",
            str(HERE / "maven" / "settings.xml"),
            f"-Dmaven.repo.local={CACHE / 'm2'}",
            "-f",
            str(HERE / "maven" / "pom.xml"),
            f"-Dspark.version={version}",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={out}",
            "-DincludeScope=runtime",
        ]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(
                f"mvn could not fetch spark-sql-kafka-0-10 {version}: {res.stdout[-2000:]}{res.stderr[-2000:]}"
            )
        done.touch()


def connector_jars() -> list[str]:
    import pyspark

    version = pyspark.__version__
    pom = hashlib.sha256((HERE / "maven" / "pom.xml").read_bytes()).hexdigest()[:12]
    out = CACHE / f"jars-{version}-{pom}"  # a changed pom is a new set of jars
    done = out / ".complete"
    out.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "a") as lock:  # parallel test workers fetch once
        fcntl.flock(lock, fcntl.LOCK_EX)
        _fetch(out, done, version)
    shipped = {p.name.rsplit("-", 1)[0] for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    jars = []
    for jar in sorted(out.glob("*.jar")):
        stem = jar.name.rsplit("-", 1)[0]
        if stem in shipped:
            continue
        jars.append(str(jar))
    return jars


if __name__ == "__main__":
    print(",".join(connector_jars()))
    sys.exit(0)
