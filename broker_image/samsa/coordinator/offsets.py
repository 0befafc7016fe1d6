"""A committed offset as the coordinator keeps it (Kafka's OffsetAndMetadata), and with the
position of its record (CommitRecordMetadataAndOffset); ``group_records`` turns it into bytes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int | None = None
    metadata: str = ""
    commit_timestamp_ms: int = -1
    # Only OffsetCommit v2-v4 with an explicit retention time sets this; it is then kept on
    # disk (value v1) and expiry uses it instead of offsets.retention.minutes.
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True)
class CommitRecordMetadataAndOffset:
    """An offset with the position of its commit record, so a later write always wins.

    Kafka uses the record's log offset; the store here does not report one, so the coordinator
    numbers its appends (and the records it replays) in the order they reach the log.
    """

    append_order: int
    offset_and_metadata: OffsetAndMetadata

    def older_than(self, other: CommitRecordMetadataAndOffset) -> bool:
        return self.append_order < other.append_order
