"""The GroupStore over this broker's __consumer_offsets partitions, and their replay.

Records are written as one uncompressed batch per append through the replica manager, as the
leader of the partition (acks=all); loading replays a partition from its log start to its
high watermark, skipping control batches.
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
    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    async def append(self, partition: int, records: list[Record]) -> None:
        if not records:
            return
        batch = build_batch(
            [(key, value, ()) for key, value in records], timestamp_ms=int(time.time() * 1000)
        )
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
        result = self.replica_manager.append_records(tp, batch, -1, 0)
        if result.error_code:
            raise KafkaApiError(ErrorCode(result.error_code), result.error_message)


def replay(replica_manager: ReplicaManager, partition: int) -> Iterator[Record]:
    """Every (key, value) below the high watermark of one __consumer_offsets partition."""
    tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
    leader = replica_manager.leader_partition(tp)
    plog = leader.log
    offset = plog.log_start_offset
    end = leader.high_watermark
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
