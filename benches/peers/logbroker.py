"""logbroker as a benchmark peer: `python -m logbroker serve` in its own process on
loopback with a temp data directory, with the same start/stop/pid interface as the Kafka
peer (benches/peers/kafka.py); one node, or one node of a PeerCluster (`--voters`).

    python -m benches.peers.logbroker run

LOGBROKER_PEER_SET="key=value,key=value" adds broker settings (or overrides the ones below)
for an A/B run of one setting, e.g. max.incremental.fetch.session.cache.slots=0.
"""

from __future__ import annotations

import os
import subprocess
import sys

from benches.peers.common import Peer, run_cli


def _known_keys() -> set[str]:
    try:
        from logbroker.common.config import BROKER_KEYS
    except ImportError:
        return set()
    return set(BROKER_KEYS)


class LogbrokerPeer(Peer):
    name = "logbroker"

    def _sets(self) -> dict[str, str]:
        sets = {
            "node.id": str(self.node_id),
            "num.partitions": "1",
            "default.replication.factor": str(self.replication_factor),
            "min.insync.replicas": str(self.min_insync_replicas),
            "log.segment.bytes": str(self.segment_bytes),
            # no fsync per write (the defaults, spelled out: flush left to the OS)
            "log.flush.interval.messages": str(2**63 - 1),
            "log.flush.interval.ms": str(2**63 - 1),
            "log.index.interval.bytes": "4096",
            "message.max.bytes": "1048588",
            "auto.create.topics.enable": "true",
        }
        # the internal topics' replication and the group keys, as on the Kafka peer (only the
        # keys this logbroker knows)
        rf, min_isr = str(self.replication_factor), str(self.min_insync_replicas)
        for k, v in (
            ("group.initial.rebalance.delay.ms", "0"),
            ("offsets.topic.replication.factor", rf),
            ("share.coordinator.state.topic.replication.factor", rf),
            ("share.coordinator.state.topic.min.isr", min_isr),
            ("transaction.state.log.replication.factor", rf),
            ("transaction.state.log.min.isr", min_isr),
        ):
            if k in _known_keys():
                sets[k] = v
        sets.update(self.extra)
        for item in filter(None, os.environ.get("LOGBROKER_PEER_SET", "").split(",")):
            k, sep, v = item.partition("=")
            if not sep:
                raise ValueError(f"LOGBROKER_PEER_SET item {item!r} is not key=value")
            sets[k.strip()] = v.strip()
        return sets

    def settings(self) -> dict[str, str]:
        port = self.port or "<free port>"
        s = {"listeners": f"127.0.0.1:{port}"}
        if self.voters:
            s = {
                "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{self.cport or '<free port>'}",
                "controller.quorum.voters": self.voters,
            }
        s["log.dirs"] = self.log_dirs_setting
        s.update(self._sets())
        s["(process)"] = f"{sys.executable} -m logbroker serve (one Python process, trio, Rust core)"
        return s

    def _launch(self) -> subprocess.Popen:
        assert self.workdir is not None
        cmd = [sys.executable, "-m", "logbroker", "serve", "--data-dir", self.log_dirs_setting]
        if self.roles == "broker":  # a broker-only node of a PeerCluster (add_broker)
            cmd += ["--roles", "broker", "--listen", f"PLAINTEXT://127.0.0.1:{self.port}", "--voters", self.voters]
        elif self.voters:  # a node of a PeerCluster: a CONTROLLER listener and the voter set
            cmd += [
                "--listen",
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.cport}",
                "--voters",
                self.voters,
            ]
        else:
            cmd += ["--listen", f"127.0.0.1:{self.port}"]
        for k, v in self._sets().items():
            cmd += ["--set", f"{k}={v}"]
        out = self._open_log("stdout.log")
        err = self._open_log("stderr.log")
        return subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=self.workdir)


if __name__ == "__main__":
    sys.exit(run_cli(LogbrokerPeer))
