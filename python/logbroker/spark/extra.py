"""The `spark` extra (pyspark and pyarrow) and the clear error when it is missing."""

from __future__ import annotations

import importlib.util

SPARK_EXTRA = ("pyspark", "pyarrow")


def require_spark_extra() -> None:
    """Raise a clear ImportError when the `spark` extra is not installed (checked on the
    driver when the source or sink module is imported, before any executor runs)."""
    missing = [m for m in SPARK_EXTRA if importlib.util.find_spec(m) is None]
    if missing:
        raise ModuleNotFoundError(
            f"logbroker.spark needs {' and '.join(missing)}: pip install 'logbroker[spark]'", name=missing[0]
        )
