"""Partition leadership, the produce and fetch paths, and delayed operations."""

from samsa.replica.delayed import DataWaiters
from samsa.replica.manager import (
    FetchPartitionRequest,
    FetchPartitionResponse,
    LeaderAndIsrPartition,
    ReplicaManager,
    TxnMarker,
)
from samsa.replica.partition import Partition, ProducePartitionResponse

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
