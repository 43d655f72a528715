"""The cluster control manager (Kafka's ClusterControlManager): broker registrations and
fencing. Registration is written by each node itself (RegisterBroker, then FenceBroker
unfenced: metadata_quorum.py); here the active controller fences brokers whose session
ended or that shut down, and unfences those that came back, each with the leader elections
it causes (replication_control.py), as FenceBroker and PartitionChange records.

Pure (see control.py).
"""

from __future__ import annotations

import logging

from logbroker.coord.metadata import elections
from logbroker.coord.metadata.control import ControllerResult
from logbroker.coord.metadata.metadata import MetadataImage
from logbroker.coord.metadata.metadata_records import encode_record
from logbroker.coord.metadata.replication_control import ReplicationControlManager


class ClusterControlManager:
    def __init__(self, replication: ReplicationControlManager) -> None:
        self.replication = replication

    def fence_brokers(
        self, image: MetadataImage, node_ids: list[int], reason: str
    ) -> ControllerResult[list[elections.Election]]:
        """Fence brokers: they leave Metadata; each partition they lead gets another leader
        (elections.py) or none; they leave every ISR that has other members. Brokers not
        registered or already fenced are left out (no records when none is left)."""
        gone = {n for n in node_ids if n in image.brokers and not image.brokers[n].fenced}
        if not gone:
            return ControllerResult([], [])
        records = [
            encode_record("FenceBroker", node_id=n, epoch=image.brokers[n].epoch, fenced=True) for n in sorted(gone)
        ]
        changes, moved = self.replication.elect_for_brokers(image, gone)
        return ControllerResult(
            records + changes,
            moved,
            [
                (
                    f"fenced broker(s) {sorted(gone)} ({reason}); {len(moved)} partition leadership(s) changed: "
                    f"{elections.summary(moved)}",
                    {"peer": min(gone)} if len(gone) == 1 else {},
                )
            ],
            logging.WARNING,
        )

    def unfence_broker(
        self, image: MetadataImage, node_id: int, epoch: int
    ) -> ControllerResult[list[elections.Election]]:
        """Unfence a broker that heartbeats again at registration `epoch` (nothing when it
        re-registered since, or is not fenced); partitions left without a leader may get it."""
        b = image.brokers.get(node_id)
        if b is None or b.epoch != epoch or not b.fenced:
            return ControllerResult([], [])
        changes, moved = self.replication.elect_for_brokers(image, set(), frozenset({node_id}))
        return ControllerResult(
            [encode_record("FenceBroker", node_id=node_id, epoch=epoch, fenced=False)] + changes,
            moved,
            [
                (
                    f"unfenced broker {node_id} (epoch {epoch}); {len(moved)} partition(s) got a "
                    f"leader: {elections.summary(moved)}",
                    {"peer": node_id},
                )
            ],
        )
