"""What the console reads from and writes to the cluster, through confluent-kafka: brokers,
topics and their configs and offsets, groups and their lag, records by offset or time, produce,
and group offset resets. Blocking calls, each bounded by a timeout; the routes run them off the
event loop. Failures are `samsa.cli.errors.Failure`, with the CLI's one-line wording."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, OffsetSpec

from samsa.cli import groups
from samsa.cli.errors import Failure, fail
from samsa.cli.kafka import REQUEST_TIMEOUT, Cluster
from samsa.cli.offset_reset import Partition, PlannedReset, ResetTarget

POLL_TIMEOUT = 5.0  # seconds a page of records may take to arrive


@dataclass(frozen=True)
class Record:
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _headers(raw: Any) -> list[tuple[str, bytes | None]]:
    """A consumed record's headers as a list (librdkafka gives a list of pairs, or None)."""
    return [(name, value) for name, value in raw or ()]


def _source(source: Any) -> str:
    """Kafka's name of a config's source (librdkafka gives its number)."""
    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


class ClusterView:
    """One cluster as the console sees it, through one long-lived admin client."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = self.cluster.admin()
        return self._admin

    def brokers(self) -> dict[str, Any]:
        md = self.cluster.metadata(self.admin)
        return {
            "cluster_id": md.cluster_id,
            "controller": md.controller_id,
            "brokers": [
                {"id": b.id, "host": b.host, "port": b.port, "controller": b.id == md.controller_id}
                for b in sorted(md.brokers.values(), key=lambda b: b.id)
            ],
        }

    def topics(self) -> list[dict[str, Any]]:
        md = self.cluster.metadata(self.admin)
        return [
            {"name": name, "partitions": len(t.partitions)} for name, t in sorted(md.topics.items())
        ]

    def topic(self, name: str) -> dict[str, Any]:
        md = self.cluster.metadata(self.admin)
        if name not in md.topics:
            fail(f"topic '{name}' does not exist")
        partitions = sorted(md.topics[name].partitions.values(), key=lambda p: p.id)
        tps = [(name, p.id) for p in partitions]
        earliest = groups.list_offsets(self.cluster, self.admin, tps, OffsetSpec.earliest())
        latest = groups.list_offsets(self.cluster, self.admin, tps, OffsetSpec.latest())
        return {
            "name": name,
            "partitions": [
                {
                    "partition": p.id,
                    "leader": p.leader,
                    "replicas": list(p.replicas),
                    "isr": list(p.isrs),
                    "earliest": earliest.get((name, p.id)),
                    "latest": latest.get((name, p.id)),
                }
                for p in partitions
            ],
            "configs": self._configs(name),
        }

    def _configs(self, name: str) -> list[dict[str, Any]]:
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        future = self.admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT)
        try:
            entries = future[resource].result()
        except KafkaException as exc:
            self.cluster.fail_with(exc, f"describe the configs of topic '{name}'", name)
        return [
            {
                "name": e.name,
                "value": "(sensitive)" if e.is_sensitive else e.value,
                "source": _source(e.source),
                "default": e.is_default,
            }
            for e in sorted(entries.values(), key=lambda e: e.name)
        ]

    def group_ids(self) -> list[dict[str, str]]:
        try:
            result = self.admin.list_consumer_groups(request_timeout=REQUEST_TIMEOUT).result()
        except KafkaException as exc:
            self.cluster.fail_with(exc, "list groups")
        return sorted(
            ({"group": g.group_id, "state": groups.state_name(g.state)} for g in result.valid),
            key=lambda g: g["group"],
        )

    def group(self, group: str) -> dict[str, Any]:
        """Members, assignments and each partition's committed offset, log end and lag."""
        return groups.group_info(self.cluster, self.admin, group)

    def all_lags(self) -> dict[str, dict[Partition, int | None]]:
        """Every group's lag per partition: one sampling round of the lag chart."""
        lags = {}
        for g in self.group_ids():
            try:
                info = self.group(g["group"])
            except Failure:
                continue  # gone since the listing: one group must not cost the others' sample
            lags[g["group"]] = {(o["topic"], o["partition"]): o["lag"] for o in info["offsets"]}
        return lags

    def reset_offsets(self, group: str, topic: str, target: ResetTarget) -> list[PlannedReset]:
        """Move an empty group's committed offsets of every partition of `topic`."""
        md = self.cluster.metadata(self.admin)
        plan = groups.plan_group_reset(self.cluster, self.admin, md, group, [topic], False, target)
        groups.apply_reset(self.cluster, self.admin, group, plan)
        return plan

    def _partition(self, topic: str, partition: int) -> None:
        md = self.cluster.metadata(self.admin)
        if topic not in md.topics:
            fail(f"topic '{topic}' does not exist")
        count = len(md.topics[topic].partitions)
        if partition >= count:
            fail(f"topic '{topic}' has no partition {partition} (it has {count})")

    def offset_for_time(self, topic: str, partition: int, epoch_ms: int) -> int:
        """The first offset at or after the time; the log end when no record is that late."""
        self._partition(topic, partition)
        tp = (topic, partition)
        found = groups.list_offsets(
            self.cluster, self.admin, [tp], OffsetSpec.for_timestamp(epoch_ms)
        )[tp]
        if found is None or found < 0:
            found = groups.list_offsets(self.cluster, self.admin, [tp], OffsetSpec.latest())[tp]
        return found or 0

    def records(
        self, topic: str, partition: int, offset: int, limit: int
    ) -> tuple[list[Record], int, int]:
        """Up to `limit` records from `offset`, and the partition's earliest and latest offsets."""
        self._partition(topic, partition)
        tp = (topic, partition)
        low = groups.list_offsets(self.cluster, self.admin, [tp], OffsetSpec.earliest())[tp] or 0
        high = groups.list_offsets(self.cluster, self.admin, [tp], OffsetSpec.latest())[tp] or 0
        start = max(offset, low)
        if start >= high:
            return [], low, high
        consumer = self.cluster.consumer(
            **{
                # Reading by assignment: the group id is never joined and nothing is committed.
                "group.id": f"samsa-console-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        out: list[Record] = []
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            deadline = time.monotonic() + POLL_TIMEOUT
            want = min(limit, high - start)
            while len(out) < want and time.monotonic() < deadline:
                for msg in consumer.consume(want - len(out), timeout=0.5):
                    if msg.error() is not None:
                        continue
                    kind, ts = msg.timestamp()
                    out.append(
                        Record(
                            offset=msg.offset() or 0,
                            timestamp=ts if kind else None,
                            key=msg.key(),
                            value=msg.value(),
                            headers=_headers(msg.headers()),
                        )
                    )
        finally:
            consumer.close()
        return out[:limit], low, high

    def produce(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, str | bytes | None]],
    ) -> tuple[int, int]:
        """Send one record with acks=all; its partition and offset."""
        self._partition(topic, partition or 0)
        producer = self.cluster.producer(acks="all", **{"message.timeout.ms": 15000})
        delivered: list[Any] = []
        extra: dict[str, Any] = {} if partition is None else {"partition": partition}
        producer.produce(
            topic,
            value=value,
            key=key,
            headers=headers,
            on_delivery=lambda err, msg: delivered.append((err, msg)),
            **extra,
        )
        producer.flush(20.0)
        if not delivered:
            fail(f"the record to '{topic}' was not acknowledged in time")
        err, msg = delivered[0]
        if err is not None:
            self.cluster.fail_with(err, f"produce to '{topic}'", topic)
        return msg.partition(), msg.offset()
