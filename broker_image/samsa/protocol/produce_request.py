"""ProduceRequest v0-v12 read by hand: the records stay views of the request frame.

kio would copy every partition's records into a new bytes object; on the produce path that
copy is as costly as the write to the log, so this reader slices instead.  The views are
valid only while the request is being handled (the frame's buffer is reused afterwards).
"""

from __future__ import annotations

import datetime
import struct
from dataclasses import dataclass

from samsa.protocol.messages import InvalidRequestError, read_uvarint, skip_tagged_fields

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
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


class _Reader:
    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: memoryview, pos: int, flexible: bool) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise InvalidRequestError("truncated ProduceRequest")

    def int16(self) -> int:
        self.need(2)
        (value,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(value)

    def int32(self) -> int:
        self.need(4)
        (value,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def length(self) -> int:
        """A string/bytes/array length; -1 for null."""
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos)
            return n - 1
        return self.int32()

    def string(self) -> str | None:
        if self.flexible:
            n, self.pos = read_uvarint(self.buf, self.pos)
            n -= 1
        else:
            n = self.int16()
        if n < 0:
            return None
        self.need(n)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        try:
            return bytes(raw).decode()
        except UnicodeDecodeError:
            raise InvalidRequestError("string is not UTF-8") from None

    def records(self) -> memoryview | None:
        n = self.length()
        if n < 0:
            return None
        self.need(n)
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def count(self) -> int:
        n = self.length()
        if n < 0:
            return 0
        # Each element takes at least one byte: a larger count is a lie, refuse it early.
        self.need(n)
        return n

    def tags(self) -> None:
        if self.flexible:
            self.pos = skip_tagged_fields(self.buf, self.pos)


def parse_produce_request(version: int, frame: bytes | memoryview, offset: int) -> ProduceRequest:
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    r = _Reader(view, offset, version >= FIRST_FLEXIBLE)
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
