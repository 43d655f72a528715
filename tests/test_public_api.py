"""The public API as users see it: typed (mypy --strict accepts the public modules; the
package ships py.typed), documented (every public class, function and method has a
docstring), and its reference builds with one command (./scripts/docs)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import logbroker
import logbroker.aio
import logbroker.client

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "python" / "logbroker"

# What users import: the package, the async API, and the client package with its modules.
PUBLIC_MODULES = [logbroker, logbroker.aio, logbroker.client]
TYPED_FILES = [SRC / "__init__.py", SRC / "aio.py", SRC / "client"]


def test_mypy_strict_accepts_the_public_modules(tmp_path):
    # --follow-imports=silent: the broker's modules the client imports are read for their types
    # but not judged (they are not public API; with the wheel installed mypy would otherwise
    # check them as sources too).
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--follow-imports=silent",
            "--cache-dir",
            str(tmp_path / "cache"),
            *map(str, TYPED_FILES),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert res.returncode == 0, f"mypy --strict found errors:\n{res.stdout}{res.stderr}"
    assert "Success" in res.stdout


def test_the_installed_package_is_marked_typed():
    assert (Path(logbroker.__file__).parent / "py.typed").exists()


def public_objects() -> list[tuple[str, object]]:
    """Every class and function in the public modules' __all__, and every public method and
    property of those classes (inherited ones too, where logbroker defines them)."""
    out: list[tuple[str, object]] = []
    seen: set[int] = set()
    for mod in PUBLIC_MODULES:
        for name in mod.__all__:
            obj = getattr(mod, name)
            if id(obj) in seen or not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            seen.add(id(obj))
            out.append((f"{mod.__name__}.{name}", obj))
            if not inspect.isclass(obj) or issubclass(obj, BaseException) or issubclass(obj, tuple):
                continue
            for klass in obj.__mro__:
                if not klass.__module__.startswith("logbroker"):
                    continue
                for attr, value in vars(klass).items():
                    if attr.startswith("_"):
                        continue
                    if isinstance(value, property):
                        value = value.fget
                    value = getattr(value, "__func__", value)
                    if callable(value) or inspect.isgetsetdescriptor(value) or inspect.ismethoddescriptor(value):
                        out.append((f"{mod.__name__}.{name}.{attr}", value))
    return out


def test_every_public_class_and_method_has_a_docstring():
    missing = [name for name, obj in public_objects() if not (getattr(obj, "__doc__", None) or "").strip()]
    assert not missing, f"{len(missing)} public names without a docstring:\n" + "\n".join(missing)


def test_the_api_reference_builds_with_one_command(tmp_path):
    out = tmp_path / "api"
    env = {**os.environ, "PYTHON": sys.executable}
    res = subprocess.run(
        [str(ROOT / "scripts" / "docs"), "--out", str(out)], capture_output=True, text=True, timeout=300, env=env
    )
    assert res.returncode == 0, res.stdout + res.stderr
    index = (out / "logbroker.html").read_text()
    for name in ("Producer", "Consumer", "ShareConsumer", "Admin", "AcknowledgeType"):
        assert f'id="{name}"' in index, f"{name} missing from the API reference"
    aio_page = (out / "logbroker" / "aio.html").read_text()
    for name in ("Producer", "Consumer", "ShareConsumer", "Admin"):
        assert f'id="{name}"' in aio_page, f"logbroker.aio.{name} missing from the API reference"
    assert "def send" in aio_page or 'id="Producer.send"' in aio_page
