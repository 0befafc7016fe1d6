"""Issue 3's benchmark: a group of three confluent-kafka consumers over a 6-partition topic.

- msg/s of the group draining a backlog, committing synchronously after every batch it
  handles (p50/p99: how long one such commit takes), and with auto-commit (every 5 s,
  librdkafka's default): the difference is the cost of committing every batch.  Baseline
  from the same run: one consumer that assigns itself the partitions and commits nothing.
- The time from a member's kill -9 to the survivors owning every partition (bounded below
  by session.timeout.ms), and from a member's clean close (LeaveGroup) to the same: the
  rebalance alone.

Every member is its own process (bench.group_member), as in production.  The broker keeps
Kafka's group.initial.rebalance.delay.ms (3 s), so all three members start together.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench.standalone import consume_backlog, create_topic, produce_backlog, samsa_broker
from bench.table import Row, percentile

PARTITIONS = 6
MEMBERS = 3
SIZE = 100
SESSION_TIMEOUT_MS = 6000
BATCH = 1000


class MemberProcess:
    """A bench.group_member process and what it has reported so far."""

    def __init__(self, bootstrap: str, group: str, topic: str, commit: str) -> None:
        args = [
            sys.executable,
            "-m",
            "bench.group_member",
            "--bootstrap",
            bootstrap,
            "--group",
            group,
            "--topic",
            topic,
            "--commit",
            commit,
            "--batch",
            str(BATCH),
            "--session-timeout-ms",
            str(SESSION_TIMEOUT_MS),
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    @property
    def assignment(self) -> set[int]:
        owned: set[int] = set()
        for e in list(self.events):
            if e["event"] == "assign":
                owned |= set(e["partitions"])
            elif e["event"] in ("revoke", "lost"):
                owned -= set(e["partitions"])
        return owned

    def last(self, event: str) -> dict[str, Any] | None:
        return next((e for e in reversed(list(self.events)) if e["event"] == event), None)

    @property
    def progress(self) -> dict[str, Any]:
        return self.last("progress") or {"count": 0, "first": None, "last": None, "commits": 0}

    def stop(self) -> None:
        """SIGTERM: the member closes its consumer, leaving the group."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self._finish()

    def kill(self) -> None:
        self.proc.kill()
        self._finish()

    def _finish(self) -> None:
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(10)


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout}s waiting for {what}")
        time.sleep(0.01)


def _start_group(bootstrap: str, topic: str, commit: str) -> list[MemberProcess]:
    group = f"bench-{commit}-{uuid.uuid4().hex[:8]}"
    return [MemberProcess(bootstrap, group, topic, commit) for _ in range(MEMBERS)]


def _stop_all(members: list[MemberProcess]) -> None:
    for m in members:
        if m.proc.poll() is None:
            m.proc.send_signal(signal.SIGTERM)
    for m in members:
        m.stop()


def _drain(bootstrap: str, topic: str, count: int, commit: str) -> Row:
    members = _start_group(bootstrap, topic, commit)
    try:
        _wait(
            lambda: sum(m.progress["count"] for m in members) >= count,
            600,
            f"the group to handle {count} records",
        )
    finally:
        _stop_all(members)
    done = [m.progress for m in members]
    first = min(p["first"] for p in done if p["first"] is not None)
    last = max(p["last"] for p in done if p["last"] is not None)
    seconds = last - first
    handled = sum(p["count"] for p in done)
    commits = sum(p["commits"] for p in done)
    latencies = sorted(t * 1000 for p in done for t in p.get("commit_seconds", ()))
    label = "commit after every batch" if commit == "batch" else "auto-commit every 5 s"
    return Row(
        f"group of 3: {label}",
        "samsa",
        SIZE,
        handled / seconds,
        handled * SIZE / 1e6 / seconds,
        percentile(latencies, 0.5),
        percentile(latencies, 0.99),
        percentile(latencies, 0.999),
        note=f"{commits} commits ({commits / seconds:,.0f}/s), batches of up to {BATCH}"
        if commit == "batch"
        else "",
    )


def _reassignment_seconds(bootstrap: str, topic: str, how: str) -> float:
    """Seconds from one member's kill -9 (or clean close) until the other two own every
    partition."""
    members = _start_group(bootstrap, topic, "auto")
    try:
        _wait(
            lambda: all(len(m.assignment) == PARTITIONS // MEMBERS for m in members),
            60,
            "three members with two partitions each",
        )
        victim, survivors = members[0], members[1:]
        gone_at = time.monotonic()
        if how == "kill":
            victim.kill()
        else:
            victim.stop()
        _wait(
            lambda: set().union(*(m.assignment for m in survivors)) == set(range(PARTITIONS)),
            SESSION_TIMEOUT_MS / 1000 + 60,
            "the survivors to own every partition",
        )
        assigned = [m.last("assign") for m in survivors]
        return max(e["t"] for e in assigned if e is not None) - gone_at
    finally:
        _stop_all(members)


def _failover(bootstrap: str, topic: str, how: str, runs: int) -> Row:
    times = sorted(_reassignment_seconds(bootstrap, topic, how) for _ in range(runs))
    label = "kill -9 of a member" if how == "kill" else "clean close of a member"
    p50, worst = percentile(times, 0.5), times[-1]
    return Row(
        f"{label} -> all partitions reassigned",
        "samsa",
        p50_ms=None if p50 is None else p50 * 1000,
        p99_ms=worst * 1000,
        note=f"p99 column: worst of {runs} runs; session.timeout.ms={SESSION_TIMEOUT_MS}",
    )


def run(quick: bool = False) -> list[Row]:
    count = 100_000 if quick else 1_000_000
    runs = 1 if quick else 3
    rows = []
    with samsa_broker() as (bootstrap, _pid):
        topic = "bench-groups"
        create_topic(bootstrap, topic, PARTITIONS)
        produce_backlog(bootstrap, topic, count, SIZE)
        baseline = consume_backlog(bootstrap, topic, count)
        rows.append(
            Row(
                "baseline: 1 consumer, assign(), no commits",
                "samsa",
                SIZE,
                baseline["count"] / baseline["seconds"],
                baseline["count"] * SIZE / 1e6 / baseline["seconds"],
            )
        )
        rows.append(_drain(bootstrap, topic, count, "batch"))
        rows.append(_drain(bootstrap, topic, count, "auto"))
        rows.append(_failover(bootstrap, topic, "kill", runs))
        rows.append(_failover(bootstrap, topic, "leave", runs))
    return rows
