"""Partition leadership, the produce and fetch paths, and delayed operations."""

from samsa.replica.delayed import DataWaiters
from samsa.replica.fetch_path import FetchPartitionRequest, FetchPartitionResponse
from samsa.replica.leadership import LeaderAndIsrPartition
from samsa.replica.partition import Partition, ProducePartitionResponse
from samsa.replica.replica_manager import ReplicaManager
from samsa.replica.txn_marker_appends import TxnMarker

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
