"""What the client matrix's tests share beside their fixtures: the record batches as the
brokers stored them on disk, to check what a client's producer really sent."""

from __future__ import annotations

from typing import Any

from samsa.local_cluster.cluster import LocalCluster
from samsa.protocol.record_batch import scan_batches


def stored_batches(cluster: LocalCluster, topic: str) -> list[Any]:
    """The headers of every batch of the topic in every broker's log, as stored on disk."""
    headers = []
    for broker in range(3):
        for log in sorted((cluster.broker_dir(broker)).glob(f"{topic}-*/*.log")):
            headers += [h for _, h in scan_batches(log.read_bytes())]
    return headers


def ready_group_coordinator(bootstrap: str, topic: str, timeout: float = 60.0) -> None:
    """Until a group can commit an offset of `topic`: a fresh cluster creates
    __consumer_offsets at its first group, and until then FindCoordinator answers
    COORDINATOR_NOT_AVAILABLE, which some clients report as the answer rather than retry
    (franz-go's KIP-848 attempt among them)."""
    import time

    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "ready", "enable.auto.commit": False}
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()
