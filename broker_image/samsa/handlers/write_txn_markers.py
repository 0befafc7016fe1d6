"""WriteTxnMarkers (27): the transaction coordinator ends a transaction on the partitions
this broker leads.

For each marker and partition: a control batch (COMMIT or ABORT, with the coordinator epoch)
is appended as leader with the producer's id and epoch, and the partition is answered once
its ISR has it, as for acks=all.  A partition not hosted here is UNKNOWN_TOPIC_OR_PARTITION,
one this broker does not lead NOT_LEADER_OR_FOLLOWER, a producer epoch older than the
partition has seen INVALID_PRODUCER_EPOCH, and an older coordinator epoch
TRANSACTION_COORDINATOR_FENCED.  Only brokers send it: CLUSTER_ACTION on the cluster (or
ALTER, as Kafka 3.9 also accepts), else CLUSTER_AUTHORIZATION_FAILED for every partition.
"""

from __future__ import annotations

from typing import Any

from samsa.handlers.authorization import cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.replica import TxnMarker
from samsa.security.acl import AclOperation

KEY = 27
MIN_VERSION, MAX_VERSION = 0, 1


def _markers(request: Any) -> list[TxnMarker]:
    return [
        TxnMarker(
            m.producer_id,
            m.producer_epoch,
            bool(m.transaction_result),
            m.coordinator_epoch,
            [
                TopicPartition(t.name, p)
                for t in m.topics
                for p in dict.fromkeys(t.partition_indexes)
            ],
        )
        for m in request.markers
    ]


def _response(markers: list[TxnMarker], codes: list[dict[TopicPartition, ErrorCode]]) -> Any:
    results = []
    for marker, by_tp in zip(markers, codes, strict=True):
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, code in by_tp.items():
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "error_code": code}
            )
        results.append(
            {
                "producer_id": marker.producer_id,
                "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
            }
        )
    return {"markers": results}


async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    markers = _markers(request)
    if not (
        cluster_allowed(services, ctx, AclOperation.ALTER)
        or cluster_allowed(services, ctx, AclOperation.CLUSTER_ACTION)
    ):
        denied = ErrorCode.cluster_authorization_failed
        return _response(markers, [dict.fromkeys(m.partitions, denied) for m in markers])
    timeout_s = services.config["request.timeout.ms"] / 1000
    codes = await services.replica_manager.write_txn_markers(markers, timeout_s)
    return _response(markers, codes)
