"""KIP-1071 streams group topologies: validating one and configuring it against the cluster.

A Kafka Streams member joining at member epoch 0 sends its application's topology in
StreamsGroupHeartbeat: subtopologies, each with its user source topics (or regexes), the
repartition topics it writes (sinks) and reads (repartition sources, TopicInfo), its state
changelog topics (TopicInfo) and its copartition groups (indexes into those lists). This
module holds that topology (`from_request`), refuses what Kafka refuses (`validate`) and
configures it against the cluster's topics (`configure`), with Kafka 4.4's rules:

Refused up front (`validate`, InvalidTopology -> STREAMS_INVALID_TOPOLOGY, Kafka's messages):
  - a required topic (source, repartition sink, repartition source, changelog) that is a Kafka
    internal topic ("Use of Kafka internal topics ... in a Kafka Streams topology is
    prohibited."), then one whose name is not a legal topic name ("Topic names ... are not
    valid topic names.") — KafkaApis.handleStreamsGroupHeartbeat, before the coordinator;
  - a changelog topic with a partition count ("Changelog topic X must have an undefined
    partition count, but it is set to N.") — GroupCoordinatorService.throwIfInvalidTopology;
  - what Kafka only finds while configuring, whatever the cluster holds (RepartitionTopics,
    ChangelogTopics): repartition topics whose partition count cannot be derived ("... There
    may be loops in the topology that cannot be resolved."), a repartition source topic no
    subtopology writes ("... never used as a sink topic."), a subtopology reading nothing
    ("No source topics found for subtopology X"). Kafka fails the heartbeat with them once
    the source topics exist; here they are refused when the topology arrives;
  - logbroker's own (Kafka fails these with an unexpected server error): two subtopologies
    with one id, a copartition group index out of range, a source regex that does not
    compile, a negative partition count.
Kafka 4.4 itself refuses source topic regexes (INVALID_REQUEST, `REGEX_NOT_SUPPORTED`); this
module resolves them, for a coordinator that accepts them (`configure`, below).

Configured (`configure`, InternalTopicManager.configureTopics), in this order:
  1. Source topics. Every user source topic must exist, else MISSING_SOURCE_TOPICS ("Source
     topics a, b, c and 2 additional topics are missing.", sorted, at most 3 named) and no
     tasks. A regex source is the topics whose whole name it matches (Java `matches`:
     `re.fullmatch`), Kafka's internal topics and the topology's own repartition and
     changelog topics excepted; a regex matching nothing is reported as a missing source.
  2. Repartition topics (RepartitionTopics): a TopicInfo partition count other than 0 is fixed;
     the others are computed by passes over the subtopologies until all are known: a
     subtopology's repartition sink topics get the max partition count over its inputs known
     so far (its user source topics, its repartition source topics already decided), so a
     repartition topic fed by another one gets its count from the upstream one's.
  3. Copartition groups (CopartitionedTopicsEnforcer), each group's topics by name (user source
     topics, regex matches, repartition source topics): when the group holds user topics,
     they must all have one partition count ("Following topics do not have the same number
     of partitions: [{a=2, b=1}]", INCORRECTLY_PARTITIONED_TOPICS) and its repartition topics
     take it; a fixed repartition topic with another count is INCORRECTLY_PARTITIONED_TOPICS
     ("Number of partitions [4] of repartition topic [r] doesn't match number of partitions
     [3] of the source topic."). A group of repartition topics only takes the count of its
     fixed ones (which must agree) or else the max of theirs.
  4. Changelog topics (ChangelogTopics): the max partition count over the subtopology's user
     and repartition source topics (a changelog that is a source topic included).
  Counts are read as Kafka's provider does: the cluster's count when the topic exists, else
  the one decided above.
  5. Tasks: a subtopology has as many tasks as the max partition count of its inputs (user and
     repartition source topics); it is stateful when it has state changelog topics
     (TopologyMetadata.isStateful).
  6. Internal topics (repartition sources, changelogs) missing from the cluster are returned to
     be created (their partitions as decided, replication factor 0 = the broker default, and
     the configs the client sent: Kafka's coordinator adds none, Kafka Streams sends
     cleanup.policy and the like itself) with MISSING_INTERNAL_TOPICS ("Internal topics are
     missing: ..."); one that exists with another partition count is
     INCORRECTLY_PARTITIONED_TOPICS ("Existing topic X has different number of partitions:
     expected N, found M"). Either way there are no tasks until the topics are right.

Cost: one pass over the topology plus one lookup per distinct topic (memoized), so linear in
subtopologies and topics; the repartition passes repeat only while a repartition topic's
count waits on one decided later in the same pass (one more pass per such link written
against the data flow, as Kafka's). Resolving regexes costs regexes x cluster topics, and only
topologies with regexes pay it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable

# StreamsGroupHeartbeatResponse.Status codes.
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3

# GroupCoordinatorService's INVALID_REQUEST message for a topology with source topic regexes.
REGEX_NOT_SUPPORTED = "Regular expressions for source topics are not supported yet."

# Topic.INTERNAL_TOPICS (Topic.isInternal).
KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_TOPIC_NAME_MAX = 249


@dataclasses.dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int  # 0: not fixed
    replication_factor: int  # 0: the broker default
    configs: dict[str, str]


@dataclasses.dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    source_topic_regex: tuple[str, ...]
    state_changelog_topics: tuple[TopicInfo, ...]
    repartition_sink_topics: tuple[str, ...]
    repartition_source_topics: tuple[TopicInfo, ...]
    # (source topic idx, regex idx, repartition source idx)
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]


@dataclasses.dataclass(frozen=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]


class InvalidTopology(Exception):
    """The topology is refused: STREAMS_INVALID_TOPOLOGY with str(e) as the message."""


@dataclasses.dataclass(frozen=True)
class ConfiguredSubtopology:
    num_tasks: int
    source_topics: tuple[str, ...]  # user source topics (regexes resolved)
    repartition_source_topics: dict[str, int]  # name -> partitions
    state_changelog_topics: dict[str, int]  # name -> partitions
    stateful: bool


@dataclasses.dataclass(frozen=True)
class Configured:
    subtopologies: dict[str, ConfiguredSubtopology] | None  # None when not ready (see status)
    internal_topics_to_create: dict[str, TopicInfo]  # missing internal topics, partitions computed
    status: list[tuple[int, str]]  # (StreamsGroupHeartbeatResponse Status code, detail)


class _TopicConfigurationError(Exception):
    """Kafka's TopicConfigurationException: becomes a status, not an error."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _topic_info(t) -> TopicInfo:
    return TopicInfo(
        name=t.name,
        partitions=t.partitions,
        replication_factor=t.replication_factor,
        configs={kv.key: kv.value for kv in (t.topic_configs or ())},
    )


def from_request(t) -> Topology:
    """The topology of a StreamsGroupHeartbeatRequest (its generated Topology object)."""
    return Topology(
        epoch=t.epoch,
        subtopologies=tuple(
            Subtopology(
                subtopology_id=s.subtopology_id,
                source_topics=tuple(s.source_topics or ()),
                source_topic_regex=tuple(s.source_topic_regex or ()),
                state_changelog_topics=tuple(_topic_info(x) for x in s.state_changelog_topics or ()),
                repartition_sink_topics=tuple(s.repartition_sink_topics or ()),
                repartition_source_topics=tuple(_topic_info(x) for x in s.repartition_source_topics or ()),
                copartition_groups=tuple(
                    (
                        tuple(g.source_topics or ()),
                        tuple(g.source_topic_regex or ()),
                        tuple(g.repartition_source_topics or ()),
                    )
                    for g in s.copartition_groups or ()
                ),
            )
            for s in t.subtopologies or ()
        ),
    )


def _legal_topic_name(name: str) -> bool:
    # Topic.isValid: not empty, not "." or "..", at most 249 characters of [a-zA-Z0-9._-].
    return (
        bool(name)
        and name not in (".", "..")
        and len(name) <= _TOPIC_NAME_MAX
        and _LEGAL_TOPIC.fullmatch(name) is not None
    )


def _user_sources(s: Subtopology) -> list[str]:
    # RepartitionTopics' external source topics: the source topics that are not repartition
    # source topics of the subtopology (a client may list both there).
    repartition = {t.name for t in s.repartition_source_topics}
    return [t for t in dict.fromkeys(s.source_topics) if t not in repartition]


def validate(topology: Topology) -> None:
    """Raises InvalidTopology for what Kafka refuses whatever the cluster holds."""
    required: dict[str, None] = {}  # KafkaApis' requiredTopics: distinct, in order
    for s in topology.subtopologies:
        for name in s.source_topics:
            required[name] = None
        for name in s.repartition_sink_topics:
            required[name] = None
        for t in s.repartition_source_topics:
            required[t.name] = None
        for t in s.state_changelog_topics:
            required[t.name] = None
    prohibited = [t for t in required if t in KAFKA_INTERNAL_TOPICS]
    if prohibited:
        raise InvalidTopology(
            f"Use of Kafka internal topics {','.join(prohibited)} in a Kafka Streams topology is prohibited."
        )
    invalid = [t for t in required if not _legal_topic_name(t)]
    if invalid:
        raise InvalidTopology(f"Topic names {','.join(invalid)} are not valid topic names.")
    for s in topology.subtopologies:
        for t in s.state_changelog_topics:
            if t.partitions != 0:
                raise InvalidTopology(
                    f"Changelog topic {t.name} must have an undefined partition count, but it is set to {t.partitions}."
                )

    # logbroker's own: Kafka fails these with an unexpected (server) error.
    seen: set[str] = set()
    for s in topology.subtopologies:
        if s.subtopology_id in seen:
            raise InvalidTopology(f"Duplicate subtopology id {s.subtopology_id}.")
        seen.add(s.subtopology_id)
        for t in s.repartition_source_topics:
            if t.partitions < 0:
                raise InvalidTopology(
                    f"Number of partitions must be at least 1 for topic {t.name}, but it is set to {t.partitions}."
                )
        for pattern in s.source_topic_regex:
            try:
                re.compile(pattern)
            except re.error as e:
                raise InvalidTopology(f"Invalid source topic regex {pattern!r}: {e}.") from None
        lists = (s.source_topics, s.source_topic_regex, s.repartition_source_topics)
        for group in s.copartition_groups:
            for what, indexes, of in zip(
                ("source topic", "source topic regex", "repartition source topic"), group, lists
            ):
                for i in indexes:
                    if not 0 <= i < len(of):
                        raise InvalidTopology(
                            f"Copartition group of subtopology {s.subtopology_id} refers to {what} {i}, "
                            f"but the subtopology has {len(of)}."
                        )

    # Kafka finds these while configuring, whatever the cluster holds: every user source
    # (and regex) is known once configuration gets that far, so a stand-in count suffices.
    _repartition_counts(topology, lambda s: [1] * (len(_user_sources(s)) + len(s.source_topic_regex)))
    for s in topology.subtopologies:
        if not s.source_topics and not s.source_topic_regex and not s.repartition_source_topics:
            raise InvalidTopology(f"No source topics found for subtopology {s.subtopology_id}")


def _repartition_counts(topology: Topology, external_counts: Callable[[Subtopology], list[int]]) -> dict[str, int]:
    """RepartitionTopics.setup: the partition count of every repartition topic.

    `external_counts(s)`: the partition counts of the subtopology's user source topics."""
    counts: dict[str, int] = {}
    for s in topology.subtopologies:
        for t in s.repartition_source_topics:
            if t.partitions != 0:
                counts[t.name] = t.partitions
    externals = {s.subtopology_id: max(external_counts(s), default=None) for s in topology.subtopologies}
    while True:
        needed = progress = False
        for s in topology.subtopologies:
            for sink in s.repartition_sink_topics:
                if sink in counts:
                    continue
                known = [counts[t.name] for t in s.repartition_source_topics if t.name in counts]
                external = externals[s.subtopology_id]
                if external is not None:
                    known.append(external)
                if known:
                    counts[sink] = max(known)
                    progress = True
                else:
                    needed = True
        if not needed:
            break
        if not progress:
            raise InvalidTopology(
                "Failed to compute number of partitions for all repartition topics. "
                "There may be loops in the topology that cannot be resolved."
            )
    for s in topology.subtopologies:
        if any(t.name not in counts for t in s.repartition_source_topics):
            raise InvalidTopology(
                "Failed to compute number of partitions for all repartition topics, "
                "because a repartition source topic is never used as a sink topic."
            )
    return counts


def _summarize(topics: Iterable[str]) -> str:
    # InternalTopicManager.summarizeTopics: at most 3 names, then how many more.
    names = list(topics)
    if not names:
        return "<none>"
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} additional topics" if len(names) > 3 else "")


def _java_map(counts: dict[str, int]) -> str:
    # A Java TreeMap's toString.
    return "{" + ", ".join(f"{k}={counts[k]}" for k in sorted(counts)) + "}"


def configure(
    topology: Topology,
    topic_partitions: Callable[[str], int | None],
    all_topic_names: Iterable[str],
) -> Configured:
    """Configures `topology` against the cluster (see the module docstring).

    `topic_partitions(name)`: the partition count of a topic, None when it does not exist.
    Raises InvalidTopology for what `validate` refuses, when given a topology it did not see."""
    cluster: dict[str, int | None] = {}

    def existing(name: str) -> int | None:
        if name not in cluster:
            cluster[name] = topic_partitions(name)
        return cluster[name]

    subs = topology.subtopologies

    # 1. Source topics, regexes resolved.
    regex_matches: dict[str, tuple[str, ...]] = {}
    patterns = {p for s in subs for p in s.source_topic_regex}
    if patterns:
        own = {t for s in subs for t in s.repartition_sink_topics}
        own.update(t.name for s in subs for t in (*s.repartition_source_topics, *s.state_changelog_topics))
        names = sorted(n for n in all_topic_names if n not in KAFKA_INTERNAL_TOPICS and n not in own)
        for p in patterns:
            compiled = re.compile(p)
            regex_matches[p] = tuple(n for n in names if compiled.fullmatch(n))
    user_sources: dict[str, tuple[str, ...]] = {}
    missing: set[str] = set()
    for s in subs:
        explicit = _user_sources(s)
        missing.update(t for t in explicit if existing(t) is None)
        missing.update(p for p in s.source_topic_regex if not regex_matches[p])
        resolved = [n for p in s.source_topic_regex for n in regex_matches[p]]
        user_sources[s.subtopology_id] = tuple(dict.fromkeys([*explicit, *resolved]))
    if missing:
        return Configured(
            None, {}, [(MISSING_SOURCE_TOPICS, f"Source topics {_summarize(sorted(missing))} are missing.")]
        )

    decided: dict[str, int] = {}

    def count(name: str) -> int | None:
        # InternalTopicManager.getPartitionCount: the cluster's, else the one decided.
        n = existing(name)
        return n if n is not None else decided.get(name)

    def counts_of(names: Iterable[str]) -> list[int]:
        out = []
        for name in names:
            n = count(name)
            if n is None:
                raise _TopicConfigurationError(MISSING_SOURCE_TOPICS, f"No partition count for source topic {name}")
            out.append(n)
        return out

    try:
        # 2. Repartition topics.
        decided.update(_repartition_counts(topology, lambda s: counts_of(user_sources[s.subtopology_id])))

        # 3. Copartition groups.
        fixed = {t.name for s in subs for t in s.repartition_source_topics if t.partitions != 0}
        flexible = {t.name for s in subs for t in s.repartition_source_topics if t.partitions == 0}
        for s in subs:
            for sources, regexes, repartitions in s.copartition_groups:
                group = dict.fromkeys(
                    [
                        *(s.source_topics[i] for i in sources),
                        *(n for i in regexes for n in regex_matches[s.source_topic_regex[i]]),
                        *(s.repartition_source_topics[i].name for i in repartitions),
                    ]
                )
                decided.update(_enforce_copartitioning(list(group), fixed, flexible, count))

        # 4. Changelog topics.
        for s in subs:
            inputs = counts_of([*user_sources[s.subtopology_id], *(t.name for t in s.repartition_source_topics)])
            if not inputs:
                raise InvalidTopology(f"No source topics found for subtopology {s.subtopology_id}")
            for t in s.state_changelog_topics:
                decided[t.name] = max(inputs)

        # 5. Tasks.
        def internal(t: TopicInfo) -> int:
            n = t.partitions if t.partitions != 0 else decided[t.name]
            if n < 1:
                raise InvalidTopology(f"Number of partitions must be at least 1 for topic {t.name}.")
            return n

        configured: dict[str, ConfiguredSubtopology] = {}
        for s in sorted(subs, key=lambda s: s.subtopology_id):
            sources = user_sources[s.subtopology_id]
            configured[s.subtopology_id] = ConfiguredSubtopology(
                num_tasks=max(counts_of([*sources, *(t.name for t in s.repartition_source_topics)])),
                source_topics=sources,
                repartition_source_topics={t.name: internal(t) for t in s.repartition_source_topics},
                state_changelog_topics={t.name: internal(t) for t in s.state_changelog_topics},
                stateful=bool(s.state_changelog_topics),
            )

        # 6. Internal topics to create, or existing with the wrong count.
        to_create: dict[str, TopicInfo] = {}
        for s in subs:
            for t in (*s.repartition_source_topics, *s.state_changelog_topics):
                to_create[t.name] = TopicInfo(t.name, internal(t), t.replication_factor, dict(t.configs))
        required = {t for s in subs for t in user_sources[s.subtopology_id]}
        required.update(to_create)
        for name in sorted(required):
            found = existing(name)
            if found is None:
                continue
            expected = to_create.pop(name, None)
            if expected is not None and expected.partitions != found:
                raise _TopicConfigurationError(
                    INCORRECTLY_PARTITIONED_TOPICS,
                    f"Existing topic {name} has different number of partitions: "
                    f"expected {expected.partitions}, found {found}",
                )
    except _TopicConfigurationError as e:
        return Configured(None, {}, [(e.status, str(e))])

    if to_create:
        to_create = dict(sorted(to_create.items()))
        message = f"Internal topics are missing: {_summarize(to_create)}"
        return Configured(None, to_create, [(MISSING_INTERNAL_TOPICS, message)])
    return Configured(configured, {}, [])


def _enforce_copartitioning(
    group: list[str],
    fixed: set[str],
    flexible: set[str],
    count: Callable[[str], int | None],
) -> dict[str, int]:
    """CopartitionedTopicsEnforcer.enforce: the partition count of the group's repartition topics."""
    if not group:
        return {}

    def known(name: str) -> int:
        n = count(name)
        if n is None:
            raise InvalidTopology(f"Number of partitions is not set for topic: {name}")
        return n

    repartition = {t: known(t) for t in group if t in fixed or t in flexible}
    others = {t: known(t) for t in group if t not in repartition}
    if not others:
        # Kafka passes the topology's fixed repartition topics here, not the group's: the
        # group's are meant (its javadoc, its tests), and only they are compared.
        fixed_here = [t for t in group if t in fixed]
        if fixed_here:
            n = repartition[fixed_here[0]]
            if any(repartition[t] != n for t in fixed_here):
                raise _TopicConfigurationError(
                    INCORRECTLY_PARTITIONED_TOPICS,
                    f"Following topics do not have the same number of partitions: [{_java_map(repartition)}]",
                )
        else:
            n = max(repartition.values())
            if n == 0:
                raise InvalidTopology(
                    f"All topics in the copartition group had undefined partition number: [{', '.join(repartition)}]"
                )
    else:
        n = next(iter(others.values()))
        if any(v != n for v in others.values()):
            raise _TopicConfigurationError(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Following topics do not have the same number of partitions: [{_java_map(others)}]",
            )
    for t, current in repartition.items():
        if t in fixed and current != n:
            raise _TopicConfigurationError(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Number of partitions [{current}] of repartition topic [{t}] "
                f"doesn't match number of partitions [{n}] of the source topic.",
            )
    return dict.fromkeys(repartition, n)
