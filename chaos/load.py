"""The campaign's client load, in threads of real Kafka clients (confluent-kafka), each writing
every operation it completes as a JSON line of its own log: producers (idempotent acks=all,
acks=1, keyed into a compacted topic), a consumer group committing offsets, and the final full
read of every partition that the checker judges against.

Values name their producer and its sequence (``<producer>:<seq>``); a producer that hits a fatal
error starts again as a new producer (``<name>.<generation>``), so that order is judged per
producer instance, as idempotence promises it."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ACKS_ALL = "chaos-acks-all"
ACKS_ONE = "chaos-acks-one"
COMPACTED = "chaos-compacted"
PARTITIONS = 3
GROUP = "chaos-group"
# librdkafka's own log (connections refused while brokers are down): the runner sends it to a
# file beside the operation logs.
CLIENT_LOG = logging.getLogger("chaos.clients")


# The campaign steps brokers' clocks back by up to six hours (chaos/faults/clock.py): with
# Kafka's default message.timestamp.after.max.ms (an hour), a leader stepped back would refuse
# the producers' records as too far ahead (INVALID_TIMESTAMP).  As a Kafka operator whose
# brokers' clocks may drift would, the load's topics accept any time ahead (Long.MAX_VALUE).
ANY_TIME_AHEAD = {"message.timestamp.after.max.ms": str(2**63 - 1)}


def topics() -> dict[str, dict[str, str]]:
    return {
        ACKS_ALL: dict(ANY_TIME_AHEAD),
        ACKS_ONE: dict(ANY_TIME_AHEAD),
        COMPACTED: {
            **ANY_TIME_AHEAD,
            "cleanup.policy": "compact",
            # Small segments and an eager cleaner, so that compaction runs between faults.
            "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01",
        },
    }


def admin_config(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "logger": CLIENT_LOG}


def create_topics(bootstrap: str, timeout: float = 60.0) -> None:
    admin = AdminClient(admin_config(bootstrap))
    new = [NewTopic(t, PARTITIONS, 3, config=c) for t, c in topics().items()]
    for future in admin.create_topics(new, request_timeout=timeout).values():
        future.result(timeout)


class OpLog:
    """One worker's JSON lines; written by that worker's thread only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: TextIO = path.open("a", buffering=1)

    def write(self, **op: Any) -> None:
        self._file.write(json.dumps(op, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._file.close()


class Worker(threading.Thread):
    def __init__(self, name: str, bootstrap: str, log_dir: Path) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap = bootstrap
        self.log = OpLog(log_dir / f"{name}.jsonl")
        self.stopping = threading.Event()
        self.failure: BaseException | None = None

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # reported by the runner, not swallowed
            self.failure = exc
        finally:
            self.log.close()

    def work(self) -> None:
        raise NotImplementedError


class ProducerWorker(Worker):
    def __init__(
        self,
        name: str,
        bootstrap: str,
        log_dir: Path,
        topic: str,
        acks: str,
        idempotent: bool,
        keys: int = 0,
        rate: float = 50.0,
    ) -> None:
        super().__init__(name, bootstrap, log_dir)
        self.topic = topic
        self.acks = acks
        self.idempotent = idempotent
        self.keys = keys
        self.interval = 1.0 / rate
        self.generation = 0
        self.fatal = False

    def _producer(self) -> Producer:
        def on_error(err: KafkaError) -> None:
            if err.fatal():
                self.fatal = True
                self.log.write(op="fatal", producer=self.instance, t=time.time(), error=str(err))

        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": self.acks,
                "enable.idempotence": self.idempotent,
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                # A leader that froze holds the idempotent producer's in-flight batches until this
                # runs out, however soon another replica leads.
                "request.timeout.ms": 5000,
                "error_cb": on_error,
                "logger": CLIENT_LOG,
            }
        )

    @property
    def instance(self) -> str:
        return f"{self.name}.{self.generation}"

    def work(self) -> None:
        producer = self._producer()
        seq = 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            if self.fatal:
                producer.purge()
                producer.poll(0)
                self.generation += 1
                self.fatal = False
                producer = self._producer()
                seq = 0
            seq += 1
            self._send(producer, seq)
            next_at += self.interval
            while (wait := next_at - time.monotonic()) > 0:
                producer.poll(wait)
            if len(producer) > 2000:
                producer.poll(0.1)
        remaining = producer.flush(60)
        self.log.write(op="stopped", producer=self.instance, t=time.time(), in_flight=remaining)

    def _send(self, producer: Producer, seq: int) -> None:
        instance = self.instance
        value = f"{instance}:{seq}"
        key = f"k{seq % self.keys}" if self.keys else None
        partition = -1 if self.keys else seq % PARTITIONS
        sent = time.time()

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            self.log.write(
                op="produce",
                producer=instance,
                idempotent=self.idempotent,
                acks=self.acks,
                topic=self.topic,
                partition=msg.partition(),
                key=key,
                value=value,
                seq=seq,
                t0=sent,
                t1=time.time(),
                ok=err is None,
                offset=msg.offset() if err is None else None,
                error=None if err is None else err.name(),
            )

        while True:
            try:
                if partition >= 0:
                    producer.produce(
                        self.topic,
                        value=value,
                        key=key,
                        partition=partition,
                        on_delivery=on_delivery,
                    )
                else:
                    producer.produce(self.topic, value=value, key=key, on_delivery=on_delivery)
                return
            except BufferError:
                producer.poll(0.1)


class ConsumerWorker(Worker):
    """A member of the group: every record it receives and every commit, with its outcome."""

    def __init__(self, name: str, bootstrap: str, log_dir: Path, topic: str = ACKS_ALL) -> None:
        super().__init__(name, bootstrap, log_dir)
        self.topic = topic

    def work(self) -> None:
        def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            self.log.write(
                op="assign",
                member=self.name,
                t=time.time(),
                partitions=[p.partition for p in partitions],
            )

        def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            self.log.write(
                op="revoke",
                member=self.name,
                t=time.time(),
                partitions=[p.partition for p in partitions],
            )
            positions.clear()

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
                "logger": CLIENT_LOG,
            }
        )
        positions: dict[int, int] = {}
        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        last_commit = time.monotonic()
        try:
            while not self.stopping.is_set():
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    value, partition, offset = msg.value(), msg.partition(), msg.offset()
                    assert partition is not None and offset is not None
                    self.log.write(
                        op="consume",
                        member=self.name,
                        t=time.time(),
                        topic=msg.topic(),
                        partition=partition,
                        offset=offset,
                        value=value.decode() if value is not None else None,
                    )
                    positions[partition] = offset + 1
                if positions and time.monotonic() - last_commit > 1.0:
                    self._commit(consumer, dict(positions))
                    last_commit = time.monotonic()
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer, positions: dict[int, int]) -> None:
        offsets = [TopicPartition(self.topic, p, o) for p, o in positions.items()]
        t0 = time.time()
        try:
            result = consumer.commit(offsets=offsets, asynchronous=False) or []
            errors = {tp.partition: tp.error for tp in result if tp.error is not None}
            failure = None
        except KafkaException as exc:
            errors = {}
            failure = str(exc.args[0].name() if exc.args else exc)
        t1 = time.time()
        for p, o in positions.items():
            error = failure or (str(errors[p]) if p in errors else None)
            self.log.write(
                op="commit",
                member=self.name,
                topic=self.topic,
                partition=p,
                offset=o,
                t0=t0,
                t1=t1,
                ok=error is None,
                error=error,
            )


def final_read(bootstrap: str, log_dir: Path, timeout: float = 120.0) -> None:
    """Every record of every partition, from the log start to the high watermark, and the
    group's committed offsets, into ``final.jsonl``."""
    log = OpLog(log_dir / "final.jsonl")
    try:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "isolation.level": "read_uncommitted",
                "logger": CLIENT_LOG,
            }
        )
        try:
            for topic in topics():
                for p in range(PARTITIONS):
                    _read_partition(consumer, log, topic, p, timeout)
            committed = consumer.committed(
                [TopicPartition(ACKS_ALL, p) for p in range(PARTITIONS)], timeout=30
            )
            for tp in committed:
                log.write(op="committed", topic=tp.topic, partition=tp.partition, offset=tp.offset)
        finally:
            consumer.close()
    finally:
        log.close()


def _read_partition(consumer: Consumer, log: OpLog, topic: str, p: int, timeout: float) -> None:
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
    log.write(op="end", topic=topic, partition=p, low=low, high=high)
    if high <= low:
        return
    consumer.assign([TopicPartition(topic, p, low)])
    deadline = time.monotonic() + timeout
    position = low
    while position < high:
        if time.monotonic() > deadline:
            raise TimeoutError(f"final read of {topic}-{p} stuck at {position} of {high}")
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        error = msg.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                continue
            raise KafkaException(error)
        key, value, offset = msg.key(), msg.value(), msg.offset()
        assert offset is not None
        log.write(
            op="final",
            topic=topic,
            partition=p,
            offset=offset,
            key=key.decode() if key is not None else None,
            value=value.decode() if value is not None else None,
        )
        position = offset + 1
    consumer.unassign()
