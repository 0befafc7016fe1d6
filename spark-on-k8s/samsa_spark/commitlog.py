"""The streaming sink's commit log, as data: marker records and the replay arithmetic, no I/O.

A sink's commit log is a topic with two partitions:

- partition 0 holds one *batch marker* per published micro-batch, written by the driver once
  every task of the batch has flushed. It says the batch is fully published, and records the
  *fence*: the end offset of every partition the sink writes to, at that moment. The last
  record of partition 0 is all a reader ever needs.
- partition 1 holds one *task marker* per task attempt, written by the task before it
  publishes anything. A task that finds a marker for its own (batch, partition) left since the
  last batch marker knows an earlier attempt may have published part of its rows.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

TAG_HEADER = "samsa.sink.batch"

# (topic, key, value, headers): what makes two published records the same record.
Identity = tuple[str, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


# Every query's commit log is named with it: the prefix a principal under ACLs is granted.
COMMIT_LOG_PREFIX = "_samsa-sink-"


def commit_log_topic(query_id: str) -> str:
    return f"{COMMIT_LOG_PREFIX}{query_id}"


def tag(query_id: str, batch_id: int, task: int) -> bytes:
    return f"{query_id}:{batch_id}:{task}".encode()


@dataclass(frozen=True)
class BatchMarker:
    batch_id: int
    fence: dict[str, dict[int, int]] = field(default_factory=dict)
    task_log_end: int = 0  # partition 1's end offset when the batch was marked

    def encode(self) -> bytes:
        return json.dumps(
            {
                "batchId": self.batch_id,
                "fence": {t: {str(p): o for p, o in ps.items()} for t, ps in self.fence.items()},
                "taskLogEnd": self.task_log_end,
            },
            sort_keys=True,
        ).encode()

    @staticmethod
    def decode(raw: bytes) -> BatchMarker:
        d = json.loads(raw)
        return BatchMarker(
            int(d["batchId"]),
            {t: {int(p): int(o) for p, o in ps.items()} for t, ps in d.get("fence", {}).items()},
            int(d.get("taskLogEnd", 0)),
        )


@dataclass(frozen=True)
class TaskMarker:
    batch_id: int
    task: int
    attempt: int

    def encode(self) -> bytes:
        return json.dumps(
            {"batchId": self.batch_id, "task": self.task, "attempt": self.attempt}
        ).encode()

    @staticmethod
    def decode(raw: bytes) -> TaskMarker:
        d = json.loads(raw)
        return TaskMarker(int(d["batchId"]), int(d["task"]), int(d["attempt"]))


def already_published(last: BatchMarker | None, batch_id: int) -> bool:
    """Spark numbers micro-batches in order, so a marker for this batch or a later one means
    every record of this batch is on the brokers."""
    return last is not None and last.batch_id >= batch_id


def earlier_attempt(markers: Iterable[TaskMarker], batch_id: int, task: int) -> bool:
    return any(m.batch_id == batch_id and m.task == task for m in markers)


def next_fence(
    previous: BatchMarker | None, written: Mapping[str, Mapping[int, int]]
) -> dict[str, dict[int, int]]:
    """The fence of a new batch marker: the end offsets just read for the topics this batch
    wrote, and the previous fence carried forward for the others."""
    fence = {t: dict(ps) for t, ps in (previous.fence if previous else {}).items()}
    for t, ps in written.items():
        fence[t] = dict(ps)
    return fence


R = TypeVar("R")


def missing(
    to_publish: Iterable[R], present: Counter[Identity], identity: Callable[[R], Identity]
) -> list[R]:
    """The records of a replayed task still to publish: its rows less those an earlier
    attempt already published (a multiset difference, so repeated rows are counted)."""
    left = Counter(present)
    out: list[R] = []
    for rec in to_publish:
        key = identity(rec)
        if left[key] > 0:
            left[key] -= 1
        else:
            out.append(rec)
    return out
