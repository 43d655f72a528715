"""streams_topology: a streams group's topology validated and configured as Kafka 4.4 does."""

from __future__ import annotations

import pytest

from logbroker.coord.groups import streams_topology as st
from logbroker.coord.groups.streams_topology import (
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    ConfiguredSubtopology,
    InvalidTopology,
    Subtopology,
    TopicInfo,
    Topology,
)
from logbroker.protocol import REQUESTS

COMPACT = {"cleanup.policy": "compact"}
DELETE = {"cleanup.policy": "delete", "retention.ms": "-1"}


def info(name: str, partitions: int = 0, rf: int = 0, configs: dict[str, str] | None = None) -> TopicInfo:
    return TopicInfo(name, partitions, rf, dict(configs or {}))


def sub(
    sid: str,
    sources=(),
    regex=(),
    changelogs=(),
    sinks=(),
    repartitions=(),
    copartition=(),
) -> Subtopology:
    return Subtopology(
        sid, tuple(sources), tuple(regex), tuple(changelogs), tuple(sinks), tuple(repartitions), tuple(copartition)
    )


def topo(*subs: Subtopology, epoch: int = 1) -> Topology:
    return Topology(epoch, subs)


def configure(topology: Topology, topics: dict[str, int]):
    st.validate(topology)
    return st.configure(topology, topics.get, topics.keys())


def word_count() -> Topology:
    return topo(
        sub("0", sources=["lines"], sinks=["app-count-repartition"]),
        sub(
            "1",
            repartitions=[info("app-count-repartition", configs=DELETE)],
            changelogs=[info("app-count-changelog", configs=COMPACT)],
        ),
    )


def test_word_count_configures_two_subtopologies_of_three_tasks():
    got = configure(word_count(), {"lines": 3})
    assert got.subtopologies is None
    assert got.internal_topics_to_create == {
        "app-count-changelog": info("app-count-changelog", 3, 0, COMPACT),
        "app-count-repartition": info("app-count-repartition", 3, 0, DELETE),
    }
    assert got.status == [
        (MISSING_INTERNAL_TOPICS, "Internal topics are missing: app-count-changelog, app-count-repartition")
    ]

    # Once the internal topics exist (as the coordinator created them), the topology is ready.
    got = configure(word_count(), {"lines": 3, "app-count-repartition": 3, "app-count-changelog": 3})
    assert got.status == []
    assert got.internal_topics_to_create == {}
    assert got.subtopologies == {
        "0": ConfiguredSubtopology(3, ("lines",), {}, {}, False),
        "1": ConfiguredSubtopology(3, (), {"app-count-repartition": 3}, {"app-count-changelog": 3}, True),
    }


def test_missing_source_topics_no_tasks_and_at_most_three_named():
    got = configure(word_count(), {})
    assert got.subtopologies is None and got.internal_topics_to_create == {}
    assert got.status == [(MISSING_SOURCE_TOPICS, "Source topics lines are missing.")]

    many = topo(sub("0", sources=["e", "d", "c", "b", "a"]))
    got = configure(many, {"c": 1})
    assert got.status == [(MISSING_SOURCE_TOPICS, "Source topics a, b, d and 1 additional topics are missing.")]


def test_regex_source_full_match_and_internal_topics_excluded():
    t = topo(
        sub("0", regex=["orders-.*"], sinks=["app-r-repartition"]),
        sub("1", repartitions=[info("app-r-repartition")], changelogs=[info("orders-store-changelog")]),
    )
    topics = {"orders-eu": 2, "orders-us": 5, "xorders-eu": 9, "orders": 7, "__consumer_offsets": 50}
    got = configure(t, topics)
    # orders-store-changelog is the topology's own topic: never a source.
    assert got.internal_topics_to_create == {
        "app-r-repartition": info("app-r-repartition", 5),
        "orders-store-changelog": info("orders-store-changelog", 5),
    }
    got = configure(t, {**topics, "app-r-repartition": 5, "orders-store-changelog": 5})
    assert got.subtopologies["0"] == ConfiguredSubtopology(5, ("orders-eu", "orders-us"), {}, {}, False)
    assert got.subtopologies["1"].num_tasks == 5

    # A regex that matches nothing is a missing source.
    got = configure(t, {"orders": 1})
    assert got.status == [(MISSING_SOURCE_TOPICS, "Source topics orders-.* are missing.")]
    assert st.REGEX_NOT_SUPPORTED == "Regular expressions for source topics are not supported yet."


def test_copartitioned_user_topics_with_different_counts():
    t = topo(sub("0", sources=["left", "right"], copartition=[((0, 1), (), ())]))
    got = configure(t, {"left": 2, "right": 1})
    assert got.subtopologies is None
    assert got.status == [
        (
            INCORRECTLY_PARTITIONED_TOPICS,
            "Following topics do not have the same number of partitions: [{left=2, right=1}]",
        )
    ]
    assert configure(t, {"left": 2, "right": 2}).subtopologies["0"].num_tasks == 2


def test_copartitioning_gives_repartition_topics_the_group_count():
    # A join of a re-keyed stream (repartition topic computed from a 6-partition input) with a
    # 2-partition table: the repartition topic takes the table's count.
    t = topo(
        sub("0", sources=["clicks"], sinks=["app-rekey-repartition"]),
        sub(
            "1",
            sources=["users"],
            repartitions=[info("app-rekey-repartition")],
            changelogs=[info("app-join-changelog")],
            copartition=[((0,), (), (0,))],
        ),
    )
    got = configure(t, {"clicks": 6, "users": 2})
    assert got.internal_topics_to_create == {
        "app-rekey-repartition": info("app-rekey-repartition", 2),
        "app-join-changelog": info("app-join-changelog", 2),
    }
    # A fixed count that disagrees with the group is refused.
    fixed = topo(t.subtopologies[0], dataclass_replace_repartition(t.subtopologies[1], 4))
    got = configure(fixed, {"clicks": 6, "users": 2})
    assert got.status == [
        (
            INCORRECTLY_PARTITIONED_TOPICS,
            "Number of partitions [4] of repartition topic [app-rekey-repartition] doesn't match "
            "number of partitions [2] of the source topic.",
        )
    ]


def dataclass_replace_repartition(s: Subtopology, partitions: int) -> Subtopology:
    import dataclasses

    return dataclasses.replace(
        s,
        repartition_source_topics=tuple(
            dataclasses.replace(t, partitions=partitions) for t in s.repartition_source_topics
        ),
    )


def test_copartition_group_of_repartition_topics_only():
    t = topo(
        sub("0", sources=["a"], sinks=["r1"]),
        sub("1", sources=["b"], sinks=["r2"]),
        sub("2", repartitions=[info("r1"), info("r2")], copartition=[((), (), (0, 1))]),
    )
    got = configure(t, {"a": 3, "b": 8})
    assert got.internal_topics_to_create == {"r1": info("r1", 8), "r2": info("r2", 8)}
    # With a fixed one, the fixed count wins.
    t2 = topo(
        t.subtopologies[0],
        t.subtopologies[1],
        sub("2", repartitions=[info("r1", 5), info("r2")], copartition=[((), (), (0, 1))]),
    )
    got = configure(t2, {"a": 3, "b": 8})
    assert got.internal_topics_to_create == {"r1": info("r1", 5), "r2": info("r2", 5)}
    # Two fixed ones that disagree are refused.
    t3 = topo(
        t.subtopologies[0],
        t.subtopologies[1],
        sub("2", repartitions=[info("r1", 5), info("r2", 4)], copartition=[((), (), (0, 1))]),
    )
    got = configure(t3, {"a": 3, "b": 8})
    assert got.status == [
        (INCORRECTLY_PARTITIONED_TOPICS, "Following topics do not have the same number of partitions: [{r1=5, r2=4}]")
    ]


def test_chained_repartition_topics():
    # Listed against the data flow: subtopology 0 reads r2 which subtopology 1 writes from r1,
    # which subtopology 2 writes from the 4-partition input (RepartitionTopics' passes).
    t = topo(
        sub("0", repartitions=[info("r2")], changelogs=[info("store-changelog")]),
        sub("1", repartitions=[info("r1")], sinks=["r2"]),
        sub("2", sources=["in"], sinks=["r1"]),
    )
    got = configure(t, {"in": 4})
    assert got.internal_topics_to_create == {
        "r1": info("r1", 4),
        "r2": info("r2", 4),
        "store-changelog": info("store-changelog", 4),
    }
    got = configure(t, {"in": 4, "r1": 4, "r2": 4, "store-changelog": 4})
    assert {k: v.num_tasks for k, v in got.subtopologies.items()} == {"0": 4, "1": 4, "2": 4}
    assert [k for k, v in got.subtopologies.items() if v.stateful] == ["0"]


def test_fixed_partition_counts_flow_downstream():
    # repartition(4) in the DSL: r1 is fixed at 4 whatever its input has; r2, written by the
    # subtopology reading r1, gets 4; the changelog of the subtopology reading r2 too.
    t = topo(
        sub("0", sources=["in"], sinks=["r1"]),
        sub("1", repartitions=[info("r1", 4, 3, DELETE)], sinks=["r2"]),
        sub("2", repartitions=[info("r2")], changelogs=[info("c")]),
    )
    got = configure(t, {"in": 10})
    assert got.internal_topics_to_create == {
        "c": info("c", 4),
        "r1": info("r1", 4, 3, DELETE),
        "r2": info("r2", 4),
    }
    got = configure(t, {"in": 10, "r1": 4, "r2": 4, "c": 4})
    assert {k: v.num_tasks for k, v in got.subtopologies.items()} == {"0": 10, "1": 4, "2": 4}


def test_existing_internal_topic_with_the_wrong_count():
    got = configure(word_count(), {"lines": 3, "app-count-repartition": 2})
    assert got.subtopologies is None and got.internal_topics_to_create == {}
    assert got.status == [
        (
            INCORRECTLY_PARTITIONED_TOPICS,
            "Existing topic app-count-repartition has different number of partitions: expected 3, found 2",
        )
    ]


def test_changelog_counts_max_of_sources_and_source_changelog():
    # A changelog gets the max count of the subtopology's inputs; one that is a source topic
    # itself (source-table optimization) exists, so it is checked, not created: with inputs of
    # 2 and 6 partitions the 2-partition source cannot be the changelog (Kafka's rule).
    t = topo(sub("0", sources=["small", "big"], changelogs=[info("small"), info("agg-changelog")]))
    got = configure(t, {"small": 2, "big": 6})
    assert got.internal_topics_to_create == {}
    assert got.status == [
        (INCORRECTLY_PARTITIONED_TOPICS, "Existing topic small has different number of partitions: expected 6, found 2")
    ]
    t = topo(sub("0", sources=["small", "big"], changelogs=[info("agg-changelog")]))
    assert configure(t, {"small": 2, "big": 6}).internal_topics_to_create == {"agg-changelog": info("agg-changelog", 6)}
    t = topo(sub("0", sources=["table"], changelogs=[info("table")]))
    got = configure(t, {"table": 2})
    assert got.status == [] and got.subtopologies["0"] == ConfiguredSubtopology(2, ("table",), {}, {"table": 2}, True)


@pytest.mark.parametrize(
    "topology,message",
    [
        (
            topo(
                sub(
                    "0",
                    sources=["__consumer_offsets"],
                    sinks=["__transaction_state"],
                    repartitions=[info("__share_group_state")],
                )
            ),
            "Use of Kafka internal topics __consumer_offsets,__transaction_state,__share_group_state "
            "in a Kafka Streams topology is prohibited.",
        ),
        (
            topo(sub("0", sources=["a "], sinks=["b?"], repartitions=[info("c!")], changelogs=[info("d/")])),
            "Topic names a ,b?,c!,d/ are not valid topic names.",
        ),
        (
            topo(sub("0", sources=["in"], changelogs=[info("changelog_topic_with_fixed_partition", 3)])),
            "Changelog topic changelog_topic_with_fixed_partition must have an undefined partition count, "
            "but it is set to 3.",
        ),
        (
            topo(sub("subtopology1", repartitions=[info("r")], sinks=["r"])),
            "Failed to compute number of partitions for all repartition topics. "
            "There may be loops in the topology that cannot be resolved.",
        ),
        (
            topo(sub("subtopology1", repartitions=[info("repartitionWithoutPartitionCount")])),
            "Failed to compute number of partitions for all repartition topics, "
            "because a repartition source topic is never used as a sink topic.",
        ),
        (
            topo(sub("SUBTOPOLOGY_NO_SOURCE")),
            "No source topics found for subtopology SUBTOPOLOGY_NO_SOURCE",
        ),
    ],
)
def test_invalid_topologies_as_kafka(topology, message):
    with pytest.raises(InvalidTopology) as e:
        st.validate(topology)
    assert str(e.value) == message
    # configure refuses them too, for a topology validate did not see.
    if "valid topic names" not in message and "internal topics" not in message and "undefined" not in message:
        with pytest.raises(InvalidTopology):
            st.configure(topology, lambda name: None if name.startswith("r") else 1, ())


def test_invalid_topologies_logbroker_refuses():
    for t in (
        topo(sub("0", sources=["a"]), sub("0", sources=["b"])),
        topo(sub("0", sources=["a"], copartition=[((1,), (), ())])),
        topo(sub("0", regex=["orders-("])),
        topo(sub("0", sources=["a"], sinks=["r"]), sub("1", repartitions=[info("r", -1)])),
    ):
        with pytest.raises(InvalidTopology):
            st.validate(t)
    # Only-repartition and only-source subtopologies are fine (ChangelogTopicsTest).
    st.validate(topo(sub("0", sources=["s"], sinks=["r"]), sub("1", repartitions=[info("r")], sinks=["sink"])))


def test_from_request_on_a_generated_request():
    R = REQUESTS[88]
    req = R(
        group_id="app",
        member_id="m",
        member_epoch=0,
        topology=R.Topology(
            epoch=2,
            subtopologies=[
                R.Subtopology(
                    subtopology_id="0",
                    source_topics=["lines"],
                    source_topic_regex=["x.*"],
                    repartition_sink_topics=["app-count-repartition"],
                    copartition_groups=[R.CopartitionGroup(source_topics=[0], source_topic_regex=[0])],
                ),
                R.Subtopology(
                    subtopology_id="1",
                    repartition_source_topics=[
                        R.TopicInfo(
                            name="app-count-repartition",
                            partitions=4,
                            replication_factor=3,
                            topic_configs=[R.KeyValue(key="cleanup.policy", value="delete")],
                        )
                    ],
                    state_changelog_topics=[
                        R.TopicInfo(
                            name="app-count-changelog",
                            topic_configs=[R.KeyValue(key="cleanup.policy", value="compact")],
                        )
                    ],
                ),
            ],
        ),
    )
    assert st.from_request(req.topology) == Topology(
        2,
        (
            Subtopology("0", ("lines",), ("x.*",), (), ("app-count-repartition",), (), (((0,), (0,), ()),)),
            Subtopology(
                "1",
                (),
                (),
                (info("app-count-changelog", 0, 0, COMPACT),),
                (),
                (info("app-count-repartition", 4, 3, {"cleanup.policy": "delete"}),),
                (),
            ),
        ),
    )
