"""`logbroker serve --log-format json`: every line on stderr is one JSON object with the time,
level, logger, node and message, and the peer (or topic, partition, transactional id) as
fields where the log call names them."""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys

from logbroker.cluster import free_port
from logbroker.log_format import JsonFormatter


def test_json_formatter_fields():
    f = JsonFormatter(node_id=7)
    rec = logging.LogRecord("logbroker.x", logging.INFO, __file__, 1, "moved %s-%d", ("t", 3), None)
    rec.topic, rec.partition = "t", 3
    doc = json.loads(f.format(rec))
    assert doc["node"] == 7 and doc["level"] == "INFO" and doc["logger"] == "logbroker.x"
    assert doc["message"] == "moved t-3" and (doc["topic"], doc["partition"]) == ("t", 3)
    assert doc["ts"].endswith("Z") and "peer" not in doc
    try:
        raise ValueError("boom")
    except ValueError:
        rec = logging.LogRecord("l", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    assert "ValueError: boom" in json.loads(f.format(rec))["exception"]


def test_serve_writes_json_lines(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "logbroker", "serve", "--data-dir", str(tmp_path / "d"),
                             "--listen", f"127.0.0.1:{port}", "--log-format", "json", "--node-id", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert "logbroker ready" in proc.stdout.readline()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # a frame of garbage
            s.sendall(b"\x00\x00\x00\x08garbage!")
            s.settimeout(5)
            assert s.recv(10) == b""  # closed by the broker
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    lines = [line for line in err.splitlines() if line.strip()]
    docs = [json.loads(line) for line in lines]  # every line is JSON
    assert docs and all({"ts", "level", "logger", "node", "message"} <= d.keys() for d in docs)
    assert all(d["node"] == 4 for d in docs)
    closed = [d for d in docs if d["level"] == "WARNING" and "peer" in d]
    assert closed and closed[0]["peer"].startswith("127.0.0.1:"), docs
