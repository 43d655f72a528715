"""Leader elections in a three-node cluster of real `logbroker serve` processes: unclean
election (off by default: the partition stays offline; turned on for the topic: the only
live replica leads and the records it lacks are lost and logged as such), preferred-leader
election by ElectLeaders (`logbroker topic elect-leaders`) and by auto.leader.rebalance.enable."""

from __future__ import annotations

import subprocess
import sys
import time

from conftest import wait_until
from rawclient import RawClient
from replication_helpers import FAST, assign, full_isr, layout, produce_all, read_all, stored

from logbroker import Cluster
from logbroker.protocol import REQUESTS, ErrorCode


def set_topic_config(node, name: str, key: str, value: str) -> None:
    A = REQUESTS[44]
    req = A(
        resources=[
            A.AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=[A.AlterableConfig(name=key, config_operation=0, value=value)],
            )
        ],
        validate_only=False,
    )
    with RawClient(node.bootstrap_servers) as c:
        assert c.request(44, 1, req).responses[0].error_code == 0


def elect(node, election_type: int, partitions, version: int = 2):
    E = REQUESTS[43]
    req = E(
        election_type=election_type,
        timeout_ms=10000,
        topic_partitions=None
        if partitions is None
        else [E.TopicPartitions(topic=t, partitions=ps) for t, ps in partitions],
    )
    with RawClient(node.bootstrap_servers) as c:
        return c.request(43, version, req)


def results(resp) -> dict[tuple[str, int], int]:
    return {(t.topic, p.partition_id): p.error_code for t in resp.replica_election_results for p in t.partition_result}


def test_unclean_election_is_off_by_default_and_loses_what_the_isr_had_when_on(tmp_path):
    """Replicas [4, 3] (4 a broker-only node, so the controller quorum 1-3 keeps a majority
    through both kills): broker 3 dies and leaves the ISR, broker 4 takes more acknowledged
    records alone, then dies. With unclean election off the partition stays offline after 3
    returns; turned on for the topic, 3 leads with an ISR of itself: the records only 4 had
    are gone (and logged as lost). When 4 returns it truncates to 3's log."""
    with Cluster(3, broker_only=1, data_dir=tmp_path, config=FAST) as cluster:
        assign(cluster.node(1), "uc", [4, 3])
        full_isr(cluster, "uc", 1)
        before = produce_all(cluster.bootstrap_servers, "uc", 500)
        time.sleep(0.5)  # broker 3 fetches the last of them
        cluster.node(3).kill()
        wait_until(lambda: layout(cluster.node(1))[("uc", 0)][3] == [4], timeout=30, what="ISR shrunk to [4]")
        alone = produce_all(cluster.bootstrap_servers, "uc", 300)  # acks=all with ISR [4]: acknowledged
        cluster.node(4).kill()
        wait_until(lambda: layout(cluster.node(1))[("uc", 0)][0] == -1, timeout=30, what="uc-0 offline")
        cluster.node(3).start()
        wait_until(lambda: 3 in {b for b in brokers(cluster.node(1))}, timeout=30, what="broker 3 back")
        time.sleep(3)  # broker-session checks with broker 3 back: still no leader
        assert layout(cluster.node(1))[("uc", 0)][0] == -1, "unclean election is off by default"

        set_topic_config(cluster.node(2), "uc", "unclean.leader.election.enable", "true")
        leader, epoch, replicas, isr = wait_until(
            lambda: (v := layout(cluster.node(1))[("uc", 0)])[0] == 3 and v, timeout=30, what="3 elected (unclean)"
        )
        assert isr == [3]
        got = read_all(cluster.node(3).bootstrap_servers, "uc")
        assert [v for _, v in got] == [v for _, _, v in sorted(before, key=lambda r: r[1])], (
            "the new leader has every record the ISR had when it left, and nothing more"
        )
        lost = [(o, v) for _, o, v in alone if (o, v) not in set(got)]
        assert len(lost) == len(alone) == 300
        assert "UNCLEAN leader election for uc-0" in "".join(n.log_text() for n in cluster.nodes)

        cluster.node(4).start()
        wait_until(
            lambda: sorted(layout(cluster.node(1))[("uc", 0)][3]) == [3, 4],
            timeout=60,
            what="broker 4 truncated and back in the ISR",
        )
        after = produce_all(cluster.bootstrap_servers, "uc", 100)
        assert len(after) == 100
        time.sleep(1)
    records_3, epochs_3 = stored(tmp_path / "node3", "uc", 0)
    records_4, epochs_4 = stored(tmp_path / "node4", "uc", 0)
    assert records_4 == records_3, "broker 4 dropped its unreplicated tail and holds broker 3's log"
    assert epochs_4 == epochs_3
    assert len(records_3) == 600


def brokers(node) -> list[int]:
    with RawClient(node.bootstrap_servers) as c:
        return [b.node_id for b in c.request(3, 12, REQUESTS[3](topics=[], allow_auto_topic_creation=False)).brokers]


def test_preferred_leader_election_by_request_and_by_cli(tmp_path):
    config = dict(FAST, **{"auto.leader.rebalance.enable": "false"})
    with Cluster(3, data_dir=tmp_path, config=config) as cluster:
        assign(cluster.node(1), "pref", [1, 2, 3])
        full_isr(cluster, "pref", 1)
        produce_all(cluster.bootstrap_servers, "pref", 200)
        # the preferred replica leads already: nothing to do
        assert results(elect(cluster.node(2), 0, [("pref", [0])])) == {("pref", 0): ErrorCode.ELECTION_NOT_NEEDED}
        cluster.node(1).kill()
        wait_until(lambda: layout(cluster.node(2))[("pref", 0)][0] == 2, timeout=30, what="2 takes over")
        # preferred replica down: not available
        assert results(elect(cluster.node(2), 0, [("pref", [0])])) == {
            ("pref", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        }
        cluster.node(1).start()
        wait_until(
            lambda: sorted(layout(cluster.node(2))[("pref", 0)][3]) == [1, 2, 3], timeout=60, what="1 back in the ISR"
        )
        time.sleep(2)
        assert layout(cluster.node(2))[("pref", 0)][0] == 2, "no automatic rebalance when it is disabled"
        # unknown partitions, v0 (no election type) and v1 (top-level error code) answer too
        assert results(elect(cluster.node(3), 0, [("nope", [0]), ("pref", [7])], version=0)) == {
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("pref", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert results(elect(cluster.node(3), 1, [("pref", [0])], version=1)) == {
            ("pref", 0): ErrorCode.ELECTION_NOT_NEEDED
        }  # unclean election: it has a leader

        cli = [
            sys.executable,
            "-m",
            "logbroker",
            "topic",
            "--bootstrap-server",
            cluster.node(3).bootstrap_servers,
            "elect-leaders",
            "--topic",
            "pref",
        ]
        out = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "pref-0: elected" in out.stdout
        leader, epoch, _replicas, _isr = layout(cluster.node(2))[("pref", 0)]
        assert leader == 1
        out = subprocess.run(cli, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "pref-0: no election needed" in out.stdout, out
        # every record is still there, once, after two leader changes
        assert len(read_all(cluster.bootstrap_servers, "pref")) == 200


def test_auto_leader_rebalance_moves_leadership_back(tmp_path):
    config = dict(FAST, **{"leader.imbalance.check.interval.seconds": 2})
    with Cluster(3, data_dir=tmp_path, config=config) as cluster:
        assign(cluster.node(1), "auto", [2, 3, 1])
        full_isr(cluster, "auto", 1)
        cluster.node(2).kill()
        wait_until(lambda: layout(cluster.node(1))[("auto", 0)][0] == 3, timeout=30, what="3 takes over")
        cluster.node(2).start()
        wait_until(
            lambda: layout(cluster.node(1))[("auto", 0)][0] == 2,
            timeout=60,
            what="leadership back on the preferred replica 2",
        )
        # the controller logs the move after committing it: the image may be seen first
        wait_until(
            lambda: (
                "leader rebalance: 1 partition(s) back on their preferred replica"
                in "".join(n.log_text() for n in cluster.nodes)
            ),
            timeout=10,
            what="the rebalance logged",
        )
