"""A consume-transform-produce copier on logbroker's own client or on confluent-kafka
(librdkafka), run as a process by the fault tests (like Kafka's
TransactionalMessageCopier): it reads partition 0 of the input
topic read_committed from the group's committed offset, and per poll copies the records
to the output topic and commits their offsets in one transaction. After an error it aborts
and goes back to the committed offset; if even the abort fails it starts over with a new
producer (init_transactions fences the old one). One JSON line per committed transaction.

    python tests/transactional_copier.py BOOTSTRAP INPUT OUTPUT TRANSACTIONAL_ID GROUP RECORDS [logbroker|librdkafka]
"""

from __future__ import annotations

import json
import sys
import time

from logbroker.client import Consumer, KafkaError, Producer


def main(bs: str, source: str, dest: str, txn_id: str, group: str, records: int) -> int:
    tp = (source, 0)
    consumer = Consumer(
        bs, group_id=group, isolation_level="read_committed", auto_offset_reset="earliest", enable_auto_commit=False
    )
    consumer.assign([tp])
    producer = Producer(bs, transactional_id=txn_id, transaction_timeout_ms=20000)
    producer.init_transactions(60)

    def rewind() -> int:
        done = consumer.committed([tp], timeout=30).get(tp)
        done = 0 if done is None or done < 0 else done
        consumer.seek(tp, done)
        return done

    done = rewind()
    deadline = time.monotonic() + 240
    while done < records and time.monotonic() < deadline:
        got = consumer.poll(0.2, max_records=20)
        if not got:
            continue
        try:
            producer.begin_transaction()
            for r in got:
                producer.send(dest, r.value)
            producer.send_offsets_to_transaction({tp: got[-1].offset + 1}, consumer)
            producer.commit_transaction(60)
            done = got[-1].offset + 1
            print(json.dumps({"committed": done}), flush=True)
        except KafkaError as e:
            print(json.dumps({"error": str(e)}), flush=True)
            try:
                producer.abort_transaction(60)
            except KafkaError as abort_error:
                print(json.dumps({"abort failed": str(abort_error)}), flush=True)
                producer.close()
                producer = Producer(bs, transactional_id=txn_id, transaction_timeout_ms=20000)
                producer.init_transactions(60)
            done = rewind()
    producer.close()
    consumer.close()
    return 0 if done >= records else 1


def main_librdkafka(bs: str, source: str, dest: str, txn_id: str, group: str, records: int) -> int:
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka import Producer as CKProducer

    consumer = CKConsumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )

    def new_producer():
        p = CKProducer({"bootstrap.servers": bs, "transactional.id": txn_id, "transaction.timeout.ms": 20000})
        p.init_transactions(60)
        return p

    def rewind() -> int:
        off = consumer.committed([TopicPartition(source, 0)], timeout=30)[0].offset
        done = max(off, 0)
        consumer.assign([TopicPartition(source, 0, done)])  # (a seek needs a started fetch)
        return done

    producer = new_producer()
    done = rewind()
    deadline = time.monotonic() + 240
    idle_since = time.monotonic()
    while done < records and time.monotonic() < deadline:
        messages = consumer.consume(20, 0.2)
        for m in messages:
            if m.error():
                print(json.dumps({"consume error": str(m.error())}), flush=True)
        got = [m for m in messages if not m.error()]
        if not got:
            if time.monotonic() - idle_since > 10:  # say where the consumer stands (a stall's diagnosis)
                idle_since = time.monotonic()
                tp = TopicPartition(source, 0)
                print(
                    json.dumps(
                        {
                            "idle at": consumer.position([tp])[0].offset,
                            "done": done,
                            "watermarks": consumer.get_watermark_offsets(tp, cached=True),
                        }
                    ),
                    flush=True,
                )
            continue
        idle_since = time.monotonic()
        try:
            producer.begin_transaction()
            for m in got:
                producer.produce(dest, value=m.value())
            producer.send_offsets_to_transaction(
                [TopicPartition(source, 0, got[-1].offset() + 1)], consumer.consumer_group_metadata(), 60
            )
            producer.commit_transaction(60)
            done = got[-1].offset() + 1
            print(json.dumps({"committed": done}), flush=True)
        except KafkaException as e:
            print(json.dumps({"error": str(e)}), flush=True)
            try:
                producer.abort_transaction(60)
            except KafkaException as abort_error:
                print(json.dumps({"abort failed": str(abort_error)}), flush=True)
                producer = new_producer()
            done = rewind()
    producer.flush(10)
    consumer.close()
    return 0 if done >= records else 1


if __name__ == "__main__":
    bs, source, dest, txn_id, group, n = sys.argv[1:7]
    client = sys.argv[7] if len(sys.argv) > 7 else "logbroker"
    run = main_librdkafka if client == "librdkafka" else main
    sys.exit(run(bs, source, dest, txn_id, group, int(n)))
