"""Prometheus metrics with Kafka-like names, one registry per broker (tests run several)."""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from samsa.broker.consumer_lag import ConsumerLag, ConsumerLagCollector
from samsa.broker.partition_metrics import LogDirCollector, TopicPartitionCollector
from samsa.log import LogManager
from samsa.log.cleaner import LogCleaner
from samsa.quota.manager import QuotaManagers
from samsa.replica import ReplicaManager
from samsa.replica.latency_stages import STAGES
from samsa.wall_clock import monotonic_ms

if TYPE_CHECKING:
    from samsa.controller import KafkaController

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (
    0.0001,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
)

# Replication's steps take from tens of microseconds to a few milliseconds.
STAGE_BUCKETS = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.00075,
    0.001,
    0.0015,
    0.002,
    0.003,
    0.005,
    0.0075,
    0.01,
    0.015,
    0.02,
    0.05,
    0.1,
    0.5,
    1,
)


class _LogCollector(Collector):
    """Log size and offsets per partition, read at scrape time."""

    def __init__(self, log_manager: Callable[[], LogManager | None]) -> None:
        self._log_manager = log_manager

    def collect(self) -> Iterable[GaugeMetricFamily]:
        size = GaugeMetricFamily(
            "kafka_log_size_bytes", "Bytes of the partition's log", labels=["topic", "partition"]
        )
        end = GaugeMetricFamily(
            "kafka_log_log_end_offset", "Next offset to be written", labels=["topic", "partition"]
        )
        start = GaugeMetricFamily(
            "kafka_log_log_start_offset", "First offset still kept", labels=["topic", "partition"]
        )
        segments = GaugeMetricFamily(
            "kafka_log_num_log_segments", "Segments of the log", labels=["topic", "partition"]
        )
        manager = self._log_manager()
        if manager is not None:
            for plog in manager.all_logs():
                labels = [plog.topic, str(plog.partition)]
                size.add_metric(labels, plog.size_in_bytes)
                end.add_metric(labels, plog.log_end_offset)
                start.add_metric(labels, plog.log_start_offset)
                segments.add_metric(labels, len(plog.segments))
        return [size, end, start, segments]


class _QuotaCollector(Collector):
    """Client quota sensors, read at scrape time (Kafka's Produce, Fetch and Request metric
    groups): the rate each quota entity is measured at, and the throttle time it was given.
    Labels are the quota's metric tags: an empty user or client_id is a quota shared
    across that tag."""

    def __init__(self, quotas: QuotaManagers) -> None:
        self._quotas = quotas

    def collect(self) -> Iterable[GaugeMetricFamily]:
        now = monotonic_ms()
        out = []
        for manager in self._quotas.all:
            group = manager.quota_type.lower()
            rate_name = "request_time" if group == "request" else "byte_rate"
            rate = GaugeMetricFamily(
                f"kafka_server_{group}_{rate_name}",
                "Percent of the event loop per second"
                if group == "request"
                else "Bytes per second, per user/client-id quota",
                labels=["user", "client_id"],
            )
            throttle = GaugeMetricFamily(
                f"kafka_server_{group}_throttle_time",
                "Average throttle time in ms given, per user/client-id quota",
                labels=["user", "client_id"],
            )
            for (user, client_id), sensor in list(manager.sensors.items()):
                rate.add_metric([user, client_id], sensor.rate.measure(now))
                average = sensor.throttle_ms_total / sensor.throttles if sensor.throttles else 0
                throttle.add_metric([user, client_id], average)
            out += [rate, throttle]
        return out


class _CleanerCollector(Collector):
    """The log cleaner's work (Kafka's LogCleaner and LogCleanerManager metrics)."""

    def __init__(self, log_cleaner: Callable[[], LogCleaner | None]) -> None:
        self._log_cleaner = log_cleaner

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        cleaner = self._log_cleaner()
        if cleaner is None:
            return []
        t = cleaner.totals
        prefix = "kafka_log_log_cleaner"
        out: list[GaugeMetricFamily | CounterMetricFamily] = [
            CounterMetricFamily(f"{prefix}_runs", "Logs cleaned", value=t.runs),
            CounterMetricFamily(f"{prefix}_aborted", "Cleanings abandoned", value=t.aborted),
            CounterMetricFamily(f"{prefix}_failed", "Cleanings that failed", value=t.failed),
            CounterMetricFamily(f"{prefix}_bytes_read", "Bytes cleaned", value=t.bytes_read),
            CounterMetricFamily(f"{prefix}_bytes_written", "Bytes kept", value=t.bytes_written),
            CounterMetricFamily(
                f"{prefix}_messages_read", "Records cleaned", value=t.messages_read
            ),
            CounterMetricFamily(
                f"{prefix}_messages_written", "Records kept", value=t.messages_written
            ),
        ]
        if t.last is not None:
            out += [
                GaugeMetricFamily(
                    f"{prefix}_max_clean_time_secs",
                    "Duration of the last clean",
                    value=t.last.elapsed_s,
                ),
                GaugeMetricFamily(
                    f"{prefix}_cleaner_recopy_percent",
                    "Bytes kept per 100 bytes cleaned, last clean",
                    value=100 * t.last.recopy_ratio,
                ),
                GaugeMetricFamily(
                    f"{prefix}_max_buffer_utilization_percent",
                    "Offset map use, last clean",
                    value=100 * t.last.buffer_utilization,
                ),
            ]
        manager = cleaner.manager
        prefix = "kafka_log_log_cleaner_manager"
        out.append(
            GaugeMetricFamily(
                f"{prefix}_max_dirty_percent",
                "Dirty share of the dirtiest compacted log",
                value=100 * manager.dirtiest_ratio,
            )
        )
        if manager.time_of_last_run_ms is not None:
            out.append(
                GaugeMetricFamily(
                    f"{prefix}_time_since_last_run_ms",
                    "Since the cleaner last looked for work",
                    value=max(cleaner.now_ms() - manager.time_of_last_run_ms, 0),
                )
            )
        out += [
            GaugeMetricFamily(
                f"{prefix}_uncleanable_partitions_count",
                "Logs the cleaner gave up on",
                value=len(manager.uncleanable),
            ),
            GaugeMetricFamily(
                f"{prefix}_uncleanable_bytes",
                "Bytes of the logs the cleaner gave up on",
                value=manager.uncleanable_bytes(),
            ),
        ]
        return out


class _ReplicaCollector(Collector):
    """Replication health as Kafka reports it (ReplicaManager and KafkaController metrics):
    what an operator alerts on."""

    def __init__(
        self,
        replica_manager: Callable[[], ReplicaManager | None],
        controller: Callable[[], KafkaController | None],
    ) -> None:
        self._replica_manager = replica_manager
        self._controller = controller
        self.isr_shrinks = 0
        self.isr_expands = 0

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        manager = self._replica_manager()
        if manager is None:
            return []
        partitions = list(manager.partitions.values())
        leaders = [p for p in partitions if p.is_leader]
        under = [p for p in leaders if len(p.isr) < len(p.replicas)]
        under_min = [p for p in leaders if len(p.isr) < p.log.config.min_insync_replicas]
        prefix = "kafka_server_replicamanager"
        out: list[GaugeMetricFamily | CounterMetricFamily] = [
            GaugeMetricFamily(
                f"{prefix}_partitioncount", "Partitions hosted here", len(partitions)
            ),
            GaugeMetricFamily(f"{prefix}_leadercount", "Partitions led here", len(leaders)),
            GaugeMetricFamily(
                f"{prefix}_underreplicatedpartitions",
                "Partitions led here whose ISR is smaller than their replicas",
                len(under),
            ),
            GaugeMetricFamily(
                f"{prefix}_underminisrpartitioncount",
                "Partitions led here whose ISR is below min.insync.replicas",
                len(under_min),
            ),
            CounterMetricFamily(
                f"{prefix}_isrshrinks", "ISR shrinks proposed here", self.isr_shrinks
            ),
            CounterMetricFamily(
                f"{prefix}_isrexpands", "ISR expansions proposed here", self.isr_expands
            ),
        ]
        controller = self._controller()
        active = controller is not None and controller.active
        prefix = "kafka_controller_kafkacontroller"
        out.append(
            GaugeMetricFamily(
                f"{prefix}_activecontrollercount", "1 on the active controller", int(active)
            )
        )
        if active and controller is not None:
            ctx = controller.ctx
            offline = sum(1 for s in ctx.states.values() if s.leader not in ctx.live_brokers)
            out.append(
                GaugeMetricFamily(
                    f"{prefix}_offlinepartitionscount", "Partitions without a live leader", offline
                )
            )
            out.append(
                GaugeMetricFamily(f"{prefix}_controllerepoch", "Controller epoch", ctx.epoch)
            )
            imbalance = sum(
                1
                for tp, s in ctx.states.items()
                if (replicas := ctx.replicas(tp)) and s.leader != replicas[0]
            )
            out += [
                GaugeMetricFamily(
                    f"{prefix}_globaltopiccount", "Topics in the cluster", len(ctx.topics)
                ),
                GaugeMetricFamily(
                    f"{prefix}_globalpartitioncount", "Partitions in the cluster", len(ctx.states)
                ),
                GaugeMetricFamily(
                    f"{prefix}_preferredreplicaimbalancecount",
                    "Partitions not led by their preferred replica",
                    imbalance,
                ),
            ]
        return out


class _Histogram:
    """One labelled histogram's counts per bucket (not cumulative; the last is +Inf)."""

    __slots__ = ("bounds", "counts", "created", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, seconds: float) -> None:
        # A value equal to a bound falls in that bound's bucket (le), as prometheus_client's.
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds


class _HistogramFamily:
    """A histogram kept as plain numbers: the broker's one event-loop thread observes it,
    so it needs no lock per observation, and it is exported at scrape time."""

    __slots__ = ("bounds", "children", "doc", "label", "name")

    def __init__(self, name: str, doc: str, label: str, buckets: tuple[float, ...]) -> None:
        self.name, self.doc, self.label = name, doc, label
        self.bounds = tuple(float(b) for b in buckets)
        self.children: dict[str, _Histogram] = {}

    def child(self, value: str) -> _Histogram:
        h = self.children.get(value)
        if h is None:
            h = self.children[value] = _Histogram(self.bounds)
        return h

    def collect(self) -> Metric:
        family = Metric(self.name, self.doc, "histogram")
        les = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
        name, label = self.name, self.label
        for value, h in list(self.children.items()):
            acc = 0.0
            for le, n in zip(les, h.counts, strict=True):
                acc += n
                family.add_sample(f"{name}_bucket", {label: value, "le": le}, acc)
            family.add_sample(f"{name}_count", {label: value}, acc)
            family.add_sample(f"{name}_sum", {label: value}, h.sum)
            family.add_sample(f"{name}_created", {label: value}, h.created)
        return family


class _CounterFamily:
    """Counters by one label kept as plain numbers, exported at scrape time."""

    __slots__ = ("children", "doc", "label", "name")

    def __init__(self, name: str, doc: str, label: str) -> None:
        self.name, self.doc, self.label = name, doc, label
        # value -> [count, created]
        self.children: dict[str, list[float]] = {}

    def child(self, value: str) -> list[float]:
        c = self.children.get(value)
        if c is None:
            c = self.children[value] = [0.0, time.time()]
        return c

    def collect(self) -> CounterMetricFamily:
        family = CounterMetricFamily(self.name, self.doc, labels=[self.label])
        for value, (count, created) in list(self.children.items()):
            family.add_metric([value], count, created=created)
        return family


class _HotCollector(Collector):
    """The per-request metrics (topic traffic, requests, replication stages), counted in plain
    Python on the event loop and turned into metric families only when scraped: a
    prometheus_client child takes a lock per increment, which the hot path can't afford."""

    def __init__(self, families: list[_HistogramFamily | _CounterFamily]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return [f.collect() for f in self._families]


class BrokerMetrics:
    def __init__(
        self,
        log_manager: Callable[[], LogManager | None],
        log_cleaner: Callable[[], LogCleaner | None] = lambda: None,
        replica_manager: Callable[[], ReplicaManager | None] = lambda: None,
        controller: Callable[[], KafkaController | None] = lambda: None,
        log_dir: Path | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.messages_in = _CounterFamily(
            "kafka_server_broker_topic_metrics_messages_in", "Messages appended", "topic"
        )
        self.bytes_in = _CounterFamily(
            "kafka_server_broker_topic_metrics_bytes_in", "Bytes appended", "topic"
        )
        self.bytes_out = _CounterFamily(
            "kafka_server_broker_topic_metrics_bytes_out", "Bytes sent to fetchers", "topic"
        )
        self.messages_out = _CounterFamily(
            "kafka_server_broker_topic_metrics_messages_out", "Messages sent to fetchers", "topic"
        )
        self.requests = _CounterFamily(
            "kafka_network_request_metrics_requests", "Requests handled", "request"
        )
        self.request_latency = _HistogramFamily(
            "kafka_network_request_metrics_total_time_seconds",
            "Time to handle a request",
            "request",
            LATENCY_BUCKETS,
        )
        # Where replication's milliseconds go (samsa.replica.latency_stages names the stages).
        self.replication_latency = _HistogramFamily(
            "kafka_server_replication_stage_time_seconds",
            "Time a record spends in each step from producer to consumer",
            "stage",
            STAGE_BUCKETS,
        )
        self._per_stage = {s: self.replication_latency.child(s) for s in STAGES}
        r.register(
            _HotCollector(
                [
                    self.messages_in,
                    self.bytes_in,
                    self.bytes_out,
                    self.messages_out,
                    self.requests,
                    self.request_latency,
                    self.replication_latency,
                ]
            )
        )
        self.connections = Gauge(
            "kafka_server_socket_server_metrics_connection_count",
            "Open client connections",
            registry=r,
        )
        r.register(_LogCollector(log_manager))
        r.register(_CleanerCollector(log_cleaner))
        self.replication = _ReplicaCollector(replica_manager, controller)
        r.register(self.replication)
        r.register(TopicPartitionCollector(replica_manager))
        if log_dir is not None:
            r.register(LogDirCollector(log_dir))
        # Set once the group coordinator runs: the lag of its groups, read before each scrape.
        self.consumer_lag: ConsumerLag | None = None

        # The children by label value, looked up once per request.
        self._per_api: dict[str, tuple[list[float], _Histogram]] = {}
        self._per_topic_in: dict[str, tuple[list[float], list[float]]] = {}
        self._per_topic_out: dict[str, tuple[list[float], list[float]]] = {}

    def watch_quotas(self, quotas: QuotaManagers) -> None:
        self.registry.register(_QuotaCollector(quotas))

    def watch_consumer_lag(self, lag: ConsumerLag) -> None:
        self.consumer_lag = lag
        self.registry.register(ConsumerLagCollector(lag))

    async def before_scrape(self) -> None:
        """What a scrape reads that needs I/O first (other brokers' log end offsets)."""
        if self.consumer_lag is not None:
            try:
                await self.consumer_lag.refresh()
            except Exception:
                # The rest of the scrape is still worth serving, without lag rather than with
                # stale lag.
                log.exception("consumer lag left out of this scrape")
                self.consumer_lag.rows = []

    def on_isr_change(self, shrink: bool) -> None:
        if shrink:
            self.replication.isr_shrinks += 1
        else:
            self.replication.isr_expands += 1

    def on_request(self, api: str, seconds: float) -> None:
        pair = self._per_api.get(api)
        if pair is None:
            pair = self._per_api[api] = (
                self.requests.child(api),
                self.request_latency.child(api),
            )
        pair[0][0] += 1
        pair[1].observe(seconds)

    def on_stage(self, stage: str, seconds: float) -> None:
        self._per_stage[stage].observe(seconds)

    def on_append(self, topic: str, messages: int, size: int) -> None:
        pair = self._per_topic_in.get(topic)
        if pair is None:
            pair = self._per_topic_in[topic] = (
                self.messages_in.child(topic),
                self.bytes_in.child(topic),
            )
        pair[0][0] += messages
        pair[1][0] += size

    def on_fetch(self, topic: str, messages: int, size: int) -> None:
        pair = self._per_topic_out.get(topic)
        if pair is None:
            pair = self._per_topic_out[topic] = (
                self.messages_out.child(topic),
                self.bytes_out.child(topic),
            )
        pair[0][0] += messages
        pair[1][0] += size

    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's series so /metrics doesn't report it forever."""
        for cache, families in (
            (self._per_topic_in, (self.messages_in, self.bytes_in)),
            (self._per_topic_out, (self.messages_out, self.bytes_out)),
        ):
            if cache.pop(topic, None) is not None:
                for family in families:
                    family.children.pop(topic, None)
