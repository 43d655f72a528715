"""What a user gets from `pip install logbroker` and `pip install 'logbroker[spark]'`:
each in a new, empty virtual environment holding only that install, so a module the code
imports but the package does not declare fails here (numpy once did, in the Spark source).

The wheel is the one `scripts/test` built (LOGBROKER_WHEEL); run outside it, the test
builds one from the checkout first. pip's cache keeps the installs fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(900)

# Modules that need an extra (or pytest, which loads the plugin itself).
NEEDS_EXTRA = {
    "logbroker.spark.source": "spark",
    "logbroker.spark.sink": "spark",
    "pyspark_logbroker": "spark",
    "logbroker.pytest_plugin": "pytest",
    "logbroker.iceberg.position_deletes": "iceberg",
}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    given = os.environ.get("LOGBROKER_WHEEL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(ROOT)],
        check=True,
        timeout=900,
    )
    return next(out.glob("logbroker-*.whl"))


def make_env(where: Path, requirement: str) -> Path:
    """A new virtual environment with only `requirement` installed; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    py = where / "bin" / "python"
    res = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", requirement],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, f"pip install {requirement} failed:\n{res.stdout[-3000:]}{res.stderr[-3000:]}"
    return py


def run_in(py: Path, script: str, timeout: float = 300) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON")}
    env["PATH"] = f"{py.parent}:{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = str(py)
    # Run from a directory without the checkout's python/ tree: only the installed wheel counts.
    res = subprocess.run(
        [str(py), "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=py.parent,
        env=env,
    )
    assert res.returncode == 0, f"script failed in {py.parent.parent}:\n{res.stdout[-4000:]}\n{res.stderr[-6000:]}"
    return res.stdout


def test_base_install_imports_every_module_and_serves(wheel, tmp_path):
    py = make_env(tmp_path / "base", str(wheel))
    out = run_in(
        py,
        f"""
        import importlib, importlib.util, pathlib
        import logbroker

        needs_extra = {NEEDS_EXTRA!r}
        # The environment holds the base install only.
        for extra in ("pytest", "pyspark", "pyarrow", "numpy", "confluent_kafka"):
            assert importlib.util.find_spec(extra) is None, f"{{extra}} is installed in the base environment"

        root = pathlib.Path(logbroker.__file__).parent
        imported = []
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root.parent).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            if name in needs_extra or name.endswith("__main__"):  # __main__ runs the CLI
                continue
            importlib.import_module(name)
            imported.append(name)
        # The Spark modules say which extra they need.
        for name in ("logbroker.spark.source", "logbroker.spark.sink"):
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as e:
                assert "pip install 'logbroker[spark]'" in str(e), str(e)
            else:
                raise AssertionError(f"{{name}} imported without pyspark")

        # And the install works: a broker in-process, our client both ways.
        with logbroker.Broker() as b:
            with logbroker.Admin(b.bootstrap_servers) as admin:
                admin.create_topics([logbroker.NewTopic("base", 1)])
            with logbroker.Producer(b.bootstrap_servers) as p:
                for i in range(100):
                    p.send("base", f"v{{i}}".encode(), key=b"k")
                p.flush(30)
            with logbroker.Consumer(b.bootstrap_servers, auto_offset_reset="earliest") as c:
                c.assign([("base", 0)])
                got = []
                while len(got) < 100:
                    got += [r.value for r in c.poll(5.0)]
        assert got == [f"v{{i}}".encode() for i in range(100)], got[:5]
        print(len(imported), "modules")
    """,
    )
    assert int(out.split()[-2]) > 50, out
    # The console script is installed and runs.
    res = subprocess.run([str(py.parent / "logbroker"), "config-keys"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "log.segment.bytes" in res.stdout, res.stderr


def test_spark_extra_reads_with_the_logbroker_source(wheel, tmp_path):
    py = make_env(tmp_path / "spark", f"{wheel}[spark]")
    run_in(
        py,
        """
        import importlib.util
        import logbroker
        from pyspark.sql import SparkSession

        for extra in ("pytest", "confluent_kafka"):
            assert importlib.util.find_spec(extra) is None, f"{extra} is installed in the spark environment"

        with logbroker.Broker() as b:
            with logbroker.Admin(b.bootstrap_servers) as admin:
                admin.create_topics([logbroker.NewTopic("sp", 2)])
            with logbroker.Producer(b.bootstrap_servers) as p:
                for i in range(200):
                    p.send("sp", f"value-{i}".encode(), key=f"k{i}".encode(), partition=i % 2,
                           headers=[("h", f"{i}".encode())])
                p.flush(30)
            spark = (SparkSession.builder.master("local[2]").appName("extra-check")
                     .config("spark.ui.enabled", "false").getOrCreate())
            try:
                # pyspark_logbroker registers the format when the session starts (no register() call).
                rows = (spark.read.format("logbroker").option("bootstrap.servers", b.bootstrap_servers)
                        .option("subscribe", "sp").option("includeHeaders", "true").load().collect())
            finally:
                spark.stop()
        assert len(rows) == 200, len(rows)
        for r in rows:
            i = int(r.value.decode().split("-")[1])
            assert (r.topic, r.partition, r.key, r.offset) == ("sp", i % 2, f"k{i}".encode(), i // 2), r
            assert [(h.key, h.value) for h in r.headers] == [("h", f"{i}".encode())], r
    """,
        timeout=600,
    )
