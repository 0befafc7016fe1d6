"""Transaction markers: the control batches that end a producer's transaction, appended as
leader for WriteTxnMarkers (from this broker's transaction coordinator in-process, or from
another broker's over the wire), each answered once the partition's ISR has it.

A marker that reached a ``__consumer_offsets`` partition is handed to the group coordinator
(``on_txn_marker``), which commits or drops that producer's pending transactional offsets.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from samsa.log.producer_state import AppendOrigin
from samsa.metadata.model import TopicPartition
from samsa.protocol.control import build_end_txn_marker
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.protocol.record_batch import read_batch_header
from samsa.replica.partition import ProducePartitionResponse
from samsa.replica.produce_path import ProducePath, append_error

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC = "__consumer_offsets"


@dataclass(slots=True)
class TxnMarker:
    """One marker of a WriteTxnMarkers request: end a producer's transaction on partitions."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: list[TopicPartition]


class TxnMarkerAppends(ProducePath):
    """WriteTxnMarkers on the partitions this broker leads: appends that wait like acks=all."""

    def append_txn_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
    ) -> ProducePartitionResponse:
        """Append the control batch that ends a producer's transaction, as leader; like
        acks=all, the answer waits for the ISR (``wait_for_acks``).  A partition this broker
        does not host is UNKNOWN_TOPIC_OR_PARTITION (Kafka's getMagic check)."""
        partition = self.partitions.get(tp)
        if partition is None:
            return ProducePartitionResponse(error_code=ErrorCode.unknown_topic_or_partition.value)
        try:
            if not partition.is_leader:
                raise KafkaApiError(ErrorCode.not_leader_or_follower)
            records = build_end_txn_marker(
                producer_id, producer_epoch, committed, coordinator_epoch, self.now_ms()
            )
            info = partition.append_records_to_leader(
                records,
                [read_batch_header(records)],
                -1,
                partition.log.config.min_insync_replicas,
                AppendOrigin.COORDINATOR,
            )
        except (KafkaApiError, OSError) as exc:
            return append_error(tp, exc)
        self.on_append(tp, info.num_messages, info.valid_bytes)
        required = info.last_offset + 1
        return ProducePartitionResponse(
            base_offset=info.first_offset,
            log_start_offset=info.log_start_offset,
            required_offset=required if partition.high_watermark < required else -1,
        )

    async def write_txn_markers(
        self, markers: list[TxnMarker], timeout_s: float
    ) -> list[dict[TopicPartition, ErrorCode]]:
        """WriteTxnMarkers: append every marker, then answer each partition once its ISR has
        the marker (or with the error).  Markers that reached a __consumer_offsets partition
        are handed to ``on_txn_marker``."""
        appended: list[dict[TopicPartition, ProducePartitionResponse]] = []
        for marker in markers:
            appended.append(
                {
                    tp: self.append_txn_marker(
                        tp,
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.committed,
                        marker.coordinator_epoch,
                    )
                    for tp in marker.partitions
                }
            )
        await asyncio.gather(
            *(
                self.wait_for_acks(tp, r, timeout_s)
                for results in appended
                for tp, r in results.items()
            )
        )
        answers: list[dict[TopicPartition, ErrorCode]] = []
        for marker, results in zip(markers, appended, strict=True):
            codes: dict[TopicPartition, ErrorCode] = {}
            for tp, r in results.items():
                code = ErrorCode(r.error_code)
                if code is ErrorCode.none and tp.topic == GROUP_METADATA_TOPIC:
                    try:
                        self.on_txn_marker(tp, marker.producer_id, marker.committed)
                    except Exception:
                        log.exception("completing transactional offsets on %s failed", tp)
                        code = ErrorCode.unknown_server_error
                codes[tp] = code
            answers.append(codes)
        return answers
