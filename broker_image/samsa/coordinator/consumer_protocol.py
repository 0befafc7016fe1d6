"""The topics a consumer subscribes to, read from its JoinGroup protocol metadata.

Kafka reads every version of ``ConsumerProtocolSubscription`` with the v0 layout, since each
later version only appends fields: int16 version, then an int32-counted array of int16-length
topic names. Only the topics are needed (for OffsetDelete and offset expiry).
"""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"


class SubscriptionFormatError(ValueError):
    """Metadata that is not a consumer protocol subscription."""


def subscribed_topics(metadata: bytes) -> set[str]:
    data = bytes(metadata)
    try:
        (version,) = struct.unpack_from(">h", data, 0)
        if version < 0:
            raise SubscriptionFormatError(f"negative subscription version {version}")
        (count,) = struct.unpack_from(">i", data, 2)
        if count < 0:
            raise SubscriptionFormatError("null topic list")
        pos = 6
        topics: set[str] = set()
        for _ in range(count):
            (length,) = struct.unpack_from(">h", data, pos)
            pos += 2
            if length < 0 or pos + length > len(data):
                raise SubscriptionFormatError("bad topic name length")
            topics.add(data[pos : pos + length].decode("utf-8"))
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError) as exc:
        raise SubscriptionFormatError(str(exc)) from None
