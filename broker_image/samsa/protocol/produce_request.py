"""ProduceRequest v0-v12 read by hand: the records stay views of the request frame.

kio would copy every partition's records into a new bytes object; on the produce path that
copy is as costly as the write to the log, so this reader slices instead.  The views are
valid only while the request is being handled (the frame's buffer is reused afterwards).
"""

from __future__ import annotations

import datetime
import struct
from dataclasses import dataclass

from samsa.protocol.bounds import InvalidRequestError
from samsa.protocol.hand_reader import Reader

_ACKS_TIMEOUT = struct.Struct(">hi")
FIRST_FLEXIBLE = 9


@dataclass(slots=True)
class PartitionProduceData:
    index: int
    records: memoryview | None


@dataclass(slots=True)
class TopicProduceData:
    name: str
    partition_data: list[PartitionProduceData]


@dataclass(slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout: datetime.timedelta
    topic_data: list[TopicProduceData]


def parse_produce_request(version: int, frame: bytes | memoryview, offset: int) -> ProduceRequest:
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    r = Reader(view, offset, version >= FIRST_FLEXIBLE, "ProduceRequest")
    # v3 added the transactional id (and record batches, magic v2).
    transactional_id = r.string() if version >= 3 else None
    r.need(6)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(view, r.pos)
    r.pos += 6
    topics = []
    for _ in range(r.count()):
        name = r.string()
        if name is None:
            raise InvalidRequestError("null topic name")
        partitions = []
        for _ in range(r.count()):
            index = r.int32()
            partitions.append(PartitionProduceData(index, r.records()))
            r.tags()
        topics.append(TopicProduceData(name, partitions))
        r.tags()
    r.tags()
    # Trailing bytes are ignored, as Kafka ignores them.
    return ProduceRequest(
        transactional_id, acks, datetime.timedelta(milliseconds=timeout_ms), topics
    )
