"""The GroupStore over this broker's __consumer_offsets (or __transaction_state) partitions,
and their replay.

Records are written as one uncompressed batch per append through the replica manager, as the
leader of the partition (acks=all); loading replays a partition from its log start to its
log end. Transactional offset commits (TxnOffsetCommit) are written as transactional batches
of the producer's id and epoch; replay reports them with that producer id, and reports each
control batch's producer id and whether it commits, so the loader can apply or drop them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from samsa.coordinator.config import GROUP_METADATA_TOPIC_NAME
from samsa.coordinator.group_store import Record, TxnMarker, TxnRecord
from samsa.log.producer_state import AppendOrigin
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.protocol.record_batch import build_batch, decode_records, scan_batches
from samsa.replica import ReplicaManager
from samsa.wall_clock import wall_clock_ms

_READ_BYTES = 1 << 20


class LogGroupStore:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        timeout_s: float = 5.0,
        topic: str = GROUP_METADATA_TOPIC_NAME,
    ) -> None:
        self.replica_manager = replica_manager
        self.timeout_s = timeout_s
        self.topic = topic

    async def append(
        self,
        partition: int,
        records: list[Record],
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        """With a producer id: one transactional batch of that producer (TxnOffsetCommit)."""
        if not records:
            return
        batch = build_batch(
            [(key, value, ()) for key, value in records],
            timestamp_ms=wall_clock_ms(),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0 if producer_id >= 0 else -1,
            transactional=producer_id >= 0,
        )
        tp = TopicPartition(self.topic, partition)
        # A transactional batch's sequence is not the producer's: Kafka appends it as the
        # coordinator, checking only the epoch (a fenced producer's commit is refused).
        origin = AppendOrigin.COORDINATOR if producer_id >= 0 else AppendOrigin.CLIENT
        result = self.replica_manager.append_records(tp, batch, -1, 0, origin)
        # Durable means on every in-sync replica: a commit acknowledged before that could be
        # lost with this broker.
        await self.replica_manager.wait_for_acks(tp, result, self.timeout_s)
        if result.error_code:
            raise KafkaApiError(ErrorCode(result.error_code), result.error_message)


def replay(
    replica_manager: ReplicaManager,
    partition: int,
    topic: str = GROUP_METADATA_TOPIC_NAME,
    transactional: bool = False,
) -> Iterator[Any]:
    """Every (key, value) of one partition this broker now leads.

    To its log end, not its high watermark: a new leader's high watermark lags until its
    followers fetch again, and everything in the leader's log is what the partition will hold.
    With ``transactional``, records of transactional batches come as ``TxnRecord`` and control
    batches as ``TxnMarker``; without, both are skipped as before.
    """
    tp = TopicPartition(topic, partition)
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
                if transactional:
                    for record in decode_records(view[pos : pos + header.size]):
                        # The control record's key: version int16, type int16 (1: commit).
                        key = record.key or b""
                        if len(key) >= 4:
                            committed = int.from_bytes(key[2:4], "big") == 1
                            yield TxnMarker(header.producer_id, committed)
                continue
            in_txn = transactional and header.is_transactional
            for record in decode_records(view[pos : pos + header.size]):
                if record.key is not None:
                    if in_txn:
                        yield TxnRecord(header.producer_id, record.key, record.value)
                    else:
                        yield record.key, record.value
        if offset == before:
            return
