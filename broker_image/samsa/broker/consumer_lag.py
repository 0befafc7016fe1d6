"""Consumer lag as Kafka Exporter names it, computed when /metrics is scraped.

Each group's series are exported by the group's coordinator (the leader of its
__consumer_offsets partition), which holds the committed offsets: a Prometheus scraping every
broker sees each group once. The log end offset it compares them with is what
``kafka-consumer-groups --describe`` shows, ListOffsets' latest offset (the high watermark),
read from the partition's own state where this broker leads it and asked of the leader through
the inter-broker connections otherwise: one ListOffsets per leader, and one Fetch per leader
for the timestamps of the records at committed offsets not seen before (a record's timestamp
never changes, so they are remembered).

``refresh`` runs before each scrape and is bounded by ``timeout_s``: a leader that does not
answer in time leaves its partitions out of that scrape (no stale numbers), and nothing of this
runs on the produce or fetch paths.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from samsa.log import OffsetOutOfRangeError
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import build, request_type
from samsa.protocol.record_batch import CorruptRecordError, decode_records
from samsa.protocol.replica_fetch import VERSION as FETCH_VERSION
from samsa.protocol.replica_fetch import encode_replica_fetch
from samsa.wall_clock import wall_clock_ms

if TYPE_CHECKING:
    # Types only: a standalone broker never loads the inter-broker client.
    from samsa.client import ConnectionPool
    from samsa.coordinator import GroupCoordinator
    from samsa.metadata import MetadataCache
    from samsa.replica import ReplicaManager

log = logging.getLogger(__name__)

FETCH = 1
LIST_OFFSETS = 2
LIST_OFFSETS_VERSION = 7
LATEST_TIMESTAMP = -1
# A consumer's id in Fetch and ListOffsets: the leader answers as it answers consumers.
CONSUMER_REPLICA_ID = -1
# Enough for the batch holding the offset: a leader always returns the first batch whole.
TIMESTAMP_FETCH_BYTES = 1
# How long a scrape waits for the other brokers' answers: well inside Prometheus's default
# scrape timeout (10 s).
DEFAULT_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """One group's position on one partition, as kafka-consumer-groups --describe shows it."""

    group: str
    tp: TopicPartition
    committed: int
    log_end: int
    # Milliseconds since the record at the committed offset was written; 0 when caught up,
    # None when its timestamp could not be read this time.
    lag_ms: int | None

    @property
    def lag(self) -> int:
        return max(self.log_end - self.committed, 0)


def record_timestamp_at(records: bytes, offset: int) -> int | None:
    """The timestamp of the first record at or past ``offset`` in these whole batches."""
    try:
        for record in decode_records(records):
            if record.offset >= offset:
                return int(record.timestamp)
    except CorruptRecordError:
        return None
    return None


class ConsumerLag:
    """The lag of the groups this broker coordinates, refreshed before each scrape."""

    def __init__(
        self,
        coordinator: Callable[[], GroupCoordinator | None],
        replica_manager: Callable[[], ReplicaManager | None],
        cache: Callable[[], MetadataCache | None],
        pool: Callable[[], ConnectionPool | None],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        now_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self._coordinator = coordinator
        self._replica_manager = replica_manager
        self._cache = cache
        self._pool = pool
        self.timeout_s = timeout_s
        self._now_ms = now_ms
        self.rows: list[PartitionLag] = []
        # (partition, offset) -> timestamp of the record there: it never changes.
        self._timestamps: dict[tuple[TopicPartition, int], int] = {}

    def committed_offsets(self) -> dict[tuple[str, TopicPartition], int]:
        """Every committed offset of the groups this broker coordinates now."""
        coordinator = self._coordinator()
        if coordinator is None or not coordinator.is_active:
            return {}
        manager = coordinator.manager
        out: dict[tuple[str, TopicPartition], int] = {}
        for group in manager.current_groups():
            if not manager.is_group_local(group.group_id):
                continue
            for tp, commit in list(group.offsets.items()):
                offset = commit.offset_and_metadata.offset
                if offset >= 0:  # -1: no position, as kafka-consumer-groups shows "-"
                    out[group.group_id, tp] = offset
        return out

    async def refresh(self) -> None:
        """Read the log end offsets (and timestamps) the committed offsets are compared with."""
        committed = self.committed_offsets()
        wanted = {tp for _, tp in committed}
        ends: dict[TopicPartition, int] = {}
        remote: dict[int, set[TopicPartition]] = {}
        manager = self._replica_manager()
        cache = self._cache()
        for tp in wanted:
            partition = manager.partitions.get(tp) if manager is not None else None
            if partition is not None and partition.is_leader:
                ends[tp] = partition.high_watermark
                continue
            state = cache.partition_state(tp.topic, tp.partition) if cache is not None else None
            if state is not None and state.leader >= 0:
                remote.setdefault(state.leader, set()).add(tp)
        self._timestamps = {k: v for k, v in self._timestamps.items() if k[0] in wanted}
        for (_, tp), offset in committed.items():
            if tp in ends and offset < ends[tp]:
                self._read_local_timestamp(tp, offset)
        if remote:
            asks = [self._ask_leader(b, tps, committed) for b, tps in remote.items()]
            done, pending = await asyncio.wait(
                [asyncio.ensure_future(a) for a in asks], timeout=self.timeout_s
            )
            for task in pending:
                task.cancel()
            for task in done:
                if task.exception() is None:
                    ends.update(task.result())
        now = self._now_ms()
        rows = []
        for (group, tp), offset in sorted(committed.items()):
            end = ends.get(tp)
            if end is None:
                continue
            lag_ms: int | None = 0
            if offset < end:
                stamp = self._timestamps.get((tp, offset))
                lag_ms = None if stamp is None else max(now - stamp, 0)
            rows.append(PartitionLag(group, tp, offset, end, lag_ms))
        self.rows = rows

    def _read_local_timestamp(self, tp: TopicPartition, offset: int) -> None:
        if (tp, offset) in self._timestamps:
            return
        manager = self._replica_manager()
        partition = manager.partitions.get(tp) if manager is not None else None
        if partition is None:
            return
        try:
            info = partition.log.read(offset, TIMESTAMP_FETCH_BYTES)
        except OffsetOutOfRangeError:
            return
        if isinstance(info.records, bytes | bytearray | memoryview):
            stamp = record_timestamp_at(bytes(info.records), offset)
            if stamp is not None:
                self._timestamps[tp, offset] = stamp

    async def _ask_leader(
        self,
        broker_id: int,
        tps: set[TopicPartition],
        committed: dict[tuple[str, TopicPartition], int],
    ) -> dict[TopicPartition, int]:
        """The leader's ListOffsets latest for ``tps``, then a Fetch for the timestamps still
        unknown; returns the log end offsets."""
        pool = self._pool()
        if pool is None:
            return {}
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(tps):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = build(
            request_type(LIST_OFFSETS, LIST_OFFSETS_VERSION),
            {
                "replica_id": CONSUMER_REPLICA_ID,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": p,
                                "current_leader_epoch": -1,
                                "timestamp": LATEST_TIMESTAMP,
                            }
                            for p in partitions
                        ],
                    }
                    for topic, partitions in by_topic.items()
                ],
            },
        )
        try:
            response = await pool.request(
                broker_id, LIST_OFFSETS, LIST_OFFSETS_VERSION, request, self.timeout_s
            )
        except Exception as exc:
            log.debug("lag: ListOffsets to broker %d failed: %s", broker_id, exc)
            pool.drop(broker_id)
            raise
        ends: dict[TopicPartition, int] = {}
        for topic in response.topics:
            for p in topic.partitions:
                if p.error_code == ErrorCode.none:
                    ends[TopicPartition(topic.name, p.partition_index)] = int(p.offset)
        unknown = {
            (tp, offset)
            for (_, tp), offset in committed.items()
            if tp in ends and offset < ends[tp] and (tp, offset) not in self._timestamps
        }
        if unknown:
            await self._fetch_timestamps(pool, broker_id, unknown)
        return ends

    async def _fetch_timestamps(
        self, pool: ConnectionPool, broker_id: int, unknown: set[tuple[TopicPartition, int]]
    ) -> None:
        """One Fetch per distinct committed offset of a partition (a Fetch names a partition
        once), at most as many rounds as groups share a partition."""
        rounds: list[dict[TopicPartition, int]] = []
        for tp, offset in sorted(unknown):
            for r in rounds:
                if tp not in r:
                    r[tp] = offset
                    break
            else:
                rounds.append({tp: offset})
        for offsets in rounds:
            by_topic: dict[str, list[tuple[int, int, int, int, int, int]]] = {}
            for tp, offset in offsets.items():
                by_topic.setdefault(tp.topic, []).append(
                    (tp.partition, -1, offset, -1, -1, TIMESTAMP_FETCH_BYTES)
                )
            body = encode_replica_fetch(
                CONSUMER_REPLICA_ID, 0, 0, TIMESTAMP_FETCH_BYTES, by_topic.items()
            )
            response: Any = await pool.request(
                broker_id, FETCH, FETCH_VERSION, body, self.timeout_s
            )
            for topic in response.responses:
                for p in topic.partitions:
                    tp = TopicPartition(topic.topic, p.partition_index)
                    asked = offsets.get(tp)
                    if asked is None or p.error_code != ErrorCode.none or not p.records:
                        continue
                    found = record_timestamp_at(bytes(p.records), asked)
                    if found is not None:
                        self._timestamps[tp, asked] = found


class ConsumerLagCollector(Collector):
    """Kafka Exporter's consumer group series from the last refresh."""

    def __init__(self, lag: ConsumerLag) -> None:
        self._lag = lag

    def collect(self) -> Iterable[GaugeMetricFamily]:
        labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "Committed offset of a consumer group on a partition",
            labels=labels,
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "Log end offset (high watermark) minus the committed offset",
            labels=labels,
        )
        lag_seconds = GaugeMetricFamily(
            "kafka_consumergroup_lag_seconds",
            "Age of the oldest unconsumed record (0 when caught up)",
            labels=labels,
        )
        current_sum = GaugeMetricFamily(
            "kafka_consumergroup_current_offset_sum",
            "Committed offsets of a consumer group on a topic, summed",
            labels=["consumergroup", "topic"],
        )
        lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "Lag of a consumer group on a topic, summed over its partitions",
            labels=["consumergroup", "topic"],
        )
        sums: dict[tuple[str, str], list[int]] = {}
        for row in self._lag.rows:
            values = [row.group, row.tp.topic, str(row.tp.partition)]
            current.add_metric(values, row.committed)
            lag.add_metric(values, row.lag)
            if row.lag_ms is not None:
                lag_seconds.add_metric(values, row.lag_ms / 1000)
            total = sums.setdefault((row.group, row.tp.topic), [0, 0])
            total[0] += row.committed
            total[1] += row.lag
        for (group, topic), (committed, behind) in sums.items():
            current_sum.add_metric([group, topic], committed)
            lag_sum.add_metric([group, topic], behind)
        return [current, lag, lag_seconds, current_sum, lag_sum]
