"""DescribeLogDirs (35): this broker's log directory and each partition's size in it.

With the volume's total and usable bytes. A broker has one log directory here, and no future
logs (AlterReplicaLogDirs is not served)."""

from __future__ import annotations

import shutil
from typing import Any

from samsa.handlers.authorization import cluster_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.security.acl import AclOperation

KEY = 35
MIN_VERSION, MAX_VERSION = 1, 4


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> dict[str, Any]:
    if not cluster_allowed(services, ctx, AclOperation.DESCRIBE):
        # As Kafka: no directories, and (v3+) CLUSTER_AUTHORIZATION_FAILED.
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.cluster_authorization_failed,
            "results": [],
        }
    replicas = services.replica_manager
    logs = replicas.log_manager.logs
    if request.topics is None:
        wanted = sorted(logs)
    else:
        asked = {(t.topic, p) for t in request.topics for p in t.partitions}
        wanted = sorted(key for key in asked if key in logs)
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, index in wanted:
        log = logs[(topic, index)]
        partition = replicas.get_partition(TopicPartition(topic, index))
        end = log.log_end_offset
        high_watermark = partition.high_watermark if partition is not None else end
        topics.setdefault(topic, []).append(
            {
                "partition_index": index,
                "partition_size": log.size_in_bytes,
                # As Kafka: how far the high watermark is past this replica's log end.
                "offset_lag": max(high_watermark - end, 0),
                "is_future_key": False,
            }
        )
    folder = replicas.log_manager.log_dir.resolve()
    volume = shutil.disk_usage(folder)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "results": [
            {
                "error_code": ErrorCode.none,
                "log_dir": str(folder),
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "total_bytes": volume.total,
                "usable_bytes": volume.free,
            }
        ],
    }
