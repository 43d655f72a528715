"""A consumer-group member in its own process, for group tests: it prints one JSON
line per event on stdout ({"assigned": [...]}, {"revoked": [...]},
{"records": [[partition, offset, value], ...]}) and commits after processing.

    python group_member.py LIB BOOTSTRAP GROUP TOPIC [--instance ID] [--strategy S] [--session-ms N]
"""

from __future__ import annotations

import argparse
import json
import sys


def emit(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def run_confluent(a) -> None:
    from confluent_kafka import Consumer, KafkaException

    conf = {
        "bootstrap.servers": a.bootstrap,
        "group.id": a.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if a.protocol == "consumer":  # KIP-848: the broker assigns; session and heartbeat are broker-side
        conf["group.protocol"] = "consumer"
    else:
        conf.update(
            {
                "session.timeout.ms": a.session_ms,
                "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": a.strategy or "range,roundrobin",
            }
        )
    if a.instance:
        conf["group.instance.id"] = a.instance
    c = Consumer(conf)
    cooperative = (a.strategy or "") == "cooperative-sticky" or a.protocol == "consumer"

    def on_assign(consumer, parts):
        emit(assigned=sorted(p.partition for p in parts))
        if cooperative:
            consumer.incremental_assign(parts)

    def on_revoke(consumer, parts):
        emit(revoked=sorted(p.partition for p in parts))
        if cooperative:
            consumer.incremental_unassign(parts)

    c.subscribe([a.topic], on_assign=on_assign, on_revoke=on_revoke)
    while True:
        msgs = c.consume(500, 0.2)
        good = [m for m in msgs if m.error() is None]
        if good:
            emit(records=[[m.partition(), m.offset(), m.value().decode()] for m in good])
            try:
                c.commit(asynchronous=False)
            except KafkaException as e:  # a rebalance under way (as with Kafka): the next commit covers it
                emit(commit_error=str(e))


def run_kafka_python(a) -> None:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.errors import KafkaError

    class L(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit(revoked=sorted(p.partition for p in revoked))

        def on_partitions_assigned(self, assigned):
            emit(assigned=sorted(p.partition for p in assigned))

    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    c = KafkaConsumer(
        bootstrap_servers=a.bootstrap,
        group_id=a.group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=a.session_ms,
        heartbeat_interval_ms=500,
        partition_assignment_strategy=[RoundRobinPartitionAssignor],
        group_instance_id=a.instance,
    )
    c.subscribe([a.topic], listener=L())
    while True:
        batch = c.poll(timeout_ms=200)
        recs = [[tp.partition, m.offset, m.value.decode()] for tp, ms in batch.items() for m in ms]
        if recs:
            emit(records=recs)
            try:
                c.commit()
            except KafkaError as e:  # a rebalance under way: the next commit covers it
                emit(commit_error=str(e))


def run_aiokafka(a) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.errors import KafkaError

    class L(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            emit(revoked=sorted(p.partition for p in revoked))

        async def on_partitions_assigned(self, assigned):
            emit(assigned=sorted(p.partition for p in assigned))

    async def main():
        c = AIOKafkaConsumer(
            bootstrap_servers=a.bootstrap,
            group_id=a.group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=a.session_ms,
            heartbeat_interval_ms=500,
            group_instance_id=a.instance,
        )
        await c.start()
        c.subscribe([a.topic], listener=L())
        while True:
            batch = await c.getmany(timeout_ms=200)
            recs = [[tp.partition, m.offset, m.value.decode()] for tp, ms in batch.items() for m in ms]
            if recs:
                emit(records=recs)
                try:
                    await c.commit()
                except KafkaError as e:  # a rebalance under way: the next commit covers it
                    emit(commit_error=str(e))

    asyncio.run(main())


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("lib", choices=["confluent", "kafka-python", "aiokafka"])
    p.add_argument("bootstrap")
    p.add_argument("group")
    p.add_argument("topic")
    p.add_argument("--instance")
    p.add_argument("--strategy")
    p.add_argument("--session-ms", type=int, default=6000)
    p.add_argument("--protocol", default="classic", choices=["classic", "consumer"])
    args = p.parse_args()
    {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}[args.lib](args)
