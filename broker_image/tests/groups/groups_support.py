"""Pieces of the consumer-group tests: indexed records, group members run by real clients.

Every record's value is its index (seven digits), so whichever member of whichever group
handles it, the tests can tell which record it was and whether it came twice.
"""

from __future__ import annotations

import json
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
from kafka_support import producer, wait_until

# Rebalances at once (no initial delay), and the shortest session timeout Kafka allows by
# default: a dead member is noticed within six seconds.
GROUP_BROKER_CONFIG = {"group.initial.rebalance.delay.ms": "0"}
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500

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

    def signal_stop(self) -> None:
        """Ask the member to close, without waiting (see stop)."""
        self._stop.set()

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
        m.signal_stop()  # all at once: no rebalance per member leaving
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
