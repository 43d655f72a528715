"""Which partitions the active controller's periodic pass (`ReplicationControlManager.
reconcile`: a leader for a leaderless partition, a reassignment whose targets are all in the
ISR completed) must read. Kafka's controller keeps indexes for this (partitions without a
leader, reassignments in flight) instead of reading the whole cluster every second; here the
pass reads what changed since the last pass.

Invariant: whether a partition needs the pass is a function of its own state, its topic's
configs (unclean.leader.election.enable), the broker registrations (who is live) and the
cluster's dynamic configs (the default of that key). So after a pass, a partition can need
another only when a delta changes one of those; the scope is
- every partition a delta created or changed, since the last pass;
- every partition of a topic whose configs a delta changed;
- everything, after a delta that changed brokers or broker configs, an image published
  without a delta (a snapshot loaded), or a pass that failed before its records committed.
A pass over the scope therefore finds what a pass over every partition would
(tests/test_reconcile_scope.py checks that on random histories).
"""

from __future__ import annotations

from collections.abc import Iterator

from logbroker.coord.metadata.metadata import MetadataImage, PartitionState, TopicState
from logbroker.coord.metadata.metadata_delta import MetadataDelta

# topic name -> its partitions to read (None: all of them); None for every partition
Scope = dict[str, set[int] | None] | None


class ReconcileScope:
    def __init__(self) -> None:
        self._scope: Scope = None  # nothing read yet: everything

    def note(self, delta: MetadataDelta | None) -> None:
        """A delta was applied (None: an image whose changes are not known)."""
        if self._scope is None:
            return
        if delta is None or delta.brokers_changed or delta.broker_configs_changed:
            self._scope = None
            return
        for name, parts in delta.changed_partitions.items():
            if name in self._scope:
                held = self._scope[name]
                if held is not None:
                    held |= parts
            else:
                self._scope[name] = set(parts)
        for name in delta.configs_changed:
            self._scope[name] = None

    def take(self) -> Scope:
        """The scope of a pass about to run; the next starts empty."""
        scope, self._scope = self._scope, {}
        return scope

    def everything(self) -> None:
        """A pass failed before its records committed: the next reads every partition."""
        self._scope = None

    @property
    def empty(self) -> bool:
        return self._scope == {}


def partitions_in(image: MetadataImage, scope: Scope) -> Iterator[tuple[TopicState, PartitionState]]:
    """(topic, partition state) of every partition of `image` in `scope`."""
    if scope is None:
        for t in image.topics.values():
            for ps in t.partitions.values():
                yield t, ps
        return
    for name, parts in scope.items():
        t = image.topics.get(name)
        if t is None:
            continue  # deleted since
        if parts is None:
            yield from ((t, ps) for ps in t.partitions.values())
        else:
            for i in sorted(parts):
                ps = t.partitions.get(i)
                if ps is not None:
                    yield t, ps
