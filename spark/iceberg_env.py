"""The Python environment the Iceberg Spark job (iceberg_read.py) runs in: a venv with
pyspark 4.1 and nothing else, made once under ~/.cache/logbroker-spark. Iceberg publishes
its Spark runtime for Spark 4.1 at newest, while the tests' own pyspark is 4.2.

    python spark/iceberg_env.py        # -> the venv's python, made if missing
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PYSPARK = "4.1.3"  # the newest pyspark with both an Iceberg Spark runtime (4.1) and spark-sql-kafka
CACHE = Path(os.environ.get("LOGBROKER_SPARK_CACHE", "~/.cache/logbroker-spark")).expanduser()


def iceberg_python() -> Path:
    venv = CACHE / f"venv-pyspark-{PYSPARK}"
    py = venv / "bin" / "python"
    if not (venv / ".complete").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        res = subprocess.run(
            [str(py), "-m", "pip", "install", "-q", f"pyspark=={PYSPARK}"], capture_output=True, text=True
        )
        if res.returncode != 0:
            raise RuntimeError(
                f"pip could not install pyspark {PYSPARK} for the Iceberg Spark job: "
                f"{res.stdout[-2000:]}{res.stderr[-2000:]}"
            )
        (venv / ".complete").touch()
    return py


if __name__ == "__main__":
    print(iceberg_python())
