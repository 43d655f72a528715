"""Feature levels in the metadata log (coord/metadata/feature_control.py): what ApiVersions
advertises, UpdateFeatures' rules over the wire, Kafka's own `kafka-features`, the APIs a
level gates (group.version: KIP-848's consumer groups), and levels surviving a restart."""

from __future__ import annotations

import subprocess

import pytest
from conftest import needs_java
from rawclient import RawClient

from logbroker import Broker
from logbroker.coord.metadata.feature_control import METADATA_VERSION_LATEST, SUPPORTED
from logbroker.protocol import REQUESTS, ErrorCode

ApiVersions, UpdateFeatures = REQUESTS[18], REQUESTS[57]


def features(bs: str) -> tuple[dict, dict, int, set[int]]:
    """(supported {name: (min, max)}, finalized {name: level}, epoch, API keys) from ApiVersions v4."""
    with RawClient(bs) as c:
        r = c.request(18, 4, ApiVersions(client_software_name="t", client_software_version="1"))
    assert r.error_code == 0
    return (
        {f.name: (f.min_version, f.max_version) for f in r.supported_features},
        {f.name: f.max_version_level for f in r.finalized_features},
        r.finalized_features_epoch,
        {k.api_key for k in r.api_keys},
    )


def update(bs: str, version: int, *updates: tuple[str, int, int], validate_only: bool = False):
    req = UpdateFeatures(
        timeout_ms=10_000,
        validate_only=validate_only,
        feature_updates=[
            UpdateFeatures.FeatureUpdateKey(feature=n, max_version_level=lvl, upgrade_type=t)
            if version >= 1
            else UpdateFeatures.FeatureUpdateKey(feature=n, max_version_level=lvl, allow_downgrade=t > 1)
            for n, lvl, t in updates
        ],
    )
    with RawClient(bs) as c:
        return c.request(57, version, req)


def test_levels_are_finalized_in_the_log_and_updated_by_update_features(tmp_path):
    data = tmp_path / "d"
    with Broker(data_dir=data) as b:
        bs = b.bootstrap_servers
        supported, finalized, epoch, apis = features(bs)
        assert supported == dict(SUPPORTED)
        assert finalized == {
            "metadata.version": METADATA_VERSION_LATEST,
            "transaction.version": 2,
            "group.version": 1,
            "share.version": 2,
            "streams.version": 1,
            "eligible.leader.replicas.version": 1,
        }
        assert epoch > 0 and 68 in apis and 57 in apis  # ConsumerGroupHeartbeat, UpdateFeatures

        # refusals change nothing: per feature (v1), or the first one top-level (v2)
        r = update(bs, 1, ("transaction.version", 1, 1), ("group.version", 2, 1))
        assert r.error_code == 0
        got = {x.feature: (x.error_code, x.error_message) for x in r.results}
        assert got["transaction.version"][0] == ErrorCode.INVALID_UPDATE_VERSION
        assert "safe (2) or unsafe (3) downgrade" in got["transaction.version"][1]
        assert got["group.version"][0] == ErrorCode.INVALID_UPDATE_VERSION and "[0, 1]" in got["group.version"][1]
        for bad, why in [
            (("metadata.version", 20, 2), "only moves up"),
            (("no.such.feature", 1, 1), "not supported"),
            (("kraft.version", 1, 1), "[0, 0]"),
        ]:
            r = update(bs, 2, bad)
            assert (r.error_code, r.results) == (ErrorCode.INVALID_UPDATE_VERSION, []) and why in r.error_message
        assert features(bs)[1] == finalized
        r = update(bs, 1, ("transaction.version", 1, 2), validate_only=True)
        assert [x.error_code for x in r.results] == [0] and features(bs)[1] == finalized

        # a safe downgrade, and group.version 0 stops serving the consumer group protocol
        r = update(bs, 1, ("transaction.version", 1, 2), ("group.version", 0, 3))
        assert [(x.feature, x.error_code) for x in r.results] == [("transaction.version", 0), ("group.version", 0)]
        _s, now, new_epoch, apis = features(bs)
        assert now["transaction.version"] == 1 and "group.version" not in now and new_epoch > epoch
        assert 68 not in apis and 69 not in apis
        assert b.server.controller.image.features["transaction.version"] == 1
    with Broker(data_dir=data) as b:  # the levels are in the log
        _s, now, _e, apis = features(b.bootstrap_servers)
        assert now["transaction.version"] == 1 and "group.version" not in now and 68 not in apis
        r = update(b.bootstrap_servers, 2, ("group.version", 1, 1), ("transaction.version", 2, 1))
        assert (r.error_code, r.error_message) == (0, None)
        _s, now, _e, apis = features(b.bootstrap_servers)
        assert now["group.version"] == 1 and now["transaction.version"] == 2 and 68 in apis


def test_update_features_needs_alter_on_the_cluster(tmp_path):
    config = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
    }
    with Broker(data_dir=tmp_path / "d", config=config) as b:
        r = update(b.bootstrap_servers, 1, ("transaction.version", 1, 2))
        assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert [x.error_code for x in r.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
        assert b.server.controller.image.features["transaction.version"] == 2


@needs_java
def test_kafka_features_tool(tmp_path):
    from benches.peers.kafka import install

    tools = install()

    def kafka_features(bs: str, *args: str) -> str:
        cmd = tools.tools_java("org.apache.kafka.tools.FeatureCommand", ["--bootstrap-server", bs, *args])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        return r.stdout

    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers
        out = kafka_features(bs, "describe")
        lines = {line.split()[1]: " ".join(line.split()) for line in out.splitlines() if line.startswith("Feature:")}
        assert "FinalizedVersionLevel: 2" in lines["transaction.version"], out
        assert "SupportedMinVersion: 3.3-IV3 SupportedMaxVersion: 4.1-IV1" in lines["metadata.version"], out
        assert "FinalizedVersionLevel: 4.1-IV1" in lines["metadata.version"], out
        assert "FinalizedVersionLevel: 1" in lines["group.version"], out
        assert "FinalizedVersionLevel: 1" in lines["eligible.leader.replicas.version"], out
        assert sorted(lines) == sorted(SUPPORTED), out
        kafka_features(bs, "downgrade", "--feature", "transaction.version=1")
        assert features(bs)[1]["transaction.version"] == 1
        kafka_features(bs, "upgrade", "--feature", "transaction.version=2")
        assert features(bs)[1]["transaction.version"] == 2
        out = kafka_features(bs, "describe")
        assert "FinalizedVersionLevel: 2" in next(x for x in out.splitlines() if "transaction.version" in x)
        # a cluster from before ELR (level 0) is upgraded the way Kafka's operators do
        kafka_features(bs, "downgrade", "--feature", "eligible.leader.replicas.version=0")
        assert "eligible.leader.replicas.version" not in features(bs)[1]
        assert b.server.controller.replication.min_isr_of(b.server.controller.image) is None
        kafka_features(bs, "upgrade", "--feature", "eligible.leader.replicas.version=1")
        assert features(bs)[1]["eligible.leader.replicas.version"] == 1
        assert b.server.controller.replication.min_isr_of(b.server.controller.image) is not None


@pytest.mark.parametrize("version", [0, 1, 2])
def test_every_update_features_version_round_trips(tmp_path, version):
    with Broker(data_dir=tmp_path / "d") as b:
        r = update(b.bootstrap_servers, version, ("share.version", 0, 2))
        assert r.error_code == 0 and b.server.controller.image.features.get("share.version") is None
        assert 76 not in features(b.bootstrap_servers)[3]  # ShareGroupHeartbeat stops being advertised
