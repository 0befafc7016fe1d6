"""A transactional consume-process-produce application, run as its own process by the tests:
`python eos_app.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID`.

It reads INPUT (read_committed), writes each value prefixed with "out-" to the same partition
of OUTPUT, and commits the consumed offsets in the same transaction, a few records at a time.
It runs until killed; every transaction it had not committed is aborted by the next instance's
InitProducerId, so OUTPUT read with read_committed holds each input exactly once.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, Producer

PROCESSING_S = 0.1


def main() -> None:
    bootstrap, source, sink, group, txn_id = sys.argv[1:6]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            # Static membership (KIP-345): the next instance takes over the killed one's
            # partitions at once instead of after its session timeout.
            "group.instance.id": txn_id,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 30_000,
            "linger.ms": 2,
        }
    )
    producer.init_transactions(60)
    consumer.subscribe([source])
    print("ready", flush=True)
    while True:
        batch = [m for m in consumer.consume(17, 0.5) if m.error() is None]
        if not batch:
            continue
        producer.begin_transaction()
        for m in batch:
            producer.produce(sink, b"out-" + (m.value() or b""), partition=m.partition())
        # Processing takes time while the transaction is open, as real work does: without it
        # a transaction lasts a few milliseconds, and a busy machine can see all 20 kills land
        # between transactions, leaving the aborts untested.
        producer.flush(60)
        time.sleep(PROCESSING_S)
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60
        )
        producer.commit_transaction(60)


if __name__ == "__main__":
    main()
