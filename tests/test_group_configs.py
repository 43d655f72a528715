"""Group configs (Kafka's GroupConfig keys on a GROUP config resource, type 32): set with
IncrementalAlterConfigs/AlterConfigs, described with DescribeConfigs, stored in the metadata
log (they survive a restart and reach every node), and used by share groups and KIP-848
consumer groups; Kafka's kafka-configs tool manages them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import needs_java, wait_until
from rawclient import RawClient
from test_bad_input import create_topic
from test_share_groups import acquired, fetch, heartbeat, produce, topic_id

from logbroker import Broker, Cluster
from logbroker.protocol import REQUESTS, ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

Describe, Alter, Incremental = REQUESTS[32], REQUESTS[33], REQUESTS[44]
GROUP, SET, DELETE = 32, 0, 1


def alter(c: RawClient, group: str, changes: dict[str, str | None], validate_only: bool = False):
    req = Incremental(
        resources=[
            Incremental.AlterConfigsResource(
                resource_type=GROUP,
                resource_name=group,
                configs=[
                    Incremental.AlterableConfig(name=k, config_operation=DELETE if v is None else SET, value=v)
                    for k, v in changes.items()
                ],
            )
        ],
        validate_only=validate_only,
    )
    return c.request(44, 1, req).responses[0]


def describe(c: RawClient, group: str) -> dict[str, tuple[str, int]]:
    r = c.request(
        32,
        4,
        Describe(
            resources=[
                Describe.DescribeConfigsResource(resource_type=GROUP, resource_name=group, configuration_keys=None)
            ],
            include_synonyms=False,
            include_documentation=False,
        ),
    ).results[0]
    assert r.error_code == 0, r.error_message
    return {c.name: (c.value, c.config_source) for c in r.configs}


def test_set_describe_delete_and_refuse_bad_values(tmp_path):
    with Broker(data_dir=tmp_path / "d", config={"group.share.record.lock.duration.ms": "20000"}) as b:
        with RawClient(b.bootstrap_servers) as c:
            d = describe(c, "g")
            assert d["share.record.lock.duration.ms"] == ("20000", 4), "the broker's key, static broker config"
            assert d["share.auto.offset.reset"] == ("latest", 5), "default"
            assert (
                alter(c, "g", {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "7"}).error_code
                == 0
            )
            d = describe(c, "g")
            assert (d["share.auto.offset.reset"], d["share.delivery.count.limit"]) == (("earliest", 8), ("7", 8))
            assert describe(c, "other")["share.auto.offset.reset"] == ("latest", 5), "per group"
            bad = alter(c, "g", {"share.auto.offset.reset": "middle"})
            assert bad.error_code == ErrorCode.INVALID_CONFIG and "share.auto.offset.reset" in bad.error_message
            bad = alter(c, "g", {"no.such.key": "1"})
            assert bad.error_code == ErrorCode.INVALID_CONFIG and "no.such.key" in bad.error_message
            assert alter(c, "g", {"share.delivery.count.limit": "99"}).error_code == ErrorCode.INVALID_CONFIG
            assert alter(c, "g", {"share.delivery.count.limit": "9"}, validate_only=True).error_code == 0
            assert describe(c, "g")["share.delivery.count.limit"] == ("7", 8), "bad and validate-only change nothing"
            assert alter(c, "g", {"share.delivery.count.limit": None}).error_code == 0
            assert describe(c, "g")["share.delivery.count.limit"] == ("5", 5)
            r = c.request(
                33,
                2,
                Alter(
                    resources=[
                        Alter.AlterConfigsResource(
                            resource_type=GROUP,
                            resource_name="g",
                            configs=[Alter.AlterableConfig(name="share.session.timeout.ms", value="30000")],
                        )
                    ],
                    validate_only=False,
                ),
            )
            assert r.responses[0].error_code == 0
            d = describe(c, "g")
            assert d["share.session.timeout.ms"] == ("30000", 8)
            assert d["share.auto.offset.reset"] == ("latest", 5), "AlterConfigs replaces the whole set"
    with Broker(data_dir=tmp_path / "d") as b, RawClient(b.bootstrap_servers) as c:
        assert describe(c, "g")["share.session.timeout.ms"] == ("30000", 8), "kept in the metadata log"


def test_share_groups_follow_their_group_configs(tmp_path):
    cfg = {"group.share.enable": "true"}  # broker default: share.auto.offset.reset=latest
    with Broker(data_dir=tmp_path / "d", config=cfg) as b:
        bs = b.bootstrap_servers
        with RawClient(bs) as c:
            assert create_topic(c, "cfg", 1) == 0
            tid = topic_id(c, "cfg")
        produce(bs, "cfg", [b"old-1", b"old-2"])
        with RawClient(bs) as c:
            assert (
                alter(
                    c, "early", {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "5000"}
                ).error_code
                == 0
            )
            heartbeat(c, "early", "m", 0, ["cfg"])
            r = fetch(c, "early", "m", 0, [(tid, 0)])
            assert acquired(r)[0] == [(0, 1, 1)] and r.acquisition_lock_timeout_ms == 5000
            heartbeat(c, "late", "m", 0, ["cfg"])
            r = fetch(c, "late", "m", 0, [(tid, 0)])
            assert acquired(r) == {} and r.acquisition_lock_timeout_ms == 30000, "the broker default: latest"
            hb = heartbeat(c, "early", "m", 1)
            assert hb.heartbeat_interval_ms == 5000
            assert alter(c, "early", {"share.heartbeat.interval.ms": "2500"}).error_code == 0
            assert heartbeat(c, "early", "m", hb.member_epoch).heartbeat_interval_ms == 2500


def test_group_configs_are_forwarded_and_reach_every_node(tmp_path):
    with Cluster(3, data_dir=tmp_path) as cluster:
        leader = cluster.controller_id()
        nodes = [cluster.node(i) for i in (1, 2, 3)]
        other = next(n for n in nodes if n.node_id != leader)  # not the active controller: forwarded
        with RawClient(other.bootstrap_servers) as c:
            assert alter(c, "everywhere", {"consumer.session.timeout.ms": "12000"}).error_code == 0
        # the controller has committed the change when it answers; each broker applies it when
        # it replays the record (as in Kafka), so a node may answer with the old value briefly
        for n in nodes:
            with RawClient(n.bootstrap_servers) as c:
                wait_until(
                    lambda c=c: describe(c, "everywhere")["consumer.session.timeout.ms"] == ("12000", 8),
                    timeout=30,
                    what=f"node {n.node_id} to describe the group config the controller committed",
                )


@needs_java
def test_kafka_configs_tool_manages_group_configs(tmp_path):
    from benches.peers.kafka import install

    tools = install()
    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers

        def configs(*args: str) -> str:
            cmd = tools.tools_java(
                "org.apache.kafka.tools.ConfigCommand",
                ["--bootstrap-server", bs, "--entity-type", "groups", "--entity-name", "tg", *args],
            )
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stderr[-2000:]
            return r.stdout

        configs("--alter", "--add-config", "share.auto.offset.reset=earliest,share.record.lock.duration.ms=15000")
        out = configs("--describe")
        assert "share.auto.offset.reset=earliest" in out and "share.record.lock.duration.ms=15000" in out, out
        configs("--alter", "--delete-config", "share.record.lock.duration.ms")
        with RawClient(bs) as c:
            d = describe(c, "tg")
        assert d["share.auto.offset.reset"] == ("earliest", 8) and d["share.record.lock.duration.ms"][1] == 5
