"""The fetch path: reads for consumers and followers, and the long poll's wait for news.

``read`` answers each partition of a Fetch in order until the request's byte budget runs out;
a follower's read moves its state on the leader (its log end offset, the ISR, the high
watermark). ``quiet`` spares a read of a follower's session partition with nothing to tell.
A fetch with too little to answer parks in ``waiters`` (Kafka's DelayedFetch purgatory,
``samsa.replica.delayed``) until its partitions have news or its wait runs out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from samsa.log import OffsetOutOfRangeError
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.protocol.fileregion import FileRegion
from samsa.replica.hosted_partitions import HostedPartitions
from samsa.replica.partition import READ_COMMITTED, FetchClock, Partition


@dataclass(slots=True)
class FetchPartitionRequest:
    tp: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    # A follower's own log start offset (Fetch v5+), for DeleteRecords' low watermark.
    log_start_offset: int = -1


@dataclass(slots=True)
class FetchPartitionResponse:
    tp: TopicPartition
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | FileRegion = b""
    messages: int = 0  # records in the batches returned (the first batch counts whole)
    # read_committed: (producer id, first offset) of the aborted transactions overlapping
    # the records returned; None otherwise.
    aborted_transactions: list[tuple[int, int]] | None = None


class FetchPath(HostedPartitions):
    """Reads of the partitions this broker hosts, and the waits of fetches with nothing yet."""

    def read(
        self,
        requests: Iterable[FetchPartitionRequest],
        max_bytes: int,
        isolation_level: int,
        replica_id: int = -1,
        from_follower: bool = False,
    ) -> tuple[list[FetchPartitionResponse], int]:
        """Read each partition in order until max_bytes; returns the responses and bytes read.

        `from_follower`: a consumer that may read from a follower, below its high watermark
        (KIP-392; Kafka allows it to consumers that send their rack, Fetch v11+)."""
        responses: list[FetchPartitionResponse] = []
        total = 0
        for req in requests:
            resp = FetchPartitionResponse(req.tp)
            responses.append(resp)
            partition = self.partitions.get(req.tp)
            if partition is None:
                resp.error_code = self._not_hosted(req.tp).value
                continue
            if not partition.is_leader and not (from_follower and partition.leader_id >= 0):
                resp.error_code = ErrorCode.not_leader_or_follower.value
                continue
            if req.current_leader_epoch >= 0 and req.current_leader_epoch != partition.leader_epoch:
                resp.error_code = (
                    ErrorCode.fenced_leader_epoch.value
                    if req.current_leader_epoch < partition.leader_epoch
                    else ErrorCode.unknown_leader_epoch.value
                )
                continue
            plog = partition.log
            if replica_id >= 0 and req.fetch_offset <= plog.log_end_offset:
                partition.update_follower_fetch_state(
                    replica_id, req.fetch_offset, req.log_start_offset
                )
            resp.high_watermark = partition.high_watermark
            resp.last_stable_offset = partition.last_stable_offset
            resp.log_start_offset = plog.log_start_offset
            upper = partition.fetch_upper_bound(isolation_level, replica_id >= 0)
            budget = min(req.partition_max_bytes, max_bytes - total)
            if req.fetch_offset == upper and req.fetch_offset <= plog.log_end_offset:
                continue
            try:
                data = plog.read(
                    req.fetch_offset,
                    max(budget, 0),
                    max_offset=upper,
                    min_one_message=total == 0,
                    zero_copy=True,
                )
            except OffsetOutOfRangeError:
                # Kafka answers an out-of-range fetch with no offsets at all.
                resp.error_code = ErrorCode.offset_out_of_range.value
                resp.high_watermark = resp.last_stable_offset = resp.log_start_offset = -1
                continue
            if budget <= 0 and total > 0:
                continue
            resp.records = data.records
            if data.records:
                partition.records_read(req.fetch_offset, replica_id)
                if isolation_level == READ_COMMITTED and replica_id < 0:
                    resp.aborted_transactions = [
                        (t.producer_id, t.first_offset)
                        for t in plog.collect_aborted_txns(req.fetch_offset, data.next_offset)
                    ]
            if data.next_offset > data.first_batch_offset >= 0:
                resp.messages = data.next_offset - data.first_batch_offset
            total += len(data.records)
        return responses, total

    def quiet(
        self,
        partition: Partition,
        req: FetchPartitionRequest,
        replica_id: int,
        session: FetchClock | None = None,
    ) -> tuple[int, int, int] | None:
        """For a partition of a follower's fetch session that this fetch did not name: its
        (high watermark, last stable offset, log start offset) if the follower has the
        leader's whole log and is in the ISR, so that a read would find nothing; the follower
        is noted caught up now, and as of each fetch of ``session`` until it reads the
        partition again. None: it must be read (``read``), to move its state or to answer
        with records or an error."""
        if (
            not partition.is_leader
            or (0 <= req.current_leader_epoch != partition.leader_epoch)
            or not partition.follower_at_end(replica_id, req.fetch_offset, session)
        ):
            return None
        return (
            partition.high_watermark,
            partition.last_stable_offset,
            partition.log.log_start_offset,
        )

    async def wait_for_data(
        self,
        tps: list[TopicPartition],
        timeout_s: float,
        follower: bool = False,
        watched: asyncio.Future[float | None] | None = None,
    ) -> float | None:
        """When one of the partitions had news for a follower's fetch (its log grew) or a
        consumer's (its high watermark moved), as perf_counter time; None at the timeout.
        ``watched``: from ``waiters.watch``, made when the fetch last read the partitions."""
        return await self.waiters.wait(tps, timeout_s, follower, watched)
