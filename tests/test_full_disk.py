"""A full disk: appends fail with KAFKA_STORAGE_ERROR, nothing partial is stored,
the broker keeps serving reads, and writes resume once space is freed."""

from __future__ import annotations

import os
import subprocess

import pytest
from rawclient import RawClient
from test_apis import batch, fetch, produce
from test_bad_input import create_topic

from logbroker import _core
from logbroker.protocol import ErrorCode


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {res.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_full_disk(small_disk, broker_process):
    bp = broker_process(data_dir=small_disk / "data")
    with RawClient(bp.bootstrap_servers) as c:
        assert create_topic(c, "full") == 0
        filler = small_disk / "filler"
        filler.write_bytes(b"\0" * (256 * 1024))
        payload = batch([os.urandom(1000) for _ in range(100)])  # ~100 KB, incompressible
        offsets = []
        error = None
        for _ in range(100):
            r = produce(c, "full", payload)
            if r.error_code != 0:
                error = r
                break
            offsets.append(r.base_offset)
        assert error is not None, "the 3 MB disk never filled"
        assert error.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "full-0" in (error.error_message or "") or "No space" in (error.error_message or "")
        leo = len(offsets) * 100
        # nothing partial: everything stored is whole, valid batches ending at the LEO
        got = b""
        while True:
            r = fetch(c, "full", len(got) // len(payload) * 100)
            assert r.error_code == 0
            if not len(r.records):
                break
            got += bytes(r.records)
        assert r.high_watermark == leo
        infos = _core.validate_batches(got)
        assert [i[0] for i in infos] == offsets
        # the broker is alive and, once space is freed, appends resume at the LEO
        filler.unlink()
        r = produce(c, "full", batch([b"after"]))
        assert (r.error_code, r.base_offset) == (0, leo)
    assert "No space" in bp.log_text() or "ENOSPC" in bp.log_text() or "os error 28" in bp.log_text()
