"""What `samsa groups` computes without a broker: lag, reset targets and the reset plan.

Kafka's rules, as kafka-consumer-groups.sh applies them: an offset outside the log is moved
to its nearest end, and a time after the last record resets to the log end.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

Partition = tuple[str, int]


def lag(committed: int | None, log_end: int | None) -> int | None:
    """Records between the group's commit and the log end (None where either is unknown)."""
    if committed is None or log_end is None:
        return None
    return max(0, log_end - committed)


def parse_topic(spec: str) -> tuple[str, list[int] | None]:
    """``topic`` (every partition) or ``topic:0,2,5``; a ValueError says what is wrong."""
    name, sep, rest = spec.partition(":")
    if not name:
        raise ValueError(f"expected TOPIC or TOPIC:PARTITION,..., got {spec!r}")
    if not sep:
        return name, None
    try:
        partitions = sorted({int(p) for p in rest.split(",")})
    except ValueError:
        raise ValueError(f"partitions of {name!r} must be numbers, got {rest!r}") from None
    if not partitions or partitions[0] < 0:
        raise ValueError(f"partitions of {name!r} must be numbers from 0, got {rest!r}")
    return name, partitions


def parse_datetime(text: str) -> int:
    """An ISO-8601 date and time as epoch milliseconds; without a zone it is local time."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"not an ISO-8601 date and time: {text!r} (e.g. 2024-05-01T12:00:00+00:00)"
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


@dataclass(frozen=True)
class ResetTarget:
    """Where to move the offsets: ``earliest``, ``latest``, ``datetime`` (epoch ms) or
    ``offset``."""

    kind: str
    value: int | None = None

    def describe(self) -> str:
        if self.kind == "datetime":
            assert self.value is not None
            when = datetime.datetime.fromtimestamp(self.value / 1000, datetime.UTC)
            return f"the first record at or after {when.isoformat()}"
        if self.kind == "offset":
            return f"offset {self.value}"
        return f"the {self.kind} offset"

    @property
    def needs_times(self) -> bool:
        return self.kind == "datetime"


def choose_target(
    to_earliest: bool, to_latest: bool, to_datetime: str | None, to_offset: int | None
) -> ResetTarget:
    """Exactly one of the four options; a ValueError otherwise."""
    chosen = [
        name
        for name, given in (
            ("--to-earliest", to_earliest),
            ("--to-latest", to_latest),
            ("--to-datetime", to_datetime is not None),
            ("--to-offset", to_offset is not None),
        )
        if given
    ]
    if len(chosen) != 1:
        options = "--to-earliest, --to-latest, --to-datetime or --to-offset"
        if not chosen:
            raise ValueError(f"say where to reset to: {options}")
        raise ValueError(f"give only one of {options} (got {' and '.join(chosen)})")
    if to_earliest:
        return ResetTarget("earliest")
    if to_latest:
        return ResetTarget("latest")
    if to_datetime is not None:
        return ResetTarget("datetime", parse_datetime(to_datetime))
    assert to_offset is not None
    if to_offset < 0:
        raise ValueError(f"--to-offset must be 0 or more, got {to_offset}")
    return ResetTarget("offset", to_offset)


@dataclass(frozen=True)
class PlannedReset:
    topic: str
    partition: int
    current: int | None
    new: int
    note: str = ""


def plan_reset(
    partitions: Iterable[Partition],
    target: ResetTarget,
    committed: Mapping[Partition, int],
    earliest: Mapping[Partition, int],
    latest: Mapping[Partition, int],
    by_time: Mapping[Partition, int] | None = None,
) -> list[PlannedReset]:
    """The new offset of each partition, sorted by topic and partition.

    ``by_time`` is ListOffsets' answer for the target time (-1: no record that late)."""
    plan = []
    for tp in sorted(set(partitions)):
        low, high = earliest[tp], latest[tp]
        note = ""
        if target.kind == "earliest":
            new = low
        elif target.kind == "latest":
            new = high
        elif target.kind == "datetime":
            assert by_time is not None
            new = by_time[tp]
            if new < 0:
                new, note = high, "no record that late: the log end"
        else:
            assert target.value is not None
            new = target.value
            if new < low:
                new, note = low, f"{target.value} is before the log start"
            elif new > high:
                new, note = high, f"{target.value} is past the log end"
        plan.append(PlannedReset(tp[0], tp[1], committed.get(tp), new, note))
    return plan
