"""The replication control manager (Kafka's ReplicationControlManager): topics, partitions,
their replicas, leaders and ISRs. Creating and deleting topics, adding partitions, ISR
changes (AlterPartition), leader elections (elections.py) and reassignments
(reassignment.py) become Topic, Partition, PartitionChange and RemoveTopic records.

Pure (see control.py): each method reads the image and returns a `ControllerResult`; a
partition that changes is copied, changed by the rules in elections.py / reassignment.py
and written as one PartitionChange with its epochs explicit. Creating a topic reads only
the broker list and the topic's name and id: its cost does not grow with the topics that
exist.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Callable

from logbroker.common.config import BrokerConfig, ConfigError, validate_topic_config
from logbroker.common.directory_id import random_uuid
from logbroker.coord.metadata import elections, eligible_leaders, reassignment
from logbroker.coord.metadata.config_control import check_topic_configs
from logbroker.coord.metadata.control import ControllerError, ControllerResult, IsrChange, partition_change_record
from logbroker.coord.metadata.metadata import MetadataImage, PartitionState, TopicState, topic_name_error
from logbroker.coord.metadata.metadata_records import encode_record, partition_record, topic_records
from logbroker.coord.metadata.reconcile_scope import Scope, partitions_in
from logbroker.protocol import ErrorCode

MAX_PARTITIONS = 100_000

# (topic, partition, error, message): one partition's answer to ElectLeaders or a reassignment
PartitionResult = tuple[str, int, ErrorCode, str]
# (error, message, the partition's state after the request): one partition's answer to AlterPartition
IsrResult = tuple[ErrorCode, str, PartitionState | None]


@dataclasses.dataclass(frozen=True)
class NewTopicSpec:
    """One topic of a CreateTopics request: -1 for the broker defaults; `assignments`
    (partition -> replicas) instead of partitions and replication factor."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] | None = None
    configs: dict[str, str | None] = dataclasses.field(default_factory=dict)


def new_partition(index: int, replicas: list[int], image: MetadataImage) -> PartitionState:
    """A new partition: every replica on an unfenced broker is in the ISR (an empty log is
    caught up by definition; one that does not fetch leaves the ISR after
    `replica.lag.time.max.ms`) and the first of them leads. Kafka's rule: a fenced broker
    (stopped, or away) joins the ISR when it has caught up, and an assignment whose brokers
    are all fenced is refused (INVALID_REPLICA_ASSIGNMENT)."""
    isr = [r for r in replicas if (b := image.brokers.get(r)) is not None and not b.fenced]
    if not isr:
        raise ControllerError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"all brokers of the assignment {replicas} for partition {index} are fenced",
        )
    return PartitionState(index, isr[0], 0, list(replicas), isr, 0)


def _where(name: str, partition: int) -> dict:
    return {"topic": name, "partition": partition}


class ReplicationControlManager:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config

    # --- placement ----------------------------------------------------------------------

    @staticmethod
    def placement_order(image: MetadataImage) -> list[int]:
        """The unfenced brokers in placement order: by id, and when brokers have racks
        (`broker.rack`), alternating racks (first broker of each rack, then the second of
        each, ...), so consecutive picks land on different racks."""
        live = sorted(n for n, b in image.brokers.items() if not b.fenced)
        racks: dict[str, list[int]] = {}
        for n in live:
            racks.setdefault(image.brokers[n].rack or "", []).append(n)
        if len(racks) <= 1:
            return live
        order: list[int] = []
        columns = [racks[r] for r in sorted(racks)]
        for i in range(max(len(c) for c in columns)):
            order.extend(c[i] for c in columns if i < len(c))
        return order

    @staticmethod
    def _assign(
        image: MetadataImage, brokers: list[int], partition: int, replication_factor: int, start: int = 0
    ) -> PartitionState:
        """Replicas of a new partition: walking the placement order from (start + partition),
        so leaders (the first replica, the preferred leader) go round robin over brokers and
        racks; each next replica is the next broker in that walk whose rack the partition has
        no replica in yet, and only once every rack has one, the next broker of any rack. So
        the replicas span min(replication factor, racks) racks even when racks are uneven
        (racks a={1,2}, b={3}, RF 2: every partition gets broker 3)."""
        if replication_factor > len(brokers):
            raise ControllerError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is larger than the {len(brokers)} available broker(s)",
            )
        first = (start + partition) % len(brokers)
        walk = brokers[first:] + brokers[:first]
        rack_of = {b: image.brokers[b].rack or "" for b in walk}
        racks = len(set(rack_of.values()))
        replicas: list[int] = []
        used: set[str] = set()
        while len(replicas) < replication_factor:
            spread = len(used) < racks  # some rack has no replica yet: take a broker of one
            for b in walk:
                if b not in replicas and (not spread or rack_of[b] not in used):
                    replicas.append(b)
                    used.add(rack_of[b])
                    break
        return new_partition(partition, replicas, image)

    # --- topics ---------------------------------------------------------------------------

    def check_new_topic(
        self,
        image: MetadataImage,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: dict[int, list[int]] | None,
        configs: dict[str, str | None],
    ) -> tuple[int, int, dict[str, str]]:
        """(partitions, replication factor, checked configs) of a topic CreateTopics may
        create, defaults filled in; ControllerError naming the value otherwise."""
        err = topic_name_error(name)
        if err:
            raise ControllerError(ErrorCode.INVALID_TOPIC_EXCEPTION, err)
        if name in image.topics:
            raise ControllerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if assignments:
            num_partitions = len(assignments)
            for p, replicas in assignments.items():
                unknown = [b for b in replicas if b not in image.brokers]
                if not replicas or unknown:
                    raise ControllerError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"topic {name!r} partition {p}: replica assignment {replicas} names unknown brokers {unknown}",
                    )
            if sorted(assignments) != list(range(num_partitions)):
                raise ControllerError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"topic {name!r}: partitions in the assignment must be 0..{num_partitions - 1}, "
                    f"got {sorted(assignments)}",
                )
        if num_partitions == -1:
            num_partitions = self.config.get_int("num.partitions")
        if replication_factor == -1:
            replication_factor = self.config.get_int("default.replication.factor")
        if not 1 <= num_partitions <= MAX_PARTITIONS:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {name!r}: number of partitions {num_partitions} must be in [1, {MAX_PARTITIONS}]",
            )
        if replication_factor < 1 and not assignments:
            raise ControllerError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"topic {name!r}: replication factor {replication_factor} must be at least 1",
            )
        try:
            checked = validate_topic_config(configs)
        except ConfigError as e:
            raise ControllerError(ErrorCode.INVALID_CONFIG, f"topic {name!r}: {e}") from None
        check_topic_configs(self.config, image, name, checked)
        if not assignments:
            self._assign(image, self.placement_order(image), 0, replication_factor)  # INVALID_REPLICATION_FACTOR early
        return num_partitions, replication_factor, checked

    def create_topics(
        self, image: MetadataImage, specs: list[NewTopicSpec]
    ) -> ControllerResult[list[TopicState | ControllerError]]:
        """CreateTopics: each topic created, or the error refusing it, in order; the records
        of every created topic together (one metadata-log entry per request, as Kafka's
        controller writes one batch)."""
        results: list[TopicState | ControllerError] = []
        records, lines, taken = [], [], set()
        for spec in specs:
            try:
                r = self.create_topic(image, spec, taken)
            except ControllerError as e:
                results.append(e)
                continue
            taken.add(r.response.topic_id)
            results.append(r.response)
            records += r.records
            lines += r.log
        return ControllerResult(records, results, lines)

    def create_topic(
        self, image: MetadataImage, spec: NewTopicSpec, taken: set[uuid.UUID] = frozenset()
    ) -> ControllerResult[TopicState]:
        """One new topic (`taken`: topic ids given to others in the same request)."""
        name, assignments = spec.name, spec.assignments
        num_partitions, replication_factor, checked = self.check_new_topic(
            image, name, spec.num_partitions, spec.replication_factor, assignments, spec.configs
        )
        brokers = self.placement_order(image)
        start = random.randrange(max(1, len(brokers)))  # spread leaders over topics
        partitions = {
            p: new_partition(p, list(assignments[p]), image)
            if assignments
            else self._assign(image, brokers, p, replication_factor, start)
            for p in range(num_partitions)
        }
        topic_id = random_uuid()
        while topic_id in image.topic_ids or topic_id in taken:
            topic_id = random_uuid()
        topic = TopicState(name, topic_id, partitions, checked)
        return ControllerResult(
            topic_records(topic),
            topic,
            [
                (
                    f"created topic {name} (id {topic_id}) with {num_partitions} partition(s), configs {checked}",
                    {"topic": name},
                )
            ],
        )

    def delete_topic(self, image: MetadataImage, name: str) -> ControllerResult[TopicState]:
        if not self.config.get_bool("delete.topic.enable"):
            raise ControllerError(
                ErrorCode.TOPIC_DELETION_DISABLED, f"cannot delete topic {name!r}: delete.topic.enable is false"
            )
        topic = image.topics.get(name)
        if topic is None:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return ControllerResult(
            [encode_record("RemoveTopic", topic_id=topic.topic_id.hex)],
            topic,
            [(f"deleted topic {name} (id {topic.topic_id})", {"topic": name})],
        )

    def create_partitions(
        self, image: MetadataImage, name: str, count: int, assignments: list[list[int]] | None
    ) -> ControllerResult[None]:
        topic = image.topics.get(name)
        if topic is None:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        current = len(topic.partitions)
        if count < current:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS, f"topic {name!r} has {current} partitions; cannot reduce to {count}"
            )
        if count == current:
            raise ControllerError(ErrorCode.INVALID_PARTITIONS, f"topic {name!r} already has {current} partitions")
        if count > MAX_PARTITIONS:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS, f"topic {name!r}: {count} partitions is above {MAX_PARTITIONS}"
            )
        if assignments is not None and len(assignments) != count - current:
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"topic {name!r}: {len(assignments)} assignments given for {count - current} new partitions",
            )
        rf = len(topic.partitions[0].replicas)
        brokers = self.placement_order(image)
        start = random.randrange(max(1, len(brokers)))
        new: list[PartitionState] = []
        for i, p in enumerate(range(current, count)):
            if assignments is not None:
                r = assignments[i]
                unknown = [b for b in r if b not in image.brokers]
                if not r or unknown:
                    raise ControllerError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"topic {name!r} partition {p}: assignment {r} names unknown brokers {unknown}",
                    )
                new.append(new_partition(p, list(r), image))
            else:
                new.append(self._assign(image, brokers, p, rf, start))
        return ControllerResult(
            [partition_record(topic.topic_id, ps) for ps in new],
            None,
            [(f"topic {name}: partitions {current} -> {count}", {"topic": name})],
        )

    # --- ISR changes (AlterPartition) -------------------------------------------------------

    def alter_partitions(
        self, image: MetadataImage, broker_id: int, broker_epoch: int, changes: list[IsrChange]
    ) -> ControllerResult[list[IsrResult]]:
        """A partition leader asks to change the ISR of partitions it leads (Kafka's
        AlterPartition: one request names many partitions). Each is checked on its own
        (`_alter_one`) and answered in order; the accepted ones are written together, one
        PartitionChange each, so a request is one metadata-log entry however many partitions
        it names (Kafka's controller likewise answers a request with one batch of records).
        A partition named twice is checked the second time against the first change (its
        partition epoch is then stale)."""
        results: list[IsrResult] = []
        records, lines = [], []
        changed: dict[tuple[uuid.UUID, int], PartitionState] = {}
        for change in changes:
            r = self._alter_one(image, broker_id, broker_epoch, change, changed)
            results.append(r.response)
            records += r.records
            lines += r.log
        return ControllerResult(records, results, lines)

    def _alter_one(
        self,
        image: MetadataImage,
        broker_id: int,
        broker_epoch: int,
        change: IsrChange,
        changed: dict[tuple[uuid.UUID, int], PartitionState],
    ) -> ControllerResult[IsrResult]:
        """One partition of an AlterPartition request (`changed`: the partitions changed
        earlier in the same request, updated here). Checked in order: topic and partition
        exist; the requester is registered with that broker epoch (-1: not checked) and leads
        the partition at `leader_epoch` (older: FENCED_LEADER_EPOCH; newer: this controller is
        behind, NOT_CONTROLLER); `partition_epoch` is the current one (INVALID_UPDATE_VERSION:
        a stale request, e.g. racing a leader change); the new ISR is non-empty, holds the
        leader, and only replicas (INVALID_REQUEST); members other than the current ones are
        unfenced (INELIGIBLE_REPLICA). Accepted: the ISR with the partition epoch bumped
        (leader and leader epoch unchanged), completing a reassignment it makes complete. The
        response is (error, message, the partition's state after the request)."""

        def refused(code: ErrorCode, message: str, ps: PartitionState | None):
            return ControllerResult([], (code, message, ps))

        topic_id, partition, leader_epoch, partition_epoch, new_isr = change
        topic = image.topic_by_id(topic_id)
        if topic is None:
            return refused(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {topic_id}", None)
        ps = changed.get((topic_id, partition)) or topic.partitions.get(partition)
        name = f"{topic.name}-{partition}"
        if ps is None:
            return refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {name} does not exist", None)
        reg = image.brokers.get(broker_id)
        if reg is None or (broker_epoch >= 0 and reg.epoch != broker_epoch):
            return refused(
                ErrorCode.STALE_BROKER_EPOCH,
                f"broker {broker_id} epoch {broker_epoch} is not registered"
                + (f" (registered epoch {reg.epoch})" if reg else ""),
                ps,
            )
        if ps.leader != broker_id:
            return refused(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {broker_id} does not lead {name} (leader {ps.leader})", ps
            )
        if leader_epoch < ps.leader_epoch:
            return refused(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"leader epoch {leader_epoch} of {name} is older than {ps.leader_epoch}",
                ps,
            )
        if leader_epoch > ps.leader_epoch:
            return refused(
                ErrorCode.NOT_CONTROLLER,
                f"leader epoch {leader_epoch} of {name} is newer than this controller's {ps.leader_epoch}",
                ps,
            )
        if partition_epoch != ps.partition_epoch:
            return refused(
                ErrorCode.INVALID_UPDATE_VERSION,
                f"partition epoch {partition_epoch} of {name} is not the current {ps.partition_epoch}",
                ps,
            )
        if (
            not new_isr
            or ps.leader not in new_isr
            or len(set(new_isr)) != len(new_isr)
            or any(r not in ps.replicas for r in new_isr)
        ):
            return refused(
                ErrorCode.INVALID_REQUEST,
                f"ISR {new_isr} of {name} must be distinct replicas of {ps.replicas} including the leader {ps.leader}",
                ps,
            )
        ineligible = [r for r in new_isr if r not in ps.isr and (r not in image.brokers or image.brokers[r].fenced)]
        if ineligible:
            return refused(
                ErrorCode.INELIGIBLE_REPLICA,
                f"broker(s) {ineligible} cannot join the ISR of {name}: fenced or not registered",
                ps,
            )
        if sorted(new_isr) == sorted(ps.isr):
            return ControllerResult([], (ErrorCode.NONE, "", ps))
        after = dataclasses.replace(ps, isr=list(new_isr), partition_epoch=ps.partition_epoch + 1)
        min_isr = self.min_isr_of(image)
        if min_isr is not None:
            after.elr = eligible_leaders.target_elr(ps, after.isr, min_isr(topic, ps), frozenset())
        elif ps.elr or ps.last_known_elr:
            after.elr, after.last_known_elr = [], []
        completed = reassignment.maybe_complete(image, after)
        changed[(topic_id, partition)] = after
        lines = [
            (
                f"{name}: ISR {ps.isr} -> {new_isr} (requested by leader {broker_id}, leader epoch {leader_epoch}, "
                f"partition epoch {partition_epoch} -> {after.partition_epoch})",
                {**_where(topic.name, partition), "peer": broker_id},
            )
        ]
        if completed:
            lines.append(
                (
                    f"{name}: reassignment complete: replicas {after.replicas}, ISR {after.isr}, leader {after.leader}",
                    _where(topic.name, partition),
                )
            )
        return ControllerResult([partition_change_record(topic.topic_id, after)], (ErrorCode.NONE, "", after), lines)

    # --- leader elections ---------------------------------------------------------------

    def unclean_allowed(self, topic: TopicState) -> bool:
        """`unclean.leader.election.enable` for `topic` (its override, else the broker's)."""
        value = topic.configs.get("unclean.leader.election.enable")
        if value is None:
            return self.config.get_bool("unclean.leader.election.enable")
        return value == "true"

    def min_isr_of(self, image: MetadataImage) -> Callable[[TopicState, PartitionState], int] | None:
        """The effective min ISR of a partition when eligible leader replicas are on (the
        feature finalized at 1), else None (eligible_leaders.py)."""
        if not eligible_leaders.enabled(image):
            return None
        cluster = image.broker_configs.get("", {}).get(eligible_leaders.MIN_ISR)
        default = int(cluster) if cluster is not None else self.config.get_int(eligible_leaders.MIN_ISR)
        return lambda t, ps: eligible_leaders.effective_min_isr(t, ps, default)

    def elect_for_brokers(
        self, image: MetadataImage, gone: set[int], returning: frozenset[int] = frozenset()
    ) -> tuple[list[bytes], list[elections.Election]]:
        """The PartitionChange records and leader changes when `gone` brokers are fenced and
        `returning` ones unfenced (elections.elect_for_brokers)."""
        changes = elections.elect_for_brokers(
            image, gone, self.unclean_allowed, returning, min_isr=self.min_isr_of(image)
        )
        return (
            [partition_change_record(t.topic_id, new) for t, new, _e in changes],
            [e for _t, _n, e in changes if e is not None],
        )

    def reconcile(self, image: MetadataImage, scope: Scope = None) -> ControllerResult[list[elections.Election]]:
        """The active controller's periodic pass over the partitions in `scope` (None: every
        one; reconcile_scope.py says which can need it): leaders for leaderless partitions,
        and the reassignments whose targets are all in the ISR completed. Nothing to do (the
        usual case): no records."""
        among = list(partitions_in(image, scope))
        elected = elections.elect_for_brokers(
            image, set(), self.unclean_allowed, among=among, min_isr=self.min_isr_of(image)
        )
        changes = {(t.name, new.partition): (t, new) for t, new, _e in elected}
        moved = [e for _t, _n, e in elected if e is not None]
        done = []
        for t, ps in among:
            current = changes.get((t.name, ps.partition), (t, ps))[1]
            if not reassignment.completable(current):
                continue
            work = dataclasses.replace(current)
            if reassignment.maybe_complete(image, work):
                changes[(t.name, ps.partition)] = (t, work)
                done.append(f"{t.name}-{ps.partition}")
        lines = []
        if moved:
            lines.append((f"elected leaders for {len(moved)} partition(s): {elections.summary(moved)}", {}))
        if done:
            lines.append((f"completed the reassignment of {', '.join(done)}", {}))
        return ControllerResult([partition_change_record(t.topic_id, new) for t, new in changes.values()], moved, lines)

    def elect_leaders(
        self, image: MetadataImage, election_type: int, partitions: list[tuple[str, list[int]]] | None
    ) -> ControllerResult[tuple[list[PartitionResult], list[elections.Election]]]:
        """ElectLeaders: preferred (0) or unclean (1) election for `partitions` (None: every
        partition; then partitions that need no election are left out of the result, as
        Kafka does). The response: (topic, partition, error, message) per partition, and
        the unclean elections made."""
        if election_type not in (elections.PREFERRED, elections.UNCLEAN):
            raise ControllerError(
                ErrorCode.INVALID_REQUEST, f"election type {election_type} is not 0 (preferred) or 1 (unclean)"
            )
        wanted = (
            partitions if partitions is not None else [(t.name, sorted(t.partitions)) for t in image.topics.values()]
        )
        results: list[PartitionResult] = []
        unclean: list[elections.Election] = []
        records, changed = [], []
        for name, indexes in wanted:
            t = image.topics.get(name)
            for i in indexes:
                old = None if t is None else t.partitions.get(i)
                if t is None or old is None:
                    results.append(
                        (name, i, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {name}-{i} does not exist")
                    )
                    continue
                ps = dataclasses.replace(old)
                if election_type == elections.PREFERRED:
                    code, message = elections.elect_preferred(image, t, ps)
                else:
                    code, message, outside = elections.elect_unclean(image, t, ps)
                    if outside:
                        unclean.append(elections.Election(name, i, old.leader, ps.leader, True, tuple(old.isr)))
                if partitions is None and code == ErrorCode.ELECTION_NOT_NEEDED:
                    continue
                results.append((name, i, code, message))
                if code == ErrorCode.NONE:
                    records.append(partition_change_record(t.topic_id, ps))
                    changed.append(f"{name}-{i} -> {ps.leader}")
        lines = (
            [
                (
                    f"{'preferred' if election_type == elections.PREFERRED else 'unclean'} leader election: "
                    f"{', '.join(changed)}",
                    {},
                )
            ]
            if changed
            else []
        )
        return ControllerResult(records, (results, unclean), lines)

    def rebalance_leaders(self, image: MetadataImage) -> ControllerResult[int]:
        """auto.leader.rebalance.enable: every partition whose preferred replica is live and
        in the ISR goes back to it. The response: how many moved."""
        records, moved = [], []
        for t, old in elections.imbalanced(image):
            ps = dataclasses.replace(old)
            elections.elect_preferred(image, t, ps)
            records.append(partition_change_record(t.topic_id, ps))
            moved.append(f"{t.name}-{ps.partition} {old.leader}->{ps.leader}")
        lines = (
            [
                (
                    f"leader rebalance: {len(moved)} partition(s) back on their preferred replica: "
                    f"{', '.join(moved[:10])}",
                    {},
                )
            ]
            if moved
            else []
        )
        return ControllerResult(records, len(moved), lines)

    # --- partition reassignment (KIP-455, reassignment.py) ------------------------------

    def alter_reassignments(
        self,
        image: MetadataImage,
        items: list[tuple[str, int, list[int] | None]],
        allow_replication_factor_change: bool,
    ) -> ControllerResult[list[PartitionResult]]:
        """AlterPartitionReassignments: start (a target) or cancel (None) the reassignment of
        each (topic, partition); the response is (topic, partition, error, message) for
        each, and the accepted ones are written together."""
        results: list[PartitionResult] = []
        records, lines = [], []
        for name, i, target in items:
            t = image.topics.get(name)
            old = None if t is None else t.partitions.get(i)
            if t is None or old is None:
                results.append((name, i, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {name}-{i} does not exist"))
                continue
            ps = dataclasses.replace(old)
            try:
                if target is None:
                    reassignment.cancel(image, f"{name}-{i}", ps)
                else:
                    reassignment.check_target(image, f"{name}-{i}", ps, list(target), allow_replication_factor_change)
                    reassignment.start(image, ps, list(target))
            except reassignment.ReassignmentError as e:
                results.append((name, i, e.code, e.message))
                continue
            results.append((name, i, ErrorCode.NONE, ""))
            if ps != old:  # an accepted target equal to the replicas changes nothing
                records.append(partition_change_record(t.topic_id, ps))
            what = "cancelled the reassignment" if target is None else f"reassigning to {target}"
            lines.append(
                (
                    f"{name}-{i}: {what} (replicas {old.replicas} -> {ps.replicas}, adding {ps.adding_replicas}, "
                    f"removing {ps.removing_replicas}, ISR {ps.isr}, leader {ps.leader})",
                    _where(name, i),
                )
            )
        return ControllerResult(records, results, lines)

    @staticmethod
    def list_reassignments(
        image: MetadataImage, partitions: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, int, list[int], list[int], list[int]]]:
        """Reassignments in progress: (topic, partition, replicas, adding, removing), of
        `partitions` (None: all); unknown partitions are left out."""
        out = []
        wanted = (
            partitions if partitions is not None else [(t.name, sorted(t.partitions)) for t in image.topics.values()]
        )
        for name, indexes in wanted:
            t = image.topics.get(name)
            for i in indexes:
                ps = None if t is None else t.partitions.get(i)
                if ps is not None and reassignment.in_progress(ps):
                    out.append((name, i, list(ps.replicas), list(ps.adding_replicas), list(ps.removing_replicas)))
        return out
