"""The distributable wheel (`./scripts/wheel`): a manylinux abi3 binary that installs and
serves on a machine without Rust.

It is installed into a new, empty virtual environment whose PATH has no cargo or rustc
(CARGO_HOME and RUSTUP_HOME point at an empty directory), with `--only-binary :all:`, so
pip could not build anything even if it wanted to; then that environment's `logbroker serve`
runs as a subprocess and its python produces and consumes through it.

The wheel is LOGBROKER_WHEEL (scripts/test exports the one it built with ./scripts/wheel);
run outside scripts/test, the test runs ./scripts/wheel first.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from logbroker.cluster import free_port

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(1800)

WHEEL_NAME = re.compile(
    r"logbroker-(?P<version>[^-]+)-cp311-abi3-(?P<platform>manylinux[0-9a-z_.]*x86_64(\.manylinux[0-9a-z_]*x86_64)*)\.whl"
)


@pytest.fixture(scope="module")
def wheel() -> Path:
    given = os.environ.get("LOGBROKER_WHEEL")
    if given:
        return Path(given).resolve()
    res = subprocess.run([str(ROOT / "scripts" / "wheel")], stdout=subprocess.PIPE, text=True, timeout=1700, check=True)
    return Path(res.stdout.strip().splitlines()[-1])


def test_wheel_is_manylinux_abi3_and_has_an_sdist_beside_it(wheel):
    assert wheel.is_file(), wheel
    m = WHEEL_NAME.fullmatch(wheel.name)
    assert m, f"{wheel.name}: expected logbroker-<version>-cp311-abi3-manylinux..._x86_64.whl"
    # ./scripts/wheel writes the sdist next to the wheel in dist/.
    if wheel.parent == ROOT / "dist":
        sdist = wheel.parent / f"logbroker-{m['version']}.tar.gz"
        assert sdist.is_file(), f"no sdist beside {wheel.name}: {sorted(p.name for p in wheel.parent.iterdir())}"


def without_rust_path(*first: Path) -> str:
    """PATH for the install: `first`, then this PATH's directories that hold neither cargo nor rustc."""
    dirs = [str(d) for d in first]
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if d and d not in dirs and not any(os.path.exists(os.path.join(d, tool)) for tool in ("cargo", "rustc")):
            dirs.append(d)
    return os.pathsep.join(dirs)


def wait_listening(proc: subprocess.Popen, port: int, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"logbroker serve exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"logbroker serve did not listen on {port} within {timeout} s:\n{log.read_text()[-4000:]}")


def test_wheel_installs_without_rust_and_serves(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_dir = venv / "bin"
    py = bin_dir / "python"

    no_rust = tmp_path / "no-rust"
    no_rust.mkdir()
    path = without_rust_path(bin_dir)
    assert shutil.which("cargo", path=path) is None, path
    assert shutil.which("rustc", path=path) is None, path
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYO3_PYTHON", "CARGO_TARGET_DIR")
    }
    env |= {
        "PATH": path,
        "VIRTUAL_ENV": str(venv),
        "CARGO_HOME": str(no_rust),
        "RUSTUP_HOME": str(no_rust),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }

    # --only-binary :all: — neither logbroker nor a dependency may be built from source.
    res = subprocess.run(
        [str(py), "-m", "pip", "install", "--only-binary", ":all:", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 0, f"pip install {wheel.name} failed:\n{res.stdout[-3000:]}{res.stderr[-3000:]}"
    assert "Building wheel" not in res.stdout + res.stderr, res.stdout
    assert "Successfully installed" in res.stdout and "logbroker-" in res.stdout, res.stdout

    # What pip recorded: this very binary wheel, not a local build.
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    version = WHEEL_NAME.fullmatch(wheel.name)["version"]
    meta = (site / f"logbroker-{version}.dist-info" / "WHEEL").read_text()
    assert "Root-Is-Purelib: false" in meta, meta
    platform = WHEEL_NAME.fullmatch(wheel.name)["platform"]
    for tag in platform.split("."):
        assert f"Tag: cp311-abi3-{tag}" in meta, meta
    assert [p.name for p in (site / "logbroker").glob("_core*.so")] == ["_core.abi3.so"]

    port = free_port()
    data = tmp_path / "data"
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        broker = subprocess.Popen(
            [str(bin_dir / "logbroker"), "serve", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp_path,
        )
    try:
        wait_listening(broker, port, log)
        # From the environment's python, away from the checkout: only the installed wheel is importable.
        script = textwrap.dedent(f"""
            import logbroker, logbroker._core, pathlib
            site = pathlib.Path({str(site)!r})
            assert pathlib.Path(logbroker._core.__file__).is_relative_to(site), logbroker._core.__file__
            bootstrap = "127.0.0.1:{port}"
            with logbroker.Admin(bootstrap) as admin:
                admin.create_topics([logbroker.NewTopic("wheel", 1)])
            sent = [f"record-{{i}}".encode() for i in range(20)]
            with logbroker.Producer(bootstrap) as p:
                for i, value in enumerate(sent):
                    p.send("wheel", value, key=f"k{{i}}".encode())
                p.flush(30)
            with logbroker.Consumer(bootstrap, auto_offset_reset="earliest") as c:
                c.assign([("wheel", 0)])
                got = []
                for _ in range(30):
                    got += [(r.offset, r.key, r.value) for r in c.poll(2.0)]
                    if len(got) >= len(sent):
                        break
            assert got == [(i, f"k{{i}}".encode(), v) for i, v in enumerate(sent)], got
            print("round trip", len(got))
        """)
        res = subprocess.run(
            [str(py), "-c", script], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
        )
        assert res.returncode == 0, (
            f"round trip failed:\n{res.stdout[-3000:]}\n{res.stderr[-6000:]}\nbroker log:\n{log.read_text()[-4000:]}"
        )
        assert res.stdout.split() == ["round", "trip", "20"], res.stdout
    finally:
        broker.terminate()
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait(10)
