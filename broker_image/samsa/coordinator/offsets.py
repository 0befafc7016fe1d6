"""A committed offset as the coordinator keeps it (Kafka's OffsetAndMetadata)."""

from __future__ import annotations

from dataclasses import dataclass

from samsa.coordinator.group_records import OffsetCommitValue


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int | None = None
    metadata: str = ""
    commit_timestamp_ms: int = -1
    # Only OffsetCommit v2-v4 with an explicit retention time sets this; it is then kept on
    # disk (value v1) and expiry uses it instead of offsets.retention.minutes.
    expire_timestamp_ms: int | None = None

    def to_value(self) -> OffsetCommitValue:
        return OffsetCommitValue(
            offset=self.offset,
            metadata=self.metadata,
            commit_timestamp=self.commit_timestamp_ms,
            leader_epoch=-1 if self.leader_epoch is None else self.leader_epoch,
            expire_timestamp=-1 if self.expire_timestamp_ms is None else self.expire_timestamp_ms,
        )

    @classmethod
    def from_value(cls, value: OffsetCommitValue) -> OffsetAndMetadata:
        return cls(
            offset=value.offset,
            leader_epoch=None if value.leader_epoch == -1 else value.leader_epoch,
            metadata=value.metadata,
            commit_timestamp_ms=value.commit_timestamp,
            expire_timestamp_ms=None if value.expire_timestamp == -1 else value.expire_timestamp,
        )


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
