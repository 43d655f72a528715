"""The feature control manager (Kafka's FeatureControlManager, KIP-584/KIP-778): finalized
feature levels as FeatureLevel records in the metadata log, what every node advertises in
ApiVersions (supported ranges, finalized levels and their epoch), and UpdateFeatures
(`kafka-features upgrade|downgrade`).

The features and what logbroker supports of each (Kafka 4.1's levels; `kafka-features
version-mapping --release-version 4.1` gives metadata.version 27, transaction.version 2,
group.version 1, kraft.version 1, eligible.leader.replicas.version 1, share.version 0):

    metadata.version                 7 (3.3-IV3) .. 27 (4.1-IV1)  the metadata log's format; upgrades only
    kraft.version                    0 .. 0    a static quorum (KIP-853's dynamic quorum is level 1)
    transaction.version              0 .. 2    2: transactions v2 (KIP-890) offered to clients
    group.version                    0 .. 1    1: the consumer group protocol (KIP-848) is served
    share.version                    0 .. 2    1: share groups (KIP-932) are served; 2: and their
                                               dead-letter topics (KIP-1191) are written
    streams.version                  0 .. 1    1: streams groups (KIP-1071) are served (Kafka 4.2+)
    eligible.leader.replicas.version 0 .. 1    1: eligible leader replicas (KIP-966, eligible_leaders.py)

A new metadata log gets its levels from the active controller (`bootstrap`):
metadata.version 27, transaction.version from the `transaction.version` key, group.version
1, share.version 2 when `group.share.enable` (else 0; Kafka trunk's default for new clusters),
eligible.leader.replicas.version 1
(Kafka 4.1's default for new clusters), streams.version 1 (Kafka 4.2+'s default for new
clusters), kraft.version 0; a log written before features
existed gets them the same way. A log that finalized eligible.leader.replicas.version 0
keeps it until `kafka-features upgrade` raises it. Level 0 is written as no record (a feature at 0 is
not finalized, as Kafka lists it).

UpdateFeatures rules (Kafka's): an unknown feature, or a level outside what this software
supports, is INVALID_UPDATE_VERSION naming both; lowering a level needs the downgrade
type SAFE_DOWNGRADE (2) or UNSAFE_DOWNGRADE (3); metadata.version is never lowered here
(Kafka refuses metadata.version downgrades too). All or nothing: one refused feature
writes none.

Pure (see control.py).
"""

from __future__ import annotations

from logbroker.common.config import BrokerConfig
from logbroker.coord.metadata.control import ControllerResult
from logbroker.coord.metadata.metadata import MetadataImage
from logbroker.coord.metadata.metadata_records import encode_record
from logbroker.protocol import ErrorCode

METADATA_VERSION = "metadata.version"
METADATA_VERSION_MIN = 7  # 3.3-IV3, the first KRaft production level
METADATA_VERSION_LATEST = 27  # 4.1-IV1

# feature -> (min, max) this software supports
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (METADATA_VERSION_MIN, METADATA_VERSION_LATEST),
    "kraft.version": (0, 0),
    "transaction.version": (0, 2),
    "group.version": (0, 1),
    "share.version": (0, 2),
    "streams.version": (0, 1),
    "eligible.leader.replicas.version": (0, 1),
}

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3  # UpdateFeatures' UpgradeType

# (feature, error, message) per feature asked for, in order
FeatureResult = tuple[str, ErrorCode, str | None]


def bootstrap_levels(config: BrokerConfig) -> dict[str, int]:
    """The levels a new metadata log starts with (see the module doc)."""
    return {
        METADATA_VERSION: METADATA_VERSION_LATEST,
        "kraft.version": 0,
        "transaction.version": config.get_int("transaction.version"),
        "group.version": 1,
        "share.version": 2 if config.get_bool("group.share.enable") else 0,
        "streams.version": 1,
        "eligible.leader.replicas.version": 1,
    }


def finalized(image: MetadataImage, config: BrokerConfig) -> dict[str, int]:
    """The finalized levels clients see (read only): the image's, or, before the active
    controller wrote any (a new log's first moments), the bootstrap levels it will write."""
    if METADATA_VERSION in image.features:
        return image.features
    return {k: v for k, v in bootstrap_levels(config).items() if v > 0}


class FeatureControlManager:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config

    def bootstrap(self, image: MetadataImage) -> ControllerResult[None]:
        """The FeatureLevel records of a log that has no metadata.version yet (none
        otherwise)."""
        if METADATA_VERSION in image.features:
            return ControllerResult([], None)
        levels = bootstrap_levels(self.config)
        return ControllerResult(
            [encode_record("FeatureLevel", name=n, level=v) for n, v in sorted(levels.items()) if v > 0],
            None,
            [("finalized features: " + ", ".join(f"{n}={v}" for n, v in sorted(levels.items())), {})],
        )

    def update(
        self, image: MetadataImage, updates: list[tuple[str, int, int]]
    ) -> ControllerResult[list[FeatureResult]]:
        """UpdateFeatures: (feature, new max level, upgrade type) each; the response is
        (feature, error, message) each, and either every change is written or none."""
        results: list[FeatureResult] = []
        changes: dict[str, int] = {}
        seen: set[str] = set()
        for name, level, upgrade_type in updates:
            error = self._refusal(image, name, level, upgrade_type, seen)
            seen.add(name)
            if error is not None:
                results.append((name, ErrorCode.INVALID_UPDATE_VERSION, error))
                continue
            results.append((name, ErrorCode.NONE, None))
            if image.features.get(name, 0) != max(level, 0):
                changes[name] = max(level, 0)
        if any(code != ErrorCode.NONE for _n, code, _m in results):
            return ControllerResult([], results)
        records = [encode_record("FeatureLevel", name=n, level=v) for n, v in sorted(changes.items())]
        lines = [(f"feature {n}: {image.features.get(n, 0)} -> {v}", {}) for n, v in sorted(changes.items())]
        return ControllerResult(records, results, lines)

    @staticmethod
    def _refusal(image: MetadataImage, name: str, level: int, upgrade_type: int, seen: set[str]) -> str | None:
        if name in seen:
            return f"feature {name} appears more than once in the request"
        if name not in SUPPORTED:
            return f"feature {name} is not supported by this cluster (supported: {', '.join(sorted(SUPPORTED))})"
        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return f"feature {name}: upgrade type {upgrade_type} is not 1 (upgrade), 2 (safe downgrade) or 3 (unsafe)"
        lo, hi = SUPPORTED[name]
        level = max(level, 0)
        current = image.features.get(name, 0)
        if level > hi or (level < lo and level != 0) or (name == METADATA_VERSION and level < lo):
            return (
                f"feature {name}: level {level} is outside the supported range [{lo}, {hi}] of the brokers in "
                f"the cluster"
            )
        if level < current:
            if name == METADATA_VERSION:
                return (
                    f"feature {name}: downgrading from {current} to {level} is not supported (metadata.version "
                    "only moves up)"
                )
            if upgrade_type == UPGRADE:
                return (
                    f"feature {name}: cannot downgrade from {current} to {level} without the upgrade type set to "
                    "safe (2) or unsafe (3) downgrade"
                )
        return None
