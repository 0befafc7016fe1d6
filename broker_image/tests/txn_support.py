"""Transactions on the wire, for the broker's tests: transactional batches, WriteTxnMarkers as
a transaction coordinator sends it (v0 and v1), ListOffsets and Fetch with an isolation
level, and confluent-kafka consumers reading with `isolation.level`."""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Mapping, Sequence

from confluent_kafka import KafkaError, TopicPartition
from kafka_support import Wire, consumer, produce_request
from kio.index import load_request_schema

from samsa.protocol.controller_apis import (
    WritableTxnMarkerTopicV0,
    WritableTxnMarkerV0,
    WriteTxnMarkersRequestV0,
)
from samsa.protocol.messages import decode_response, encode_request
from samsa.protocol.record_batch import build_batch

NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
INVALID_RECORD = 87
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST = -1


def txn_batch(pid: int, seq: int, values: Sequence[bytes], epoch: int = 0) -> bytes:
    return build_batch(
        [(None, v, []) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )


def produce(
    wire: Wire, topic: str, data: bytes, partition: int = 0, txn_id: str | None = "app"
) -> tuple[int, int]:
    """(error code, base offset) of one partition's produce, with a transactional id."""
    request = dataclasses.replace(
        produce_request(topic, {partition: data}, acks=-1), transactional_id=txn_id
    )
    response = wire.request(0, 9, request)
    (p,) = response.responses[0].partition_responses
    return int(p.error_code.value), p.base_offset


@dataclasses.dataclass
class Marker:
    producer_id: int
    committed: bool
    partitions: Mapping[str, Sequence[int]]
    producer_epoch: int = 0
    coordinator_epoch: int = 0


def write_markers(
    wire: Wire, markers: Sequence[Marker], version: int = 1
) -> dict[tuple[int, str, int], int]:
    """Send WriteTxnMarkers; (producer id, topic, partition) -> error code."""
    cls = load_request_schema(27, 1)
    module = __import__(cls.__module__, fromlist=["WritableTxnMarker"])
    body = cls(
        markers=tuple(
            module.WritableTxnMarker(
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
                transaction_result=m.committed,
                topics=tuple(
                    module.WritableTxnMarkerTopic(name=t, partition_indexes=tuple(ps))
                    for t, ps in m.partitions.items()
                ),
                coordinator_epoch=m.coordinator_epoch,
            )
            for m in markers
        )
    )
    if version == 1:
        response = wire.request(27, 1, body)
    else:
        # Version 0 (Kafka 3.9's other one) is Samsa's own dataclass: kio has no v0.
        v0 = WriteTxnMarkersRequestV0(
            markers=tuple(
                WritableTxnMarkerV0(
                    producer_id=m.producer_id,
                    producer_epoch=m.producer_epoch,
                    transaction_result=m.transaction_result,
                    topics=tuple(
                        WritableTxnMarkerTopicV0(name=t.name, partition_indexes=t.partition_indexes)
                        for t in m.topics
                    ),
                    coordinator_epoch=m.coordinator_epoch,
                )
                for m in body.markers
            )
        )
        wire.send(encode_request(27, 0, 1, "coordinator", v0))
        _, response = decode_response(27, 0, wire.read_frame())
    return {
        (m.producer_id, t.name, p.partition_index): int(p.error_code.value)
        for m in response.markers
        for t in m.topics
        for p in t.partitions
    }


def list_offset(wire: Wire, topic: str, isolation: int, partition: int = 0) -> int:
    cls = load_request_schema(2, 7)
    module = __import__(cls.__module__, fromlist=["ListOffsetsTopic"])
    body = cls(
        replica_id=-1,
        isolation_level=isolation,
        topics=(
            module.ListOffsetsTopic(
                name=topic,
                partitions=(
                    module.ListOffsetsPartition(
                        partition_index=partition, current_leader_epoch=-1, timestamp=LATEST
                    ),
                ),
            ),
        ),
    )
    (p,) = wire.request(2, 7, body).topics[0].partitions
    assert int(p.error_code.value) == NONE
    return int(p.offset)


@dataclasses.dataclass
class Fetched:
    high_watermark: int
    last_stable_offset: int
    aborted: list[tuple[int, int]] | None
    records: bytes


def fetch(wire: Wire, topic: str, offset: int, isolation: int) -> Fetched:
    """One Fetch v11 of partition 0, answered at once (max_wait 0)."""
    cls = load_request_schema(1, 11)
    module = __import__(cls.__module__, fromlist=["FetchTopic", "FetchPartition"])
    body = cls(
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=(
            module.FetchTopic(
                topic=topic,
                partitions=(
                    module.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    (p,) = wire.request(1, 11, body).responses[0].partitions
    assert int(p.error_code.value) == NONE
    aborted = (
        None
        if p.aborted_transactions is None
        else [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
    )
    return Fetched(p.high_watermark, p.last_stable_offset, aborted, bytes(p.records or b""))


def read_until(
    bootstrap: str, topic: str, isolation: str, last: bytes, timeout: float = 30.0
) -> list[bytes]:
    """Every value a confluent-kafka consumer with `isolation.level` reads from partition 0,
    from offset 0 until it reads `last` (a record produced after those under test)."""
    c = consumer(bootstrap, **{"isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        while not got or got[-1] != last:
            assert time.monotonic() < deadline, f"{isolation}: only read {got}"
            for msg in c.consume(100, 0.5):
                error = msg.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, str(error)
                    continue
                got.append(msg.value() or b"")
        return got
    finally:
        c.close()


def assert_reads(
    bootstrap: str, topic: str, committed: list[bytes], everything: list[bytes]
) -> None:
    assert read_until(bootstrap, topic, "read_committed", committed[-1]) == committed
    assert read_until(bootstrap, topic, "read_uncommitted", everything[-1]) == everything


def plain(value: bytes) -> bytes:
    return build_batch([(None, value, [])])
