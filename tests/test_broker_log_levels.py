"""Operators read ERROR as a fault and WARNING as something to look at: ordinary events
(a client hanging up mid-response, a topic deleted while the periodic passes run, a client's
bad request) must not be logged at those levels."""

from __future__ import annotations

import logging
import socket
import struct

from rawclient import request_header

from logbroker import Admin, Broker, NewTopic, Producer
from logbroker.protocol import REQUESTS


def noisy(caplog) -> list[str]:
    return [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.name.startswith("logbroker") and r.levelno >= logging.WARNING
    ]


def test_topics_deleted_under_the_periodic_passes_log_no_error(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="logbroker")
    # Every periodic pass runs each millisecond, so they keep visiting partitions being deleted.
    with Broker(
        data_dir=tmp_path / "d",
        **{
            "log.flush.scheduler.interval.ms": 1,
            "log.retention.check.interval.ms": 1,
            "replica.high.watermark.checkpoint.interval.ms": 1,
            "log.cleaner.backoff.ms": 1,
            "log.flush.interval.ms": 0,
        },
    ) as b:
        with (
            Admin(b.bootstrap_servers) as admin,
            Producer(b.bootstrap_servers, linger_ms=0, allow_auto_create_topics=False) as p,
        ):
            for round_ in range(25):
                names = [f"churn-{round_}-{i}" for i in range(4)]
                admin.create_topics([NewTopic(n, 3, config={"cleanup.policy": "compact,delete"}) for n in names])
                for n in names:
                    for part in range(3):
                        p.send(n, b"v", key=b"k", partition=part)
                p.flush(30)
                admin.delete_topics(names)
    assert noisy(caplog) == []


def test_client_hanging_up_mid_fetch_is_not_a_warning(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="logbroker")
    with Broker(data_dir=tmp_path / "d") as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("big", 1)])
        with Producer(b.bootstrap_servers, batch_size=1 << 20) as p:
            for _ in range(64):
                p.send("big", b"x" * 100_000)
            p.flush(30)
        host, port = b.bootstrap_servers.rsplit(":", 1)
        Fetch = REQUESTS[1]
        req = Fetch(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=64 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                Fetch.FetchTopic(
                    topic="big",
                    partitions=[Fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=64 << 20)],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        payload = request_header(1, 11, 1) + req.to_bytes(11)
        for _ in range(5):
            s = socket.create_connection((host, int(port)))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(struct.pack(">i", len(payload)) + payload)
            s.recv(1024)  # the response has started
            # Close with a reset while ~6 MB are still to be sent.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        # The broker goes on serving.
        with Admin(b.bootstrap_servers) as admin:
            assert "big" in admin.list_topics()
    assert noisy(caplog) == []
