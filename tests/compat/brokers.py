"""A broker for a suite to judge: logbroker or Apache Kafka, one node or a three-node cluster,
started by the bench harness (benches/peers) with the suite's extra settings on both."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.compat.results import ROOT

if str(ROOT) not in sys.path:  # benches/ is a package at the checkout's root
    sys.path.insert(0, str(ROOT))

BROKERS = ("logbroker", "kafka")


@dataclass
class Target:
    """What a suite needs to reach a running broker (or cluster)."""

    broker: str  # "logbroker" | "kafka"
    bootstrap: str  # host:port[,host:port...]
    nodes: int
    version: str
    data_dirs: list[Path]  # each node's first log directory (meta.properties, the metadata log)
    log_dirs: list[list[Path]]  # each node's log.dirs, all of them (for tools that read segment files)
    peer: object  # the benches.peers Peer or PeerCluster (for kills, logs)

    def log_tail(self, n: int = 60) -> str:
        return self.peer.log_tail(n)  # type: ignore[attr-defined]


def _version(broker: str, peer: object) -> str:
    if broker == "kafka":
        inst = getattr(peer, "inst", None) or getattr(getattr(peer, "nodes", [None])[0], "inst", None)
        return f"Apache Kafka {getattr(inst, 'version', '?')}"
    from importlib.metadata import version

    return f"logbroker {version('logbroker')}"


@contextlib.contextmanager
def started(
    broker: str, nodes: int = 1, extra: dict[str, str] | None = None, data_root: str | None = None, log_dirs: int = 1
) -> Iterator[Target]:
    """Start `broker` with `nodes` nodes (RF = min(nodes, 3)), each with `log_dirs` log
    directories, and yield a Target; stop it after."""
    from benches.peers.common import PeerCluster

    if broker == "kafka":
        from benches.peers.kafka import KafkaPeer, install

        inst = install()
        kw: dict = {"install_info": inst}
        cls = KafkaPeer
    elif broker == "logbroker":
        from benches.peers.logbroker import LogbrokerPeer

        kw = {}
        cls = LogbrokerPeer
    else:
        raise ValueError(f"unknown broker {broker!r}: one of {BROKERS}")
    extra = dict(extra or {})
    kw["log_dirs"] = log_dirs
    if nodes == 1:
        peer = cls(data_root, extra=extra, **kw)
        nodes_list = [peer]
    else:
        peer = PeerCluster(
            cls,
            n=nodes,
            data_root=data_root,
            replication_factor=min(nodes, 3),
            min_insync_replicas=min(nodes, 3) - 1 or 1,
            extra=extra,
            **kw,
        )
        nodes_list = peer.nodes
    peer.start()
    try:
        yield Target(
            broker,
            peer.bootstrap,
            nodes,
            _version(broker, peer),
            [n.data_dir for n in nodes_list],
            [n.log_dirs for n in nodes_list],
            peer,
        )
    finally:
        peer.stop()
