"""A metadata delta: the changes of one or more metadata-log entries over the image they
apply to (Kafka's MetadataDelta), and the new image they make.

Images are never changed once published: readers (handlers, the replica manager, the data
path's view) may hold one across awaits. A delta starts as a shallow copy of its base image
and copies a part only when a record first writes it: the topics dict and the topic-id
index once, a topic (its partitions and configs dicts) once, a partition state once, and
likewise brokers, group configs, SCRAM credentials, ACLs and client quotas. Everything a
record does not touch is shared with the base image, so applying a record costs what the
record changes, not what the cluster holds (the dicts of topics and ids are copied once per
delta: a C-level copy of references, ~1 ms per 50,000 topics; see docs/decisions.md).

Remote log segments (tiered storage) are a dict (topic id, partition) -> tuple of segments:
the dict is copied once per delta, like the topics dict, and a record replaces its
partition's tuple with a new one, so a RemoteLogSegment record costs O(segments of that
partition) (find the segment, build the new tuple) and the other partitions' tuples stay
the very objects of the base image.

Listeners learn what changed from the delta (`changed_topics`, `deleted_topics`,
`brokers_changed`, `remote_segments_changed`, ...), so they act on those alone, and an
unchanged part of the image is the very same object in the old and the new image
(`new.acls is old.acls`).

    delta = MetadataDelta(image)
    for rec in records: APPLY[rec["type"]](delta, rec)    (metadata_records.py)
    new_image = delta.image
"""

from __future__ import annotations

import copy
import dataclasses
import uuid

from logbroker.coord.metadata.metadata import (
    BrokerRegistration,
    MetadataImage,
    PartitionState,
    RemoteLogSegment,
    TopicState,
)


class MetadataDelta:
    def __init__(self, base: MetadataImage) -> None:
        self.base = base
        self.image = dataclasses.replace(base)  # shallow: every container shared until written
        self.changed_topics: set[str] = set()  # names created or changed (partitions or configs)
        self.deleted_topics: dict[uuid.UUID, TopicState] = {}  # removed, as they were
        self.changed_partitions: dict[str, set[int]] = {}  # topic name -> partitions created or changed
        self.configs_changed: set[str] = set()  # topics whose configs changed
        self.brokers_changed = False
        self.acls_changed = False
        self.client_quotas_changed = False
        self.scram_changed = False
        self.group_configs_changed = False
        self.features_changed = False
        self.broker_configs_changed = False
        self.client_metrics_changed = False
        self.delegation_tokens_changed = False
        self.voters_changed = False
        # (topic name, partition) whose remote segments changed; a removed topic's are not
        # named here: `deleted_topics` and the base image have them
        self.remote_segments_changed: set[tuple[str, int]] = set()
        self._copied: set[str] = set()  # containers of the image already copied
        self._topics_copied: set[str] = set()
        self._partitions_copied: set[tuple[str, int]] = set()
        self._brokers_copied: set[int] = set()

    def _own(self, name: str, deep: bool = False):
        """The image's container `name`, copied the first time this delta writes it."""
        if name not in self._copied:
            value = getattr(self.image, name)
            setattr(self.image, name, copy.deepcopy(value) if deep else dict(value))
            self._copied.add(name)
        return getattr(self.image, name)

    # -- topics
    def topic_id_of(self, topic_id: uuid.UUID) -> TopicState | None:
        name = self.image.topic_ids.get(topic_id)
        return None if name is None else self.image.topics[name]

    def add_topic(self, topic: TopicState) -> None:
        self._own("topics")[topic.name] = topic
        self._own("topic_ids")[topic.topic_id] = topic.name
        self._topics_copied.add(topic.name)
        self.changed_topics.add(topic.name)
        self.deleted_topics.pop(topic.topic_id, None)

    def remove_topic(self, topic: TopicState) -> None:
        del self._own("topics")[topic.name]
        del self._own("topic_ids")[topic.topic_id]
        self._topics_copied.discard(topic.name)
        self.changed_topics.add(topic.name)
        self.changed_partitions.pop(topic.name, None)
        # its remote segments go with it: one lookup per partition of the topic
        if self.image.remote_segments:
            gone = [(topic.topic_id, p) for p in topic.partitions if (topic.topic_id, p) in self.image.remote_segments]
            if gone:
                segments = self._own("remote_segments")
                for key in gone:
                    del segments[key]
        if self.image.remote_log_start:
            gone = [(topic.topic_id, p) for p in topic.partitions if (topic.topic_id, p) in self.image.remote_log_start]
            if gone:
                starts = self._own("remote_log_start")
                for key in gone:
                    del starts[key]
        if self.remote_segments_changed:
            self.remote_segments_changed = {c for c in self.remote_segments_changed if c[0] != topic.name}
        if topic.topic_id in self.base.topic_ids:
            self.deleted_topics[topic.topic_id] = self.base.topics[self.base.topic_ids[topic.topic_id]]

    def topic(self, name: str) -> TopicState:
        """A writable copy of topic `name` (which exists), in the new image."""
        if name not in self._topics_copied:
            t = self.image.topics[name]
            self._own("topics")[name] = TopicState(t.name, t.topic_id, dict(t.partitions), dict(t.configs))
            self._topics_copied.add(name)
        self.changed_topics.add(name)
        return self.image.topics[name]

    def set_partition(self, name: str, state: PartitionState) -> None:
        self.topic(name).partitions[state.partition] = state
        self._partitions_copied.add((name, state.partition))
        self.changed_partitions.setdefault(name, set()).add(state.partition)

    def partition(self, name: str, index: int) -> PartitionState:
        """A writable copy of partition `index` of topic `name` (both exist)."""
        t = self.topic(name)
        if (name, index) not in self._partitions_copied:
            t.partitions[index] = dataclasses.replace(t.partitions[index])
            self._partitions_copied.add((name, index))
        self.changed_partitions.setdefault(name, set()).add(index)
        return t.partitions[index]

    def set_remote_log_start(self, topic: TopicState, partition: int, offset: int) -> None:
        """The first readable offset of a tiered partition (DeleteRecords into its remote part)."""
        self._own("remote_log_start")[(topic.topic_id, partition)] = offset
        self.remote_segments_changed.add((topic.name, partition))

    def set_remote_segments(self, topic: TopicState, partition: int, segments: tuple[RemoteLogSegment, ...]) -> None:
        """Partition `partition` of `topic` (both exist) now has these remote segments
        (sorted by start offset and id; empty: none, its entry goes)."""
        owned = self._own("remote_segments")
        if segments:
            owned[(topic.topic_id, partition)] = segments
        else:
            owned.pop((topic.topic_id, partition), None)
        self.remote_segments_changed.add((topic.name, partition))

    def topic_configs(self, name: str) -> dict[str, str]:
        self.configs_changed.add(name)
        return self.topic(name).configs

    # -- brokers
    def brokers(self) -> dict[int, BrokerRegistration]:
        self.brokers_changed = True
        return self._own("brokers")

    def broker(self, node_id: int) -> BrokerRegistration:
        """A writable copy of broker `node_id`'s registration (which exists)."""
        brokers = self.brokers()
        if node_id not in self._brokers_copied:
            brokers[node_id] = dataclasses.replace(brokers[node_id])
            self._brokers_copied.add(node_id)
        return brokers[node_id]

    # -- the small parts: copied whole at their first write
    def group_configs(self) -> dict[str, dict[str, str]]:
        self.group_configs_changed = True
        return self._own("group_configs", deep=True)

    def scram_credentials(self) -> dict:
        self.scram_changed = True
        return self._own("scram_credentials", deep=True)

    def delegation_tokens(self) -> dict:
        self.delegation_tokens_changed = True
        return self._own("delegation_tokens")

    def acls(self) -> dict:
        self.acls_changed = True
        return self._own("acls")

    def client_quotas(self) -> dict:
        self.client_quotas_changed = True
        return self._own("client_quotas", deep=True)

    def broker_configs(self) -> dict[str, dict[str, str]]:
        self.broker_configs_changed = True
        return self._own("broker_configs", deep=True)

    def client_metrics(self) -> dict[str, dict[str, str]]:
        self.client_metrics_changed = True
        return self._own("client_metrics", deep=True)

    def controllers(self) -> dict[int, list]:
        self.brokers_changed = True  # who may host partitions: read with the brokers
        return self._own("controllers")

    def voters(self) -> dict[int, list]:
        self.voters_changed = True
        return self._own("voters")

    def features(self) -> dict[str, int]:
        self.features_changed = True
        return self._own("features")
