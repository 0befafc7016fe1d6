"""The records of __transaction_state, byte-compatible with Apache Kafka: their formats, and
what a transactional id's metadata becomes on the log and comes back from it.

Kafka's ``TransactionLogKey.json`` (version 0: the transactional id) and
``TransactionLogValue.json`` (v0, and v1, its flexible form with tagged fields). We write what
Kafka 3.x writes for clients without KIP-890's second part: key v0, value v0, the partitions
null in state Empty. Both value versions are read. The TransactionStateManager writes and
replays only through ``transaction_record`` and ``read_record``.
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.coordinator.group_records import RecordFormatError, _Reader, _Writer
from samsa.coordinator.group_store import Record
from samsa.coordinator.transaction.metadata import (
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from samsa.metadata.model import TopicPartition

KEY_VERSION = 0
VALUE_VERSION = 0
MAX_VALUE_VERSION = 1
FLEXIBLE_VERSION = 1


@dataclass(frozen=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    # Kafka's TransactionState id (``TransactionState.id``).
    transaction_status: int
    # topic -> partitions; None for a transaction in state Empty.
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1  # v1 tagged
    next_producer_id: int = -1  # v1 tagged
    client_transaction_version: int = 0  # v1 tagged


def encode_key(transactional_id: str) -> bytes:
    w = _Writer(flexible=False)
    w.i16(KEY_VERSION)
    w.string(transactional_id)
    return w.getvalue()


def decode_key(data: bytes | bytearray | memoryview) -> str | None:
    """The transactional id of a key; None for a key version this broker does not know."""
    r = _Reader(data)
    if r.i16() != KEY_VERSION:
        return None
    return r.required_string()


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise RecordFormatError(f"transaction log value version {version}")
    w = _Writer(flexible=version >= FLEXIBLE_VERSION)
    w.i16(version)
    w.i64(value.producer_id)
    w.parts.append(value.producer_epoch.to_bytes(2, "big", signed=True))
    w.i32(value.transaction_timeout_ms)
    w.parts.append(value.transaction_status.to_bytes(1, "big", signed=True))
    if value.partitions is None:
        if w.flexible:
            w.uvarint(0)
        else:
            w.i32(-1)
    else:
        w.array_len(len(value.partitions))
        for topic, partitions in value.partitions:
            w.string(topic)
            w.array_len(len(partitions))
            for p in partitions:
                w.i32(p)
            w.tagged_fields()
    w.i64(value.last_update_timestamp_ms)
    w.i64(value.start_timestamp_ms)
    if w.flexible:
        tags: list[tuple[int, bytes]] = []
        if value.previous_producer_id != -1:
            tags.append((0, value.previous_producer_id.to_bytes(8, "big", signed=True)))
        if value.next_producer_id != -1:
            tags.append((1, value.next_producer_id.to_bytes(8, "big", signed=True)))
        if value.client_transaction_version != 0:
            tags.append((2, value.client_transaction_version.to_bytes(2, "big", signed=True)))
        w.uvarint(len(tags))
        for tag, data in tags:
            w.uvarint(tag)
            w.uvarint(len(data))
            w.parts.append(data)
    return w.getvalue()


def decode_value(data: bytes | bytearray | memoryview) -> TransactionLogValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise RecordFormatError(f"unknown transaction log value version {version}")
    r.flexible = version >= FLEXIBLE_VERSION
    producer_id = r.i64()
    producer_epoch = r.i16()
    timeout = r.i32()
    status = int.from_bytes(r._take(1), "big", signed=True)
    count = r.uvarint() - 1 if r.flexible else r.i32()
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None = None
    if count >= 0:
        topics = []
        for _ in range(count):
            topic = r.required_string()
            ids = tuple(r.i32() for _ in range(r.array_len()))
            r.skip_tagged_fields()
            topics.append((topic, ids))
        partitions = tuple(topics)
    last_update = r.i64()
    start = r.i64()
    previous = next_id = -1
    client_version = 0
    if r.flexible:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            raw = r._take(r.uvarint())
            if tag == 0:
                previous = int.from_bytes(raw, "big", signed=True)
            elif tag == 1:
                next_id = int.from_bytes(raw, "big", signed=True)
            elif tag == 2:
                client_version = int.from_bytes(raw, "big", signed=True)
    return TransactionLogValue(
        producer_id,
        producer_epoch,
        timeout,
        status,
        partitions,
        last_update,
        start,
        previous,
        next_id,
        client_version,
    )


# ---------------------------------------------------------------- transactional ids


def log_value(transit: TxnTransitMetadata) -> TransactionLogValue:
    by_topic: dict[str, list[int]] = {}
    for tp in transit.topic_partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    partitions = (
        None
        if transit.txn_state is TransactionState.EMPTY
        else tuple((t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))
    )
    return TransactionLogValue(
        producer_id=transit.producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms,
        transaction_status=int(transit.txn_state),
        partitions=partitions,
        last_update_timestamp_ms=transit.txn_last_update_timestamp_ms,
        start_timestamp_ms=transit.txn_start_timestamp_ms,
    )


def metadata_from_value(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    partitions = {TopicPartition(t, p) for t, ps in value.partitions or () for p in ps}
    return TransactionMetadata(
        transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        txn_timeout_ms=value.transaction_timeout_ms,
        state=TransactionState(value.transaction_status),
        topic_partitions=partitions,
        txn_start_timestamp_ms=value.start_timestamp_ms,
        txn_last_update_timestamp_ms=value.last_update_timestamp_ms,
        last_producer_id=value.previous_producer_id,
    )


def transaction_record(transactional_id: str, transit: TxnTransitMetadata) -> Record:
    """The record of a prepared transition; Dead is the transactional id's tombstone."""
    value = None if transit.txn_state is TransactionState.DEAD else encode_value(log_value(transit))
    return encode_key(transactional_id), value


def read_record(key: bytes, value: bytes | None) -> tuple[str, TransactionMetadata | None] | None:
    """A replayed record: the transactional id and its metadata (None for a tombstone); None
    for a key version this broker does not know. Raises ValueError if it cannot be read."""
    txn_id = decode_key(key)
    if txn_id is None:
        return None
    if value is None:
        return txn_id, None
    return txn_id, metadata_from_value(txn_id, decode_value(value))
