"""Partition health as Kafka Exporter names it, and the data directory's disk, read when
/metrics is scraped.

Each partition's ``kafka_topic_partition_*`` series come from its leader alone, which knows
its high watermark and ISR first-hand: a Prometheus scraping every broker sees each partition
once (none while it has no leader; OfflinePartitionsCount says so).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from samsa.replica import ReplicaManager


class TopicPartitionCollector(Collector):
    """kafka_topic_partition_* for the partitions this broker leads."""

    def __init__(self, replica_manager: Callable[[], ReplicaManager | None]) -> None:
        self._replica_manager = replica_manager

    def collect(self) -> Iterable[GaugeMetricFamily]:
        labels = ["topic", "partition"]

        def gauge(name: str, doc: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"kafka_topic_partition_{name}", doc, labels=labels)

        current = gauge("current_offset", "Latest offset (high watermark)")
        oldest = gauge("oldest_offset", "Earliest offset (log start offset)")
        replicas = gauge("replicas", "Replicas assigned")
        in_sync = gauge("in_sync_replica", "Replicas in the ISR")
        leader = gauge("leader", "Broker id of the leader")
        preferred = gauge("leader_is_preferred", "1 if the leader is the preferred replica")
        under = gauge("under_replicated_partition", "1 if the ISR is smaller than the replicas")
        manager = self._replica_manager()
        if manager is not None:
            for p in list(manager.partitions.values()):
                if not p.is_leader:
                    continue
                values = [p.tp.topic, str(p.tp.partition)]
                current.add_metric(values, p.high_watermark)
                oldest.add_metric(values, p.log.log_start_offset)
                replicas.add_metric(values, len(p.replicas))
                in_sync.add_metric(values, len(p.isr))
                leader.add_metric(values, p.leader_id)
                preferred.add_metric(values, int(bool(p.replicas) and p.replicas[0] == p.leader_id))
                under.add_metric(values, int(len(p.isr) < len(p.replicas)))
        return [current, oldest, replicas, in_sync, leader, preferred, under]


class LogDirCollector(Collector):
    """The size and free space of the file system holding the data directory: what a
    full-disk alert watches (Kafka reports them through DescribeLogDirs, KIP-827)."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir

    def collect(self) -> Iterable[GaugeMetricFamily]:
        try:
            usage = shutil.disk_usage(self._log_dir)
        except OSError:
            return []
        return [
            GaugeMetricFamily(
                "kafka_log_dir_total_bytes", "Size of the data directory's file system", usage.total
            ),
            GaugeMetricFamily(
                "kafka_log_dir_usable_bytes",
                "Bytes free to the broker on the data directory's file system",
                usage.free,
            ),
        ]
