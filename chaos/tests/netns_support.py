"""What the namespaced-cluster tests share: a load producer that remembers what was
acknowledged and when, a read-back of a partition, a deadline poll, and what a failed wait
reports (each broker's view of the partition, the producers' errors, the brokers' logs)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

if TYPE_CHECKING:
    from chaos.netns_cluster import NetnsCluster

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = probe()
        except Exception as exc:  # a probe across a partition may fail; keep polling
            last = exc
            value = None
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout:.0f} s (last error: {last!r})")


def create_topic(
    bootstrap: str, topic: str, config: dict[str, str], replicas: list[int] | None = None
) -> None:
    """One partition, three replicas (``replicas`` in that order when given)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = (
        NewTopic(topic, 1, config=dict(config), replica_assignment=[replicas])
        if replicas
        else NewTopic(topic, 1, 3, config=dict(config))
    )
    futures = admin.create_topics([new], operation_timeout=30)
    for future in futures.values():
        future.result(60)


@dataclass
class Ack:
    value: bytes
    sent: float
    acked: float
    offset: int


@dataclass
class LoadProducer:
    """An idempotent acks=all producer (in its own thread) sending ``prefix`` + b"%08d"
    values, numbered from 0."""

    bootstrap: str
    topic: str
    prefix: bytes = b"v"
    settings: dict[str, object] = field(default_factory=dict)
    acks: list[Ack] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sent: int = 0

    def __post_init__(self) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "request.timeout.ms": 10000,
                "message.timeout.ms": 300000,
                "topic.metadata.refresh.interval.ms": 5000,
                **self.settings,
            }
        )
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_delivery(self, sent: float, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                value = msg.value()
                offset = msg.offset()
                assert value is not None and offset is not None
                self.acks.append(Ack(value, sent, time.monotonic(), offset))

    def _callback(self, sent: float) -> Callable[[KafkaError | None, Message], None]:
        return lambda err, msg: self._on_delivery(sent, err, msg)

    def _run(self) -> None:
        while not self._stop.is_set():
            if len(self.producer) < 200:
                sent = time.monotonic()
                self.producer.produce(
                    self.topic,
                    value=self.prefix + b"%08d" % self.sent,
                    on_delivery=self._callback(sent),
                )
                self.sent += 1
            self.producer.poll(0.005)  # also paces the load
        self.producer.flush(300)

    def acked(self) -> int:
        with self._lock:
            return len(self.acks)

    def acks_since(self, moment: float) -> list[Ack]:
        """Acknowledgements of records sent at ``moment`` or later."""
        with self._lock:
            return [a for a in self.acks if a.sent >= moment]

    def acked_between(self, start: float, end: float) -> list[Ack]:
        """Acknowledgements that arrived between ``start`` and ``end``."""
        with self._lock:
            return [a for a in self.acks if start <= a.acked < end]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(330)
        assert not self._thread.is_alive(), "the producer did not flush"
        # Destroyed now, not at some later collection: a live client would go on
        # reconnecting to addresses whose namespaces are gone.
        del self.producer


def read_partition(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, bytes]]:
    """Every (offset, value) of a partition up to its high watermark."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"readback-{topic}",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        records: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 120
        while (not records or records[-1][0] < high - 1) and high > 0:
            assert time.monotonic() < deadline, f"read {len(records)} of {high} records"
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            offset, value = msg.offset(), msg.value()
            assert offset is not None and value is not None
            records.append((offset, value))
        return records
    finally:
        consumer.close()


def _broker_view(bootstrap: str, topic: str) -> str:
    """The partition's leader and ISR as one broker's Metadata answers them."""
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        meta = admin.list_topics(topic, timeout=5)
        part = meta.topics[topic].partitions[0]
        return f"controller {meta.controller_id}, leader {part.leader}, ISR {part.isrs}"
    except Exception as exc:  # a cut-off broker may not answer: that is part of the report
        return f"no answer ({exc})"


def _log_tail(path: Path, lines: int) -> list[str]:
    if not path.exists():
        return ["(no log)"]
    kept = [
        line
        for line in path.read_text(errors="replace").splitlines()
        if "__consumer_offsets" not in line
    ]
    return kept[-lines:]


def cluster_report(
    cluster: NetnsCluster, topic: str, loads: list[LoadProducer], log_lines: int = 25
) -> str:
    """What a failed wait needs to be understood later: ZooKeeper's partition state, each
    broker's Metadata view of it, each producer's counts and first errors, and the tail of
    each broker's log."""
    out = []
    try:
        out.append(f"ZooKeeper: {cluster.partition_state(topic, 0)}")
    except Exception as exc:
        out.append(f"ZooKeeper: no answer ({exc})")
    for b in cluster.brokers:
        out.append(f"broker {b} says: {_broker_view(cluster.bootstrap(b), topic)}")
    for load in loads:
        out.append(
            f"producer {load.prefix!r} ({load.bootstrap}): sent {load.sent}, "
            f"acked {load.acked()}, errors {load.errors[:3]}"
        )
    for b in cluster.brokers:
        out.append(f"--- broker {b}'s log, last lines:")
        out.extend(_log_tail(cluster.log_path(b), log_lines))
    return "\n".join(out)
