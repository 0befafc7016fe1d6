"""ReplicaManager: the partitions this broker hosts, and the paths through them.

One object for the rest of the broker (the handlers, the broker's wiring, the coordinators'
stores), put together from one mixin per seam of Kafka's ReplicaManager, each over the shared
state of ``HostedPartitions`` (``hosted_partitions``: the partitions, the hooks, the
controller epoch's fence):

- ``leadership``: LeaderAndIsr and StopReplica, the ISR check;
- ``produce_path``: appends and the acks=all wait (DelayedProduce), DescribeProducers;
- ``txn_marker_appends``: WriteTxnMarkers' appends;
- ``fetch_path``: reads and the long polls (DelayedFetch);
- ``offset_requests``: ListOffsets and DeleteRecords.
"""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode
from samsa.replica.fetch_path import FetchPath
from samsa.replica.leadership import Leadership
from samsa.replica.offset_requests import OffsetRequests
from samsa.replica.produce_path import ProducePath
from samsa.replica.txn_marker_appends import TxnMarkerAppends


# TxnMarkerAppends before ProducePath: it extends it (a marker is an append), and Python's
# method order wants a subclass before its base.
class ReplicaManager(Leadership, TxnMarkerAppends, ProducePath, FetchPath, OffsetRequests):
    """The partitions this broker hosts, as leader or follower, and the paths through them.

    In a cluster the controller drives leadership with LeaderAndIsr and StopReplica, each
    carrying its epoch: a request from an older controller epoch than one already seen is
    refused (STALE_CONTROLLER_EPOCH), the split-brain fence.  Standalone, the local
    controller makes this broker leader of everything.
    """

    def shutdown(self) -> None:
        for partition in self.partitions.values():
            partition.fail_waiters(ErrorCode.not_leader_or_follower)
        self.waiters.notify_all()
