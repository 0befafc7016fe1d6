"""Idempotent producers: acknowledgements lost on the way back (a proxy cuts the connection
after the broker appended), broker restarts between a batch and its retry, and the error
codes of InitProducerId and Produce on the wire.

Clients reach the broker through a KafkaProxy that the broker advertises as its address.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka_support import (
    BrokerProcess,
    Wire,
    api_versions_v3,
    consume,
    create_topic,
    log_end,
    raw_produce,
    unique,
    wait_until,
)
from kio.index import load_request_schema

from samsa.protocol.record_batch import build_batch
from samsa.testing import DropProduceResponses, InProcessBroker, KafkaProxy, free_port

NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
NOT_COORDINATOR = 16
INVALID_RECORD = 87
PARTITIONS = 3
N = 3000


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[InProcessBroker, KafkaProxy]]:
    """A broker that advertises a proxy's address, and the proxy in front of it."""
    proxy = KafkaProxy()
    broker = InProcessBroker(
        tmp_path / "broker", {"advertised.listeners": f"PLAINTEXT://{proxy.address}"}
    )
    broker.start()
    proxy.upstream_port = broker.port
    try:
        with proxy:
            yield broker, proxy
    finally:
        broker.stop()


def values(n: int = N) -> list[bytes]:
    return [b"%06d" % i for i in range(n)]


def key_of(i: int) -> bytes:
    return b"key-%d" % (i % 7)


def assert_each_record_once_in_order(
    bootstrap: str, topic: str, sent: Sequence[bytes], partitions: int = PARTITIONS
) -> dict[bytes, tuple[int, int]]:
    """What a consumer reads holds every sent value exactly once, each partition in send
    order, at contiguous offsets; returns value -> (partition, offset)."""
    where: dict[bytes, tuple[int, int]] = {}
    for p in range(partitions):
        records = consume(bootstrap, topic, p)
        assert [r.offset for r in records] == list(range(len(records)))
        got = [r.value or b"" for r in records]
        assert len(set(got)) == len(got), f"partition {p} holds a record twice"
        assert got == sorted(got), f"partition {p} is out of send order"
        for r in records:
            where[r.value or b""] = (p, r.offset)
    missing = set(sent) - set(where)
    assert not missing, f"{len(missing)} records are missing, e.g. {sorted(missing)[:3]}"
    assert len(where) == len(sent)
    return where


# -- acknowledgements lost, with every client that supports idempotence ---------------------


Delivered = dict[bytes, tuple[int, int]]  # value -> (partition, offset) acknowledged


def with_confluent_kafka(bootstrap: str, topic: str, sent: Sequence[bytes]) -> Delivered:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.num.messages": 40,
            "retry.backoff.ms": 20,
            "reconnect.backoff.ms": 10,
            "reconnect.backoff.max.ms": 100,
            "message.timeout.ms": 60000,
        }
    )
    delivered: Delivered = {}
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered[msg.value()] = (msg.partition(), msg.offset())

    for i, value in enumerate(sent):
        producer.produce(topic, value, key=key_of(i), on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return delivered


def with_kafka_python(bootstrap: str, topic: str, sent: Sequence[bytes]) -> Delivered:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=2,
        batch_size=1500,
        retry_backoff_ms=20,
        reconnect_backoff_ms=10,
    )
    try:
        futures = [producer.send(topic, v, key=key_of(i)) for i, v in enumerate(sent)]
        producer.flush(60)
    finally:
        producer.close(10)
    return {v: (f.get(0).partition, f.get(0).offset) for v, f in zip(sent, futures, strict=True)}


def with_aiokafka(bootstrap: str, topic: str, sent: Sequence[bytes]) -> Delivered:
    from aiokafka import AIOKafkaProducer

    async def produce() -> Delivered:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            enable_idempotence=True,
            linger_ms=2,
            max_batch_size=1500,
            retry_backoff_ms=20,
        )
        await producer.start()
        try:
            futures = [await producer.send(topic, v, key=key_of(i)) for i, v in enumerate(sent)]
            metadata = await asyncio.gather(*futures)
        finally:
            await producer.stop()
        return {v: (m.partition, m.offset) for v, m in zip(sent, metadata, strict=True)}

    return asyncio.run(produce())


@pytest.mark.parametrize(
    ("client", "drops", "every"),
    [(with_confluent_kafka, 15, 3), (with_kafka_python, 8, 2), (with_aiokafka, 8, 2)],
    ids=["confluent-kafka", "kafka-python", "aiokafka"],
)
def test_lost_acknowledgements_are_retried_into_one_copy(
    proxied: tuple[InProcessBroker, KafkaProxy],
    client: Callable[[str, str, Sequence[bytes]], Delivered],
    drops: int,
    every: int,
) -> None:
    _, proxy = proxied
    topic = unique("idem-lost-acks")
    create_topic(proxy.address, topic, PARTITIONS)
    proxy.policy = DropProduceResponses(drops, every)
    sent = values()
    delivered = client(proxy.address, topic, sent)
    assert proxy.dropped == drops, f"the proxy should have lost {drops} acknowledgements"
    # Each retry was answered with the offsets its batch got the first time.
    assert delivered == assert_each_record_once_in_order(proxy.address, topic, sent)


# -- a restart between a batch and its retry -------------------------------------------------


def produce_across_a_restart(proxy: KafkaProxy, topic: str, restart: Any) -> None:
    """A first batch is appended but its acknowledgement is lost and the broker becomes
    unreachable; `restart()` restarts the broker; then the producer's retry, and more."""
    from confluent_kafka import Producer

    create_topic(proxy.address, topic, 1)
    producer = Producer(
        {
            "bootstrap.servers": proxy.address,
            "enable.idempotence": True,
            "linger.ms": 50,
            "retry.backoff.ms": 50,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 200,
            "message.timeout.ms": 60000,
        }
    )
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    proxy.policy = DropProduceResponses(1)
    proxy.pause_after_drop = True
    first, second = values(200)[:100], values(200)[100:]
    for value in first:
        producer.produce(topic, value, partition=0, on_delivery=on_delivery)
    producer.poll(0)
    wait_until(lambda: proxy.dropped == 1, 20, what="the first acknowledgement to be lost")
    assert proxy.paused
    restart()
    proxy.resume()
    for value in second:
        producer.produce(topic, value, partition=0, on_delivery=on_delivery)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    assert_each_record_once_in_order(proxy.address, topic, first + second, partitions=1)


def test_a_clean_restart_between_a_batch_and_its_retry(
    proxied: tuple[InProcessBroker, KafkaProxy],
) -> None:
    broker, proxy = proxied
    produce_across_a_restart(proxy, unique("idem-clean"), broker.restart)


def test_a_kill_9_between_a_batch_and_its_retry(tmp_path: Path) -> None:
    proxy = KafkaProxy()
    broker = BrokerProcess(
        tmp_path / "data",
        free_port(),
        {"advertised.listeners": f"PLAINTEXT://{proxy.address}"},
    )
    broker.start()
    proxy.upstream_port = broker.port
    try:
        with proxy:

            def kill_and_start() -> None:
                broker.kill()
                broker.start()

            produce_across_a_restart(proxy, unique("idem-kill"), kill_and_start)
    finally:
        broker.stop()


# -- the wire -------------------------------------------------------------------------------


def init_producer_id(
    wire: Wire,
    version: int,
    transactional_id: str | None = None,
    producer_id: int = -1,
    epoch: int = -1,
) -> tuple[int, int, int]:
    cls = load_request_schema(22, version)
    fields: dict[str, Any] = {
        "transactional_id": transactional_id,
        "transaction_timeout": datetime.timedelta(seconds=60),
    }
    if version >= 3:
        fields.update(producer_id=producer_id, producer_epoch=epoch)
    response = wire.request(22, version, cls(**fields))
    return int(response.error_code.value), int(response.producer_id), response.producer_epoch


def test_init_producer_id_on_the_wire(tmp_path: Path) -> None:
    with InProcessBroker(tmp_path / "broker") as broker, Wire(broker.port) as wire:
        assert api_versions_v3(wire)[22] == (0, 5)
        ids = []
        for version in range(6):
            error, producer_id, epoch = init_producer_id(wire, version)
            assert (error, epoch) == (NONE, 0)
            ids.append(producer_id)
        assert len(set(ids)) == 6
        # KIP-360: the current id and epoch get the next epoch.
        assert init_producer_id(wire, 4, None, ids[0], 0) == (NONE, ids[0], 1)
        assert init_producer_id(wire, 3, None, ids[0], -1)[0] == INVALID_REQUEST
        assert init_producer_id(wire, 3, None, -1, 2)[0] == INVALID_REQUEST
        # A transactional id goes to its transaction coordinator: none until FindCoordinator
        # has created __transaction_state.
        assert init_producer_id(wire, 1, "txn")[0] == NOT_COORDINATOR
        assert init_producer_id(wire, 5, "txn")[0] == NOT_COORDINATOR
        assert init_producer_id(wire, 2, "")[0] == INVALID_REQUEST
        broker.restart()
        with Wire(broker.port) as again:
            error, producer_id, _ = init_producer_id(again, 4)
            assert error == NONE and producer_id > max(ids), "ids are never handed out twice"


def test_produce_error_codes_of_idempotent_batches(tmp_path: Path) -> None:
    with InProcessBroker(tmp_path / "broker") as broker:
        topic = unique("idem-wire")
        create_topic(broker.bootstrap_servers, topic, 1)

        def batch(
            seq: int, n: int = 2, epoch: int = 0, pid: int = 77, transactional: bool = False
        ) -> bytes:
            return build_batch(
                [(None, b"%d/%d" % (epoch, seq + i), []) for i in range(n)],
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
                transactional=transactional,
            )

        with Wire(broker.port) as wire:

            def produce(data: bytes) -> tuple[int, int]:
                result = raw_produce(wire, topic, {0: data})[0]
                return result.error_code, result.base_offset

            assert produce(batch(0)) == (NONE, 0)
            assert produce(batch(2)) == (NONE, 2)
            assert produce(batch(0)) == (NONE, 0), "a retry gets its original offset"
            assert produce(batch(5))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
            assert produce(batch(3, n=1))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
            assert produce(batch(3, epoch=1))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
            assert produce(batch(0, epoch=1)) == (NONE, 4)
            assert produce(batch(4, epoch=0))[0] == INVALID_PRODUCER_EPOCH
            assert produce(batch(-1, pid=78))[0] == INVALID_RECORD
            # Transactional batches need a transactional id in the request (and WRITE on it).
            assert produce(batch(4, transactional=True))[0] == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            # A producer this partition does not know may start anywhere (KIP-360).
            assert produce(batch(1000, pid=79)) == (NONE, 6)
        assert log_end(broker.port, topic) == 8
        assert [r.value for r in consume(broker.bootstrap_servers, topic)] == [
            b"0/0",
            b"0/1",
            b"0/2",
            b"0/3",
            b"1/0",
            b"1/1",
            b"0/1000",
            b"0/1001",
        ]


def test_idle_producers_are_forgotten_after_the_expiration(tmp_path: Path) -> None:
    config = {
        "producer.id.expiration.ms": "1000",
        "producer.id.expiration.check.interval.ms": "100",
    }
    with InProcessBroker(tmp_path / "broker", config) as broker:
        topic = unique("idem-expiry")
        create_topic(broker.bootstrap_servers, topic, 1)
        now = int(datetime.datetime.now().timestamp() * 1000)
        data = build_batch(
            [(None, b"x", [])], timestamp_ms=now, producer_id=5, producer_epoch=0, base_sequence=0
        )
        with Wire(broker.port) as wire:
            assert raw_produce(wire, topic, {0: data})[0].base_offset == 0
            assert raw_produce(wire, topic, {0: data})[0].base_offset == 0
            assert broker.server is not None and broker.server.log_manager is not None
            plog = broker.server.log_manager.get_log(topic, 0)
            assert plog is not None
            wait_until(lambda: plog.producer_state.is_empty, 10, what="the idle producer to expire")
            # Forgotten: the same batch is now a first batch of an unknown producer.
            assert raw_produce(wire, topic, {0: data})[0].base_offset == 1
