"""The MarkerWriter of a broker: WriteTxnMarkers to each partition's leader.

Markers for partitions this broker leads are written in-process (the replica manager's
``write_txn_markers``, which WriteTxnMarkers' handler also calls); the others go over the
inter-broker connections as WriteTxnMarkers v1, as Kafka's TransactionMarkerChannelManager
sends them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samsa.client import ConnectionPool
from samsa.coordinator.transaction import TxnMarkerEntry
from samsa.metadata import MetadataCache, TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import build, request_type
from samsa.replica import ReplicaManager, TxnMarker

WRITE_TXN_MARKERS = 27
WRITE_TXN_MARKERS_VERSION = 1


class BrokerMarkerWriter:
    def __init__(
        self,
        broker_id: int,
        cache: MetadataCache,
        replica_manager: ReplicaManager,
        pool: Callable[[], ConnectionPool | None],
    ) -> None:
        self.broker_id = broker_id
        self.cache = cache
        self.replica_manager = replica_manager
        self._pool = pool

    def leader_of(self, tp: TopicPartition) -> int | None:
        state = self.cache.partition_state(tp.topic, tp.partition)
        if state is None or state.leader < 0:
            return None
        return state.leader

    def topic_exists(self, topic: str) -> bool:
        return self.cache.topic(topic) is not None

    async def write_markers(
        self, broker_id: int, markers: list[TxnMarkerEntry], timeout_s: float
    ) -> dict[TopicPartition, ErrorCode]:
        if broker_id == self.broker_id:
            answers = await self.replica_manager.write_txn_markers(
                [
                    TxnMarker(
                        m.producer_id,
                        m.producer_epoch,
                        m.committed,
                        m.coordinator_epoch,
                        list(m.partitions),
                    )
                    for m in markers
                ],
                timeout_s,
            )
            out: dict[TopicPartition, ErrorCode] = {}
            for answer in answers:
                out.update(answer)
            return out
        pool = self._pool()
        if pool is None:
            raise ConnectionError(f"no connection to broker {broker_id}")
        request = build(
            request_type(WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION),
            {"markers": [_marker(m) for m in markers]},
        )
        response = await pool.request(
            broker_id, WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, request, timeout_s
        )
        result: dict[TopicPartition, ErrorCode] = {}
        for m in response.markers:
            for t in m.topics:
                for p in t.partitions:
                    result[TopicPartition(t.name, p.partition_index)] = ErrorCode(p.error_code)
        return result


def _marker(m: TxnMarkerEntry) -> dict[str, Any]:
    by_topic: dict[str, list[int]] = {}
    for tp in m.partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return {
        "producer_id": m.producer_id,
        "producer_epoch": m.producer_epoch,
        "transaction_result": m.committed,
        "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
        "coordinator_epoch": m.coordinator_epoch,
    }
