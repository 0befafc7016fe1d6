"""Pieces of the consumer-group tests: indexed records, group members run by real clients.

Every record's value is its index (seven digits), so whichever member of whichever group
handles it, the tests can tell which record it was and whether it came twice.
"""

from __future__ import annotations

import datetime
import json
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from kafka_support import Wire, producer, wait_until
from kio.index import load_request_schema

# Rebalances at once (no initial delay), and the shortest session timeout Kafka allows by
# default: a dead member is noticed within six seconds.
GROUP_BROKER_CONFIG = {"group.initial.rebalance.delay.ms": "0"}
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500

# Kafka error codes the group tests look for.
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82

MEMBER_SCRIPT = Path(__file__).with_name("member_process.py")


def member_config(bootstrap: str, group: str, **extra: Any) -> dict[str, Any]:
    """A confluent-kafka consumer of a group that commits by hand after processing."""
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        "fetch.wait.max.ms": 100,
        "socket.timeout.ms": 10000,
    }
    config.update(extra)
    return config


def value_of(index: int) -> bytes:
    return b"%07d" % index


def index_of(value: bytes | None) -> int:
    assert value is not None, "a record came back with a null value"
    return int(value)


def fill(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    """Produce records start..start+count-1 round-robin over the partitions, all delivered."""
    p = producer(bootstrap, **{"linger.ms": 20, "batch.num.messages": 10_000})
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for i in range(start, start + count):
        while True:
            try:
                p.produce(topic, value_of(i), partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0, "records were not delivered within 60 s"
    assert not errors, errors[:5]


@dataclass(frozen=True)
class Handled:
    """One record as a member handled it."""

    partition: int
    offset: int
    index: int


@dataclass(frozen=True)
class Rebalance:
    """A rebalance callback: when, which kind (assign, revoke, lost) and which partitions."""

    at: float
    kind: str
    partitions: tuple[int, ...]


class Member:
    """A confluent-kafka group member polling in its own thread.

    It handles each batch (records the records), then commits synchronously: the usual
    at-least-once loop.  Rebalance callbacks are recorded with their time.
    """

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topics: Sequence[str],
        *,
        batch: int = 500,
        commit: bool = True,
        **config: Any,
    ) -> None:
        self.config = member_config(bootstrap, group, **config)
        self.topics = list(topics)
        self.batch = batch
        self.commit = commit
        self.handled: list[Handled] = []
        self.events: list[Rebalance] = []
        self.assignment: set[int] = set()
        self.errors: list[str] = []
        self.commits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{group}", daemon=True)

    def start(self) -> Member:
        self._thread.start()
        return self

    def _on_assign(self, _c: Consumer, partitions: list[TopicPartition]) -> None:
        self.events.append(Rebalance(time.monotonic(), "assign", _ids(partitions)))
        self.assignment |= set(_ids(partitions))

    def _on_revoke(self, _c: Consumer, partitions: list[TopicPartition], kind: str) -> None:
        self.events.append(Rebalance(time.monotonic(), kind, _ids(partitions)))
        self.assignment -= set(_ids(partitions))

    def _run(self) -> None:
        consumer = Consumer(self.config)
        try:
            consumer.subscribe(
                self.topics,
                on_assign=self._on_assign,
                on_revoke=lambda c, ps: self._on_revoke(c, ps, "revoke"),
                on_lost=lambda c, ps: self._on_revoke(c, ps, "lost"),
            )
            while not self._stop.is_set():
                messages = consumer.consume(self.batch, 0.1)
                for m in messages:
                    if m.error() is not None:
                        self.errors.append(str(m.error()))
                        continue
                    self.handled.append(Handled(m.partition(), m.offset(), index_of(m.value())))
                if messages and self.commit:
                    try:
                        consumer.commit(asynchronous=False)
                        self.commits += 1
                    except KafkaException as exc:
                        self.errors.append(f"commit: {exc.args[0]}")
        except Exception as exc:  # the test thread reports it
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "a member did not close within 30 s"

    def rebalances_since(self, when: float, kind: str = "assign") -> list[Rebalance]:
        return [e for e in self.events if e.at >= when and e.kind == kind]


def _ids(partitions: Iterable[TopicPartition]) -> tuple[int, ...]:
    return tuple(sorted(tp.partition for tp in partitions))


def stop_all(members: Iterable[Member]) -> None:
    for m in members:
        m._stop.set()  # all at once: no rebalance per member leaving
    for m in members:
        m.stop()


def balanced(assignments: Sequence[set[int]], partitions: int) -> bool:
    """Every partition assigned, to exactly one member, and every member has its share."""
    every = [p for a in assignments for p in a]
    share = partitions // len(assignments)
    return sorted(every) == list(range(partitions)) and all(len(a) >= share for a in assignments)


def wait_balanced(members: Sequence[Member], partitions: int, timeout: float = 30.0) -> None:
    wait_until(
        lambda: balanced([m.assignment for m in members], partitions),
        timeout,
        what=f"{len(members)} members to share {partitions} partitions "
        f"(now {[sorted(m.assignment) for m in members]})",
    )


def wait_handled(members: Sequence[Member], count: int, timeout: float = 60.0) -> None:
    """Until the members together have handled every index 0..count-1 at least once."""

    def done() -> bool:
        return len({h.index for m in members for h in m.handled}) >= count

    wait_until(done, timeout, 0.1, f"{count} records handled")


def assert_exactly_once(handled: Sequence[Handled], count: int, first: int = 0) -> None:
    """Every index first..first+count-1 handled once and only once, and no other."""
    times = Counter(h.index for h in handled)
    twice = sorted(i for i, n in times.items() if n > 1)
    missing = sorted(set(range(first, first + count)) - set(times))
    assert not twice, f"{len(twice)} records handled more than once, e.g. {twice[:5]}"
    assert not missing, f"{len(missing)} records never handled, e.g. {missing[:5]}"
    assert len(handled) == count


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets, of the partitions that have one (OffsetFetch through a
    consumer that does not join)."""
    c = Consumer(member_config(bootstrap, group))
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer(member_config(bootstrap, "end-offsets"))
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(partitions)
        }
    finally:
        c.close()


# -- a member in its own process, to be killed ----------------------------------------------


class MemberProcess:
    """``member_process.py`` in a subprocess: a confluent-kafka member that reports every
    rebalance, handled batch and commit as a JSON line, and stalls when told to."""

    def __init__(
        self, bootstrap: str, group: str, topic: str, batch: int, stall_after: int, **config: Any
    ) -> None:
        options = {
            "config": member_config(bootstrap, group, **config),
            "topic": topic,
            "batch": batch,
            "stall_after": stall_after,
        }
        args = [sys.executable, str(MEMBER_SCRIPT), json.dumps(options)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(json.loads(line))

    def saw(self, event: str) -> bool:
        return any(line["event"] == event for line in self.lines)

    @property
    def assignment(self) -> set[int]:
        current: set[int] = set()
        for line in self.lines:
            if line["event"] == "assign":
                current |= set(line["partitions"])
            elif line["event"] in ("revoke", "lost"):
                current -= set(line["partitions"])
        return current

    @property
    def handled(self) -> list[Handled]:
        return [
            Handled(*r)
            for line in self.lines
            if line["event"] == "handled"
            for r in line["records"]
        ]

    @property
    def committed(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for line in self.lines:
            if line["event"] == "committed":
                out.update({int(p): o for p, o in line["offsets"].items()})
        return out

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._reader.join(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


# -- a group member on the raw wire ----------------------------------------------------------


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: the JoinGroup metadata of a consumer."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)  # no user data


def assignment(topic: str, partitions: Sequence[int]) -> bytes:
    """ConsumerProtocolAssignment v0: one topic's partitions for a member."""
    out = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


def _schema(api_key: int, version: int, *names: str) -> tuple[Any, ...]:
    cls = load_request_schema(api_key, version)
    module = __import__(cls.__module__, fromlist=list(names))
    return (cls, *(getattr(module, n) for n in names))


class RawMember:
    """One member of a group speaking the group APIs over its own connection: JoinGroup v5,
    SyncGroup v3, Heartbeat v3, LeaveGroup v3, OffsetCommit v8 and OffsetFetch v7.

    Each call returns the Kafka error code(s), as a client would see them."""

    JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH = 11, 14, 12, 13, 8, 9

    def __init__(self, port: int, group: str, topic: str, instance: str | None = None) -> None:
        self.wire = Wire(port, timeout=30)
        self.group = group
        self.topic = topic
        self.instance = instance
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.members: list[str] = []
        self._pending: int | None = None

    def close(self) -> None:
        self.wire.close()

    # JoinGroup blocks until the rebalance completes, so it is sent and read apart.
    def send_join(
        self,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        protocol_type: str = "consumer",
        protocols: Sequence[tuple[str, bytes]] | None = None,
    ) -> None:
        cls, protocol = _schema(self.JOIN, 5, "JoinGroupRequestProtocol")
        body = cls(
            group_id=self.group,
            session_timeout=datetime.timedelta(milliseconds=session_timeout_ms),
            rebalance_timeout=datetime.timedelta(milliseconds=10_000),
            member_id=self.member_id,
            group_instance_id=self.instance,
            protocol_type=protocol_type,
            protocols=tuple(
                protocol(name=n, metadata=m)
                for n, m in (protocols or [("range", subscription(self.topic))])
            ),
        )
        self._pending = self.wire.send_request(self.JOIN, 5, body)

    def read_join(self) -> int:
        assert self._pending is not None
        response = self.wire.read_response(self.JOIN, 5, self._pending)
        self._pending = None
        error = int(response.error_code.value)
        if response.member_id:
            self.member_id = response.member_id
        if error == NONE:
            self.generation = response.generation_id
            self.leader = response.leader
            self.members = [m.member_id for m in response.members]
        return error

    def join(self, **options: Any) -> int:
        """JoinGroup, answering MEMBER_ID_REQUIRED with the given id as clients do."""
        self.send_join(**options)
        error = self.read_join()
        if error == MEMBER_ID_REQUIRED:
            self.send_join(**options)
            error = self.read_join()
        return error

    def sync(
        self, assignments: dict[str, bytes] | None = None, generation: int | None = None
    ) -> int:
        cls, entry = _schema(self.SYNC, 3, "SyncGroupRequestAssignment")
        body = cls(
            group_id=self.group,
            generation_id=self.generation if generation is None else generation,
            member_id=self.member_id,
            group_instance_id=self.instance,
            assignments=tuple(
                entry(member_id=m, assignment=a) for m, a in (assignments or {}).items()
            ),
        )
        return int(self.wire.request(self.SYNC, 3, body).error_code.value)

    def join_alone(self, partitions: Sequence[int] = (0,)) -> None:
        """Join, lead, assign itself every partition: a stable group of one."""
        assert self.join() == NONE
        assert self.leader == self.member_id
        assert self.sync({self.member_id: assignment(self.topic, partitions)}) == NONE

    def heartbeat(self, generation: int | None = None) -> int:
        (cls,) = _schema(self.HEARTBEAT, 3)
        body = cls(
            group_id=self.group,
            generation_id=self.generation if generation is None else generation,
            member_id=self.member_id,
            group_instance_id=self.instance,
        )
        return int(self.wire.request(self.HEARTBEAT, 3, body).error_code.value)

    def leave(self) -> tuple[int, list[int]]:
        """(top-level error, per-member errors)."""
        cls, identity = _schema(self.LEAVE, 3, "MemberIdentity")
        body = cls(
            group_id=self.group,
            members=(identity(member_id=self.member_id, group_instance_id=self.instance),),
        )
        response = self.wire.request(self.LEAVE, 3, body)
        return int(response.error_code.value), [int(m.error_code.value) for m in response.members]

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        generation: int | None = None,
        member_id: str | None = None,
        metadata: str = "",
    ) -> dict[tuple[str, int], int]:
        """OffsetCommit as this member (generation and member id overridable); errors by
        (topic, partition)."""
        cls, topic_cls, partition_cls = _schema(
            self.COMMIT, 8, "OffsetCommitRequestTopic", "OffsetCommitRequestPartition"
        )
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append((p, o))
        body = cls(
            group_id=self.group,
            generation_id_or_member_epoch=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
            group_instance_id=self.instance,
            topics=tuple(
                topic_cls(
                    name=t,
                    partitions=tuple(
                        partition_cls(
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=-1,
                            committed_metadata=metadata,
                        )
                        for p, o in parts
                    ),
                )
                for t, parts in by_topic.items()
            ),
        )
        response = self.wire.request(self.COMMIT, 8, body)
        return {
            (t.name, p.partition_index): int(p.error_code.value)
            for t in response.topics
            for p in t.partitions
        }

    def fetch(self, group: str | None = None) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetFetch of every committed partition: (error, offsets by (topic, partition))."""
        (cls,) = _schema(self.FETCH, 7)
        body = cls(
            group_id=self.group if group is None else group, topics=None, require_stable=False
        )
        response = self.wire.request(self.FETCH, 7, body)
        return int(response.error_code.value), {
            (t.name, p.partition_index): p.committed_offset
            for t in response.topics
            for p in t.partitions
        }
