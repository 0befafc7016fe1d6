"""The GroupStore over this broker's __consumer_offsets partitions, and their replay.

Records are written as one uncompressed batch per append through the replica manager, as the
leader of the partition (acks=all); loading replays a partition from its log start to its
log end, skipping control batches.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from samsa.coordinator.config import GROUP_METADATA_TOPIC_NAME
from samsa.coordinator.store import Record
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.protocol.records import build_batch, decode_records, scan_batches
from samsa.replica import ReplicaManager

_READ_BYTES = 1 << 20


class LogGroupStore:
    def __init__(self, replica_manager: ReplicaManager, timeout_s: float = 5.0) -> None:
        self.replica_manager = replica_manager
        self.timeout_s = timeout_s

    async def append(self, partition: int, records: list[Record]) -> None:
        if not records:
            return
        batch = build_batch(
            [(key, value, ()) for key, value in records], timestamp_ms=int(time.time() * 1000)
        )
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
        result = self.replica_manager.append_records(tp, batch, -1, 0)
        # Durable means on every in-sync replica: a commit acknowledged before that could be
        # lost with this broker.
        await self.replica_manager.wait_for_acks(tp, result, self.timeout_s)
        if result.error_code:
            raise KafkaApiError(ErrorCode(result.error_code), result.error_message)


def replay(replica_manager: ReplicaManager, partition: int) -> Iterator[Record]:
    """Every (key, value) of one __consumer_offsets partition this broker now leads.

    To its log end, not its high watermark: a new leader's high watermark lags until its
    followers fetch again, and everything in the leader's log is what the partition will hold.
    """
    tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
    leader = replica_manager.leader_partition(tp)
    plog = leader.log
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        data = plog.read(offset, _READ_BYTES, max_offset=end).records
        if not data:
            return
        assert isinstance(data, bytes)
        view = memoryview(data)
        before = offset
        for pos, header in scan_batches(view):
            offset = header.last_offset + 1
            if header.is_control:
                continue
            for record in decode_records(view[pos : pos + header.size]):
                if record.key is not None:
                    yield record.key, record.value
        if offset == before:
            return
