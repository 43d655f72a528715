"""The cluster control manager (Kafka's ClusterControlManager): broker registrations and
fencing. Registration is written by each node itself (RegisterBroker, then FenceBroker
unfenced: metadata_quorum.py); here the active controller fences brokers whose session
ended or that shut down, and unfences those that came back, each with the leader elections
it causes (replication_control.py), as FenceBroker and PartitionChange records; and
removes registrations for good (UnregisterBroker, KIP-500's `kafka-cluster unregister`;
UnregisterController, Kafka 4.4's KIP-1312), a node that still runs registering again.

Pure (see control.py).
"""

from __future__ import annotations

import dataclasses
import logging

from logbroker.coord.metadata import elections
from logbroker.coord.metadata.control import ControllerError, ControllerResult, partition_change_record
from logbroker.coord.metadata.metadata import MetadataImage
from logbroker.coord.metadata.metadata_records import encode_record
from logbroker.coord.metadata.replication_control import ReplicationControlManager
from logbroker.protocol import ErrorCode


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

    def unregister_broker(self, image: MetadataImage, node_id: int) -> ControllerResult[list[elections.Election]]:
        """UnregisterBroker (Kafka's ReplicationControlManager.unregisterBroker): the broker
        leaves every ISR (as fencing: the last member of an ISR without ELR stays, as
        Kafka's), every ELR and last known ELR, partitions it led get another leader
        (elections.py), and its registration goes, all in one entry. Its replicas stay
        assigned (offline until it registers again or is reassigned away).
        BROKER_ID_NOT_REGISTERED for an id with no registration."""
        b = image.brokers.get(node_id)
        if b is None:
            raise ControllerError(
                ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker ID {node_id} is not currently registered"
            )
        elected = elections.elect_for_brokers(
            image, {node_id}, self.replication.unclean_allowed, min_isr=self.replication.min_isr_of(image)
        )
        changed = {(t.name, new.partition): (t, new) for t, new, _e in elected}
        moved = [e for _t, _n, e in elected if e is not None]
        for t in image.topics.values():
            for ps in t.partitions.values():
                new = changed.get((t.name, ps.partition), (t, ps))[1]
                if node_id in new.elr or node_id in new.last_known_elr:
                    if new is ps:
                        new = dataclasses.replace(ps, partition_epoch=ps.partition_epoch + 1)
                    new.elr = [r for r in new.elr if r != node_id]
                    new.last_known_elr = [r for r in new.last_known_elr if r != node_id]
                    changed[(t.name, ps.partition)] = (t, new)
        records = [partition_change_record(t.topic_id, new) for t, new in changed.values()]
        records.append(encode_record("UnregisterBroker", node_id=node_id, epoch=b.epoch))
        return ControllerResult(
            records,
            moved,
            [
                (
                    f"unregistered broker {node_id} (epoch {b.epoch}); it left the ISR/ELR of "
                    f"{len(changed)} partition(s); {len(moved)} partition leadership(s) changed: "
                    f"{elections.summary(moved)}",
                    {"peer": node_id},
                )
            ],
            logging.WARNING,
        )

    def unregister_controller(self, image: MetadataImage, node_id: int, active_id: int) -> ControllerResult[None]:
        """UnregisterController (Kafka 4.4, KIP-1312): remove a controller-only node's
        registration (its RegisterController record). INVALID_REQUEST for the active
        controller itself, CONTROLLER_ID_NOT_REGISTERED for an id with no controller
        registration (a combined node is registered as a broker, not as a controller)."""
        if node_id == active_id:
            raise ControllerError(ErrorCode.INVALID_REQUEST, "Controller cannot unregister itself while it is active.")
        if node_id not in image.controllers:
            raise ControllerError(
                ErrorCode.CONTROLLER_ID_NOT_REGISTERED, f"Controller ID {node_id} is not currently registered"
            )
        return ControllerResult(
            [encode_record("UnregisterController", node_id=node_id)],
            None,
            [(f"unregistered controller {node_id}", {"peer": node_id})],
            logging.WARNING,
        )
