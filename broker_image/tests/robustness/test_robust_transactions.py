"""Transactions on the partitions, through a real broker: transactional batches produced on
the wire, WriteTxnMarkers sent as the transaction coordinator would, and what confluent-kafka
consumers see with isolation.level read_committed and read_uncommitted: committed records
only after their marker, aborted ones never (read_committed) and always (read_uncommitted),
the last stable offset held by an open transaction, the aborted transactions index across
clean and kill -9 restarts, and the error codes of bad markers and batches.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from kafka_support import BrokerProcess, Wire, consumer, create_topic, log_end, raw_produce, unique
from kio.index import load_request_schema
from txn_support import (
    INVALID_PRODUCER_EPOCH,
    INVALID_RECORD,
    INVALID_TXN_STATE,
    NONE,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TRANSACTION_COORDINATOR_FENCED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION,
    Marker,
    assert_reads,
    fetch,
    list_offset,
    plain,
    produce,
    read_until,
    txn_batch,
    write_markers,
)

from samsa.metadata import TopicPartition as SamsaTopicPartition
from samsa.protocol.control import build_end_txn_marker
from samsa.protocol.record_batch import build_batch
from samsa.testing import InProcessBroker, free_port

pytestmark = pytest.mark.timeout(180)


NO_VERIFICATION = {"transaction.partition.verification.enable": False}
NO_VERIFICATION_PROPS = {"transaction.partition.verification.enable": "false"}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    # These tests play the transaction coordinator themselves (their own producer ids and
    # WriteTxnMarkers), so the leader must not ask the real one (KIP-890 verification).
    with InProcessBroker(tmp_path / "broker", NO_VERIFICATION) as b:
        yield b


# -- the scenarios ----------------------------------------------------------------------------


def test_committed_records_appear_with_their_marker_and_aborted_ones_never(
    broker: InProcessBroker,
) -> None:
    topic = unique("txn")
    create_topic(broker.bootstrap_servers, topic, 1)
    with Wire(broker.port) as wire:
        assert produce(wire, topic, plain(b"before")) == (NONE, 0)
        assert produce(wire, topic, txn_batch(100, 0, [b"a1", b"a2"])) == (NONE, 1)
        assert produce(wire, topic, txn_batch(200, 0, [b"b1"])) == (NONE, 3)
        assert produce(wire, topic, txn_batch(100, 2, [b"a3"])) == (NONE, 4)
        assert produce(wire, topic, plain(b"after")) == (NONE, 5)

        # Both transactions are open: the LSO is where the first one starts.
        assert list_offset(wire, topic, READ_UNCOMMITTED) == 6
        assert list_offset(wire, topic, READ_COMMITTED) == 1
        held = fetch(wire, topic, 1, READ_COMMITTED)
        assert (held.high_watermark, held.last_stable_offset, held.records) == (6, 1, b"")
        assert read_until(broker.bootstrap_servers, topic, "read_committed", b"before") == [
            b"before"
        ]

        errors = write_markers(
            wire,
            [Marker(100, True, {topic: [0]}), Marker(200, False, {topic: [0]})],
        )
        assert errors == {(100, topic, 0): NONE, (200, topic, 0): NONE}
        assert log_end(broker.port, topic) == 8, "one marker each"
        assert list_offset(wire, topic, READ_COMMITTED) == 8
        done = fetch(wire, topic, 0, READ_COMMITTED)
        assert done.last_stable_offset == 8
        assert done.aborted == [(200, 3)]
        assert fetch(wire, topic, 0, READ_UNCOMMITTED).aborted is None

        assert produce(wire, topic, plain(b"last")) == (NONE, 8)
    assert_reads(
        broker.bootstrap_servers,
        topic,
        [b"before", b"a1", b"a2", b"a3", b"after", b"last"],
        [b"before", b"a1", b"a2", b"b1", b"a3", b"after", b"last"],
    )


def test_a_parked_read_committed_fetch_wakes_when_the_marker_moves_the_lso(
    broker: InProcessBroker,
) -> None:
    topic = unique("txn-wake")
    create_topic(broker.bootstrap_servers, topic, 1)
    with Wire(broker.port) as wire:
        produce(wire, topic, txn_batch(100, 0, [b"t1", b"t2"]))
        c = consumer(broker.bootstrap_servers, **{"isolation.level": "read_committed"})
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            assert [m for m in c.consume(10, 1.0) if m.error() is None] == []
            assert write_markers(wire, [Marker(100, True, {topic: [0]})]) == {(100, topic, 0): NONE}
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < 2:
                assert time.monotonic() < deadline, f"read {got} only"
                got += [m.value() for m in c.consume(10, 0.5) if m.error() is None]
            assert got == [b"t1", b"t2"]
        finally:
            c.close()


def test_bad_markers_and_batches_get_kafkas_error_codes(broker: InProcessBroker) -> None:
    topic = unique("txn-bad")
    create_topic(broker.bootstrap_servers, topic, 1)
    with Wire(broker.port) as wire:
        assert produce(wire, topic, txn_batch(100, 0, [b"x"], epoch=3)) == (NONE, 0)
        # Transactional batches need a transactional id in the request.
        assert produce(wire, topic, txn_batch(100, 1, [b"y"], epoch=3), txn_id=None)[0] == (
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
        # A plain batch from a producer with a transaction open.
        plain_idem = build_batch(
            [(None, b"z", [])], producer_id=100, producer_epoch=3, base_sequence=1
        )
        assert produce(wire, topic, plain_idem)[0] == INVALID_TXN_STATE
        # An older producer epoch, in a batch and in a marker.
        assert (
            produce(wire, topic, txn_batch(100, 0, [b"old"], epoch=2))[0] == INVALID_PRODUCER_EPOCH
        )
        old = write_markers(wire, [Marker(100, True, {topic: [0]}, producer_epoch=2)])
        assert old == {(100, topic, 0): INVALID_PRODUCER_EPOCH}
        # Clients may not write markers themselves.
        forged = build_end_txn_marker(100, 3, True, 0, 1000)
        assert produce(wire, topic, forged)[0] == INVALID_RECORD
        # Without a transactional id the transactional attribute is refused first, as Kafka.
        assert raw_produce(wire, topic, {0: forged})[0].error_code == (
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
        # Partitions not hosted here, next to one that is.
        mixed = write_markers(
            wire,
            [
                Marker(
                    100,
                    False,
                    {topic: [0, 7], "no-such-topic": [0]},
                    producer_epoch=3,
                    coordinator_epoch=5,
                )
            ],
            version=0,
        )
        assert mixed == {
            (100, topic, 0): NONE,
            (100, topic, 7): UNKNOWN_TOPIC_OR_PARTITION,
            (100, "no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION,
        }
        # A marker from an older coordinator epoch than the last one.
        zombie = write_markers(
            wire, [Marker(100, True, {topic: [0]}, producer_epoch=3, coordinator_epoch=4)]
        )
        assert zombie == {(100, topic, 0): TRANSACTION_COORDINATOR_FENCED}
        assert log_end(broker.port, topic) == 2, "only the record and the abort marker"
        assert produce(wire, topic, plain(b"end")) == (NONE, 2)
    assert_reads(broker.bootstrap_servers, topic, [b"end"], [b"x", b"end"])


def test_markers_on_consumer_offsets_reach_the_group_coordinator_seam(
    broker: InProcessBroker,
) -> None:
    assert broker.server is not None
    manager = broker.server.replica_manager
    assert manager is not None
    seen: list[tuple[SamsaTopicPartition, int, bool]] = []
    manager.on_txn_marker = lambda tp, producer_id, committed: seen.append(
        (tp, producer_id, committed)
    )
    offsets = SamsaTopicPartition("__consumer_offsets", 0)
    assert manager.get_partition(offsets) is not None, "the offsets topic is hosted here"
    topic = unique("txn-seam")
    create_topic(broker.bootstrap_servers, topic, 1)
    with Wire(broker.port) as wire:
        errors = write_markers(wire, [Marker(300, True, {"__consumer_offsets": [0], topic: [0]})])
        assert set(errors.values()) == {NONE}
        write_markers(wire, [Marker(301, False, {"__consumer_offsets": [0]})])
    assert seen == [(offsets, 300, True), (offsets, 301, False)]


# -- restarts -------------------------------------------------------------------------------


def _abort_one_commit_one_leave_one_open(wire: Wire, topic: str) -> None:
    assert produce(wire, topic, txn_batch(100, 0, [b"c1", b"c2"])) == (NONE, 0)
    assert produce(wire, topic, txn_batch(200, 0, [b"x1", b"x2"])) == (NONE, 2)
    assert write_markers(
        wire, [Marker(100, True, {topic: [0]}), Marker(200, False, {topic: [0]})]
    ) == {(100, topic, 0): NONE, (200, topic, 0): NONE}
    assert produce(wire, topic, txn_batch(300, 0, [b"o1"])) == (NONE, 6)
    assert list_offset(wire, topic, READ_COMMITTED) == 6


def _after_restart(port: int, bootstrap: str, topic: str, data_dir: Path) -> None:
    assert list(data_dir.rglob(f"{topic}-0/*.txnindex")), "the aborted transactions index"
    with Wire(port) as wire:
        assert list_offset(wire, topic, READ_COMMITTED) == 6, "the open one still holds the LSO"
        assert fetch(wire, topic, 0, READ_COMMITTED).aborted == [(200, 2)]
        assert write_markers(wire, [Marker(300, True, {topic: [0]})]) == {(300, topic, 0): NONE}
        assert produce(wire, topic, plain(b"end")) == (NONE, 8)
    assert_reads(
        bootstrap,
        topic,
        [b"c1", b"c2", b"o1", b"end"],
        [b"c1", b"c2", b"x1", b"x2", b"o1", b"end"],
    )


def test_a_clean_restart_keeps_aborted_and_open_transactions(broker: InProcessBroker) -> None:
    topic = unique("txn-restart")
    create_topic(broker.bootstrap_servers, topic, 1)
    with Wire(broker.port) as wire:
        _abort_one_commit_one_leave_one_open(wire, topic)
    broker.restart()
    _after_restart(broker.port, broker.bootstrap_servers, topic, broker.data_dir)


def test_kill_9_keeps_aborted_and_open_transactions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = BrokerProcess(data, free_port(), NO_VERIFICATION_PROPS)
    try:
        broker.start()
        topic = unique("txn-kill")
        create_topic(broker.bootstrap_servers, topic, 1)
        with Wire(broker.port) as wire:
            _abort_one_commit_one_leave_one_open(wire, topic)
        broker.kill()
        broker.start()
        _after_restart(broker.port, broker.bootstrap_servers, topic, data)
    finally:
        broker.reap()


def test_kill_9_with_the_index_lost_rebuilds_it_from_the_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # No flush before the kill: recovery replays the whole partition.
    broker = BrokerProcess(
        data, free_port(), {**NO_VERIFICATION_PROPS, "log.flush.interval.ms": str(10**9)}
    )
    try:
        broker.start()
        topic = unique("txn-rebuild")
        create_topic(broker.bootstrap_servers, topic, 1)
        with Wire(broker.port) as wire:
            _abort_one_commit_one_leave_one_open(wire, topic)
        broker.kill()
        for index in data.rglob(f"{topic}-0/*.txnindex"):
            index.unlink()
        broker.start()
        _after_restart(broker.port, broker.bootstrap_servers, topic, data)
    finally:
        broker.reap()


def test_describe_producers_shows_open_transactions(broker: InProcessBroker) -> None:
    topic = unique("txn-producers")
    create_topic(broker.bootstrap_servers, topic, 1)
    cls = load_request_schema(61, 0)
    module = __import__(cls.__module__, fromlist=["TopicRequest"])
    with Wire(broker.port) as wire:
        assert produce(wire, topic, txn_batch(100, 0, [b"a", b"b"], epoch=2)) == (NONE, 0)
        assert produce(wire, topic, txn_batch(200, 0, [b"c"])) == (NONE, 2)
        assert write_markers(wire, [Marker(200, True, {topic: [0]}, coordinator_epoch=7)]) == {
            (200, topic, 0): NONE
        }
        body = cls(topics=(module.TopicRequest(name=topic, partition_indexes=(0, 5)),))
        (t,) = wire.request(61, 0, body).topics
    by_partition = {p.partition_index: p for p in t.partitions}
    assert int(by_partition[5].error_code.value) == UNKNOWN_TOPIC_OR_PARTITION
    producers = {
        p.producer_id: (
            p.producer_epoch,
            p.last_sequence,
            p.coordinator_epoch,
            p.current_txn_start_offset,
        )
        for p in by_partition[0].active_producers
    }
    assert producers == {100: (2, 1, -1, 0), 200: (0, 0, 7, -1)}
