"""Helpers of the cluster tests (and of tests/integration): clients, an acknowledgement
oracle, cluster inspection."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_support import wait_until as _wait_until

# The cluster tests and tests/integration take their timeouts from here.
from samsa.testing.cluster import FAST as FAST

if TYPE_CHECKING:
    from samsa.local_cluster.cluster import LocalCluster

T = TypeVar("T")
# The start_cluster fixture: brokers and property overrides in, a running LocalCluster out.
ClusterFactory = Callable[..., "LocalCluster"]


class Cluster(Protocol):
    """Anything clients can bootstrap from: a LocalCluster, or brokers an operator runs."""

    @property
    def bootstrap_servers(self) -> str: ...


def wait_until(
    predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.1, what: str = ""
) -> T:
    """kafka_support's, where a broker that is down (admin calls fail) means "not yet"."""
    return _wait_until(predicate, timeout, interval, what, retry_on=(Exception,))


def admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def create_topic(
    cluster: Cluster, name: str, partitions: int = 3, rf: int = 3, **config: str
) -> None:
    a = admin(cluster)
    a.create_topics([NewTopic(name, partitions, rf, config=config)])[name].result(30)
    wait_until(lambda: all(leader(cluster, name, p) >= 0 for p in range(partitions)), 30)


def partition_info(cluster: Cluster, topic: str, partition: int) -> Any:
    md = admin(cluster).list_topics(topic, timeout=5)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return t.partitions.get(partition)


def leader(cluster: Cluster, topic: str, partition: int) -> int:
    p = partition_info(cluster, topic, partition)
    return -1 if p is None else int(p.leader)


def controller(cluster: Cluster) -> int:
    """The controller the brokers name in their metadata; -1 while none is elected."""
    return int(admin(cluster).list_topics(timeout=5).controller_id)


def isr(cluster: Cluster, topic: str, partition: int) -> list[int]:
    p = partition_info(cluster, topic, partition)
    return [] if p is None else sorted(p.isrs)


@dataclass
class Oracle:
    """What the producer side saw acknowledged, recorded by the test, not the broker."""

    acked: dict[int, list[tuple[int, bytes]]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        with self.lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[msg.partition()].append((msg.offset(), msg.value()))

    def count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.acked.values())


class LoadProducer:
    """A producer thread writing numbered values as fast as delivery allows."""

    def __init__(
        self, cluster: Cluster, topic: str, idempotent: bool = True, **config: Any
    ) -> None:
        self.oracle = Oracle()
        self.topic = topic
        self.producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": idempotent,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "retry.backoff.ms": 100,
                **config,
            }
        )
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> LoadProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            value = b"v%09d" % self.sent
            try:
                self.producer.produce(self.topic, value=value, on_delivery=self.oracle.on_delivery)
                self.sent += 1
            except BufferError:
                self.producer.poll(0.05)
                continue
            if self.sent % 100 == 0:
                self.producer.poll(0)
                time.sleep(0.002)

    def stop(self, flush_timeout: float = 120.0) -> Oracle:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        remaining = self.producer.flush(flush_timeout)
        assert remaining == 0, f"{remaining} records were neither acknowledged nor failed"
        return self.oracle


def consume_all(
    cluster: Cluster, topic: str, partitions: int
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition, from the start to the current end."""
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"check-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        ends = {}
        for p in range(partitions):
            _, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 120
        while len(done) < partitions and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if (
                    m.error().code() == KafkaError._PARTITION_EOF
                    and m.offset() >= ends[m.partition()]
                ):
                    done.add(m.partition())
                continue
            got[m.partition()].append((m.offset(), m.value()))
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
        assert len(done) == partitions, f"did not reach the end of {set(range(partitions)) - done}"
        return got
    finally:
        c.close()


def check_no_loss(oracle: Oracle, got: dict[int, list[tuple[int, bytes]]]) -> None:
    """Every acknowledged record is there, at the offset it was acknowledged with."""
    for p, acked in oracle.acked.items():
        by_offset = dict(got.get(p, []))
        missing = [(o, v) for o, v in acked if by_offset.get(o) != v]
        assert not missing, (
            f"partition {p}: {len(missing)} acknowledged records lost, e.g. {missing[:3]}"
        )


def check_exactly_once(oracle: Oracle, got: dict[int, list[tuple[int, bytes]]]) -> None:
    """No loss, and each record once, in the order it was produced, within each partition
    (what an idempotent producer guarantees)."""
    check_no_loss(oracle, got)
    for p, records in got.items():
        values = [v for _, v in records]
        assert len(values) == len(set(values)), f"partition {p} holds duplicates"
        assert values == sorted(values), f"partition {p} is out of order"
