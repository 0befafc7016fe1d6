"""Partition leadership, the produce and fetch paths, and delayed operations."""

from samsa.replica.delayed import DataWaiters
from samsa.replica.partition import Partition, ProducePartitionResponse
from samsa.replica.replica_manager import (
    FetchPartitionRequest,
    FetchPartitionResponse,
    LeaderAndIsrPartition,
    ReplicaManager,
    TxnMarker,
)

__all__ = [
    "DataWaiters",
    "FetchPartitionRequest",
    "FetchPartitionResponse",
    "LeaderAndIsrPartition",
    "Partition",
    "ProducePartitionResponse",
    "ReplicaManager",
    "TxnMarker",
]
