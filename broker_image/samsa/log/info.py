"""What the log reports back: LogAppendInfo for an append, FetchDataInfo for a read."""

from __future__ import annotations

from dataclasses import dataclass

from samsa.protocol.fileregion import FileRegion


@dataclass(slots=True)
class LogAppendInfo:
    """The outcome of one append (Kafka's LogAppendInfo).

    offset_of_max_timestamp is the last offset of the batch holding the max timestamp
    (Kafka's "shallow" offset) for CreateTime, and first_offset for LogAppendTime.
    first_offset is -1 when a follower append held no complete batch.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    num_messages: int
    valid_bytes: int


@dataclass(slots=True)
class FetchDataInfo:
    """Whole batches read from one segment, as stored (Kafka's FetchDataInfo).

    first_batch_offset is the base offset of the first batch returned (-1 when empty), which
    may be below fetch_offset: the batch holding fetch_offset is returned whole.
    """

    fetch_offset: int
    records: bytes | FileRegion  # a FileRegion only when the caller asked for zero copy
    first_batch_offset: int = -1
    segment_base_offset: int = -1
    position: int = -1
    next_offset: int = -1  # the offset after the last batch returned (-1 when empty)
