"""UnregisterBroker (64) and UnregisterController (94): a stopped broker removed for good
with Kafka 4.4's own `kafka-cluster unregister` (gone from DescribeCluster and every ISR,
its partitions led by others; registered again when it restarts), a running broker
registering again, the errors (BROKER_ID_NOT_REGISTERED, CLUSTER_AUTHORIZATION_FAILED), and
controller-only nodes' registrations removed by UnregisterController (errors
CONTROLLER_ID_NOT_REGISTERED, INVALID_REQUEST for the active controller)."""

from __future__ import annotations

import subprocess

from conftest import needs_java, wait_until
from rawclient import RawClient
from replication_helpers import FAST, create, full_isr, layout
from test_authorization import Session, acl_broker

from logbroker import Cluster
from logbroker.protocol import REQUESTS, ErrorCode


def active_controller(bs: str) -> int:
    return wait_until(lambda: described(bs)[1] if described(bs)[1] > 0 else None, what="an active controller")


def described(bs: str) -> tuple[list[int], int]:
    """(every registered broker, fenced too (KIP-1073), active controller) by DescribeCluster."""
    with RawClient(bs) as c:
        r = c.request(60, 2, REQUESTS[60](include_fenced_brokers=True))
    return sorted(b.broker_id for b in r.brokers), r.controller_id


def unregister(bs: str, api_key: int, node_id: int):
    body = REQUESTS[64](broker_id=node_id) if api_key == 64 else REQUESTS[94](controller_id=node_id)
    with RawClient(bs, timeout=30) as c:
        return c.request(api_key, 0, body)


def kafka_cluster(*args: str) -> subprocess.CompletedProcess:
    from benches.peers.kafka import install

    cmd = install().tools_java("org.apache.kafka.tools.ClusterTool", list(args))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@needs_java
def test_kafka_cluster_unregister_removes_a_stopped_broker_until_it_restarts(tmp_path):
    with Cluster(3, data_dir=tmp_path, config=FAST) as cluster:
        bs = cluster.nodes[0].bootstrap_servers
        create(cluster.nodes[0], "u", 6, 3)
        full_isr(cluster, "u", 6)
        active = active_controller(bs)
        gone = next(n for n in (3, 2, 1) if n != active)
        led = [k for k, v in layout(cluster.nodes[0]).items() if k[0] == "u" and v[0] == gone]
        assert led, f"broker {gone} leads no partition of u"
        cluster.node(gone).kill()  # still registered and in every ISR until its session ends

        r = kafka_cluster("unregister", "--bootstrap-server", bs, "--id", str(gone))
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        ids, _ = described(bs)
        assert gone not in ids
        parts = {k: v for k, v in layout(cluster.nodes[0]).items() if k[0] == "u"}
        assert all(v[0] not in (gone, -1) for k, v in parts.items()), parts
        assert all(gone not in v[3] for v in parts.values()), parts
        assert all(parts[k][1] > 0 for k in led), parts  # a new leader epoch where it led

        assert unregister(bs, 64, gone).error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
        assert unregister(bs, 64, 42).error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
        # on the active controller's controller listener too
        ctl = f"127.0.0.1:{cluster.node(active).controller_port}"
        assert unregister(ctl, 64, 42).error_code == ErrorCode.BROKER_ID_NOT_REGISTERED

        cluster.node(gone).restart()
        wait_until(lambda: gone in described(bs)[0], what=f"broker {gone} registered again")
        full_isr(cluster, "u", 6)


def test_a_running_broker_unregistered_registers_again(tmp_path):
    with Cluster(3, data_dir=tmp_path, config=FAST) as cluster:
        bs = cluster.nodes[0].bootstrap_servers
        active = active_controller(bs)
        live = next(n for n in (3, 2, 1) if n != active)
        assert unregister(bs, 64, live).error_code == ErrorCode.NONE
        wait_until(lambda: described(bs)[0] == [1, 2, 3], what=f"broker {live} registered again")
        assert cluster.node(live).proc.poll() is None
        create(cluster.node(live), "again", 3, 3)  # it serves (and forwards) as before
        full_isr(cluster, "again", 3)


def test_unregister_broker_needs_alter_on_the_cluster(tmp_path):
    with acl_broker(tmp_path) as b:
        alice, admin = Session(b, "alice"), Session(b, "admin")
        try:
            assert alice(64, 0, broker_id=1).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert alice(94, 0, controller_id=1).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert admin(64, 0, broker_id=7).error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
            assert admin(94, 0, controller_id=7).error_code == ErrorCode.CONTROLLER_ID_NOT_REGISTERED
        finally:
            alice.close()
            admin.close()


def test_unregister_controller_removes_a_controller_only_registration(tmp_path):
    with Cluster(3, broker_only=1, controller_only=True, data_dir=tmp_path, config=FAST) as cluster:
        bs = cluster.node(4).bootstrap_servers
        active = active_controller(bs)
        other = next(n for n in (3, 2, 1) if n != active)
        assert unregister(bs, 94, 99).error_code == ErrorCode.CONTROLLER_ID_NOT_REGISTERED
        assert unregister(bs, 94, 4).error_code == ErrorCode.CONTROLLER_ID_NOT_REGISTERED  # a broker
        r = unregister(bs, 94, active)
        assert r.error_code == ErrorCode.INVALID_REQUEST, r
        assert "active" in r.error_message
        ctl = f"127.0.0.1:{cluster.node(active).controller_port}"
        assert unregister(ctl, 94, 99).error_code == ErrorCode.CONTROLLER_ID_NOT_REGISTERED

        cluster.node(other).kill()
        assert unregister(bs, 94, other).error_code == ErrorCode.NONE
        assert unregister(bs, 94, other).error_code == ErrorCode.CONTROLLER_ID_NOT_REGISTERED  # gone
        cluster.node(other).restart()  # registers again at start
        wait_until(
            lambda: unregister(bs, 94, other).error_code == ErrorCode.NONE, what=f"controller {other} registered again"
        )
        # and, still running, again after it was unregistered
        wait_until(
            lambda: unregister(bs, 94, other).error_code == ErrorCode.NONE, what=f"controller {other} registered again"
        )
