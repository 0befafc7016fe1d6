"""The persistence seam: where the coordinator writes __consumer_offsets records.

The coordinator never sees a log. The broker gives it a ``GroupStore`` whose ``append``
returns once the records are durable (appended to the ``__consumer_offsets`` partition and
acknowledged by all in-sync replicas) and raises otherwise. A failure is mapped to the error
Kafka would return, from the produce-path error the store reports.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from samsa.protocol.errors import ErrorCode, KafkaApiError

Record = tuple[bytes, bytes | None]


class TxnRecord(NamedTuple):
    """A record of a transactional batch: the producer it belongs to until its marker."""

    producer_id: int
    key: bytes
    value: bytes | None


class TxnMarker(NamedTuple):
    """A control batch: the producer's transaction ends, committed or aborted."""

    producer_id: int
    committed: bool


class GroupStore(Protocol):
    async def append(
        self,
        partition: int,
        records: list[Record],
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        """Append (key, value) records, a None value being a tombstone; return when durable.
        With a producer id, as one transactional batch of that producer (TxnOffsetCommit).

        Raise ``KafkaApiError`` with the produce error (NOT_LEADER_OR_FOLLOWER,
        NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, ...) on failure.
        """
        ...


def storage_error_code(exc: BaseException) -> ErrorCode:
    """The produce-path error a store failure stands for."""
    if isinstance(exc, KafkaApiError):
        return exc.code
    if isinstance(exc, TimeoutError):
        return ErrorCode.request_timed_out
    if isinstance(exc, OSError):
        return ErrorCode.kafka_storage_error
    return ErrorCode.unknown_server_error


def offset_commit_error(code: ErrorCode) -> ErrorCode:
    """Kafka's ``GroupMetadataManager.maybeConvertOffsetCommitError``."""
    if code in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
    ):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if code in (
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_fetch_size,
    ):
        return ErrorCode.invalid_commit_offset_size
    if code is ErrorCode.network_exception:
        return ErrorCode.coordinator_load_in_progress
    return code


def group_store_error(code: ErrorCode) -> ErrorCode:
    """The mapping in Kafka's ``GroupMetadataManager.storeGroup`` (JoinGroup/SyncGroup)."""
    if code in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
    ):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if code is ErrorCode.request_timed_out:
        return ErrorCode.rebalance_in_progress
    if code in (
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_fetch_size,
    ):
        return ErrorCode.unknown_server_error
    return code
