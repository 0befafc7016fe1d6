"""Writing a transaction's markers to its partitions' leaders (Kafka's
TransactionMarkerChannelManager), through the ``MarkerWriter`` seam the broker provides.

Partitions are grouped by their leader and sent WriteTxnMarkers together; a partition whose
leader is unknown or that answers a retriable error is sent again after a short backoff, for as
long as this broker coordinates the transaction. A fenced coordinator stops; a deleted topic
needs no marker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TxnMarkerEntry:
    """One marker of WriteTxnMarkers: a producer's transaction ends on these partitions."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    committed: bool
    partitions: tuple[TopicPartition, ...]


class MarkerWriter(Protocol):
    def leader_of(self, tp: TopicPartition) -> int | None:
        """The partition's leader as this broker knows it; None if it has none now."""
        ...

    def topic_exists(self, topic: str) -> bool: ...

    async def write_markers(
        self, broker_id: int, markers: list[TxnMarkerEntry], timeout_s: float
    ) -> dict[TopicPartition, ErrorCode]:
        """Send WriteTxnMarkers to a broker; the error of each partition (one producer per
        call here). Raise on a connection failure: every partition is retried."""
        ...


_RETRIABLE = frozenset(
    {
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_leader_or_follower,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
        ErrorCode.kafka_storage_error,
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.unknown_server_error,
    }
)
_FENCED = frozenset({ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced})


async def write_txn_markers(
    writer: MarkerWriter,
    entry: TxnMarkerEntry,
    still_coordinator: Callable[[], bool],
    on_partition_done: Callable[[TopicPartition], None],
    backoff_s: float,
    timeout_s: float,
) -> bool:
    """Write the marker on every partition of ``entry``. True once all have it; False if this
    broker stopped coordinating the transaction or was fenced (a newer coordinator, or a
    newer producer epoch, finishes it)."""
    remaining = set(entry.partitions)
    rounds = 0
    while remaining:
        rounds += 1
        if not still_coordinator():
            return False
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp in sorted(remaining):
            leader = writer.leader_of(tp)
            if leader is None:
                if not writer.topic_exists(tp.topic):
                    remaining.discard(tp)
                    on_partition_done(tp)
                continue
            by_broker.setdefault(leader, []).append(tp)

        async def send(broker: int, tps: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
            marker = TxnMarkerEntry(
                entry.producer_id,
                entry.producer_epoch,
                entry.coordinator_epoch,
                entry.committed,
                tuple(sorted(tps)),
            )
            try:
                return await writer.write_markers(broker, [marker], timeout_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("WriteTxnMarkers to broker %d failed: %r; retrying", broker, exc)
                return dict.fromkeys(tps, ErrorCode.network_exception)

        answers = await asyncio.gather(*(send(b, tps) for b, tps in by_broker.items()))
        failed: dict[TopicPartition, ErrorCode] = {}
        for answer in answers:
            failed.update({tp: e for tp, e in answer.items() if e is not ErrorCode.none})
        # Retries are normal while leadership moves; a transaction that stays stuck says why.
        if failed and rounds % 50 == 1:
            log.info(
                "markers of producer %d epoch %d: %d partitions still to write (%s); retrying",
                entry.producer_id,
                entry.producer_epoch,
                len(remaining),
                ", ".join(
                    f"{tp.topic}-{tp.partition}: {e.name}" for tp, e in sorted(failed.items())[:5]
                ),
            )
        for answer in answers:
            for tp, error in answer.items():
                if tp not in remaining:
                    continue
                if error is ErrorCode.none:
                    remaining.discard(tp)
                    on_partition_done(tp)
                elif error in _FENCED:
                    log.warning(
                        "marker of producer %d epoch %d on %s: %s; leaving it to the newer "
                        "coordinator or producer",
                        entry.producer_id,
                        entry.producer_epoch,
                        tp,
                        error.name,
                    )
                    return False
                elif error is ErrorCode.unknown_topic_or_partition and not writer.topic_exists(
                    tp.topic
                ):
                    remaining.discard(tp)
                    on_partition_done(tp)
                elif error not in _RETRIABLE:
                    log.error(
                        "marker of producer %d on %s failed: %s; retrying",
                        entry.producer_id,
                        tp,
                        error.name,
                    )
        if remaining:
            await asyncio.sleep(backoff_s)
    return True
