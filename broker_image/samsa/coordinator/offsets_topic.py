"""Which partition of __consumer_offsets holds a group: Kafka's ``partitionFor``."""

from __future__ import annotations


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, as a signed 32-bit int."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """``Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount``.

    Kafka's ``Utils.abs`` is ``n & 0x7fffffff`` (so Integer.MIN_VALUE maps to 0), not ``Math.abs``;
    matching it exactly is what lets our brokers and Kafka's tools agree on a group's coordinator.
    """
    return (java_string_hashcode(group_id) & 0x7FFFFFFF) % num_partitions


def utf16_length(s: str) -> int:
    """Java's ``String.length()``, which Kafka compares with offset.metadata.max.bytes."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2
