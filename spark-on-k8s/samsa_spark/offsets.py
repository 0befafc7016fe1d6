"""Offset arithmetic for planning reads, no I/O: resolving start and end positions against what
the brokers hold, splitting ranges into Spark partitions, and rate limits.

Positions are ``dict[(topic, partition), offset]``; Spark's streaming offsets are the same thing
as JSON, ``{"topic": {"0": 42}}``, the format of Spark's own Kafka source.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from samsa_spark.options import EARLIEST, LATEST, OffsetSpec, SamsaOptionError

TP = tuple[str, int]
Positions = dict[TP, int]


@dataclass(frozen=True)
class OffsetRange:
    """Records [from_offset, until_offset) of one topic-partition: one Spark input partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def to_json(positions: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (t, p), off in sorted(positions.items()):
        out.setdefault(t, {})[str(p)] = off
    return out


def from_json(value: Mapping[str, Mapping[str, int]]) -> Positions:
    return {(t, int(p)): int(off) for t, parts in value.items() for p, off in parts.items()}


def resolve(
    spec: OffsetSpec,
    option: str,
    tps: Iterable[TP],
    earliest: Mapping[TP, int],
    latest: Mapping[TP, int],
    by_timestamp: Mapping[TP, int] | None,
    fail_on_data_loss: bool,
    timestamp_strategy: str = "error",
) -> Positions:
    """The offset each partition starts (or ends) at, checked against the log's bounds.

    `by_timestamp` holds the brokers' answer for a timestamp spec: the first offset at or after
    the timestamp, or -1 where there is none.
    """
    tps = list(tps)
    if spec.kind == "earliest":
        return {tp: earliest[tp] for tp in tps}
    if spec.kind == "latest":
        return {tp: latest[tp] for tp in tps}
    if spec.kind == "timestamp":
        assert by_timestamp is not None
        out: Positions = {}
        for tp in tps:
            off = by_timestamp[tp]
            if off < 0:
                if timestamp_strategy == "latest" or option.startswith("ending"):
                    off = latest[tp]
                else:
                    raise SamsaOptionError(
                        f"option {option}: no record at or after timestamp {spec.timestamp_ms} in "
                        f"{tp[0]}/{tp[1]} (set startingOffsetsByTimestampStrategy=latest to start "
                        "at the end instead)"
                    )
            out[tp] = off
        return out
    given = {(t, p): off for t, parts in spec.offsets.items() for p, off in parts.items()}
    wanted = set(tps)
    if set(given) != wanted:
        missing = sorted(wanted - set(given))
        extra = sorted(set(given) - wanted)
        detail = []
        if missing:
            detail.append("missing " + ", ".join(f"{t}/{p}" for t, p in missing))
        if extra:
            detail.append("not subscribed " + ", ".join(f"{t}/{p}" for t, p in extra))
        raise SamsaOptionError(
            f"option {option}: specific offsets must name every subscribed partition "
            f"({'; '.join(detail)})"
        )
    out = {}
    for tp in tps:
        off = given[tp]
        if off == EARLIEST:
            off = earliest[tp]
        elif off == LATEST:
            off = latest[tp]
        elif off < earliest[tp]:
            if fail_on_data_loss:
                raise SamsaOptionError(
                    f"option {option}: offset {off} of {tp[0]}/{tp[1]} is out of range, before "
                    f"the earliest available offset {earliest[tp]} (the records are gone; "
                    "set failOnDataLoss=false to skip them)"
                )
            off = earliest[tp]
        elif off > latest[tp]:
            if fail_on_data_loss:
                raise SamsaOptionError(
                    f"option {option}: offset {off} of {tp[0]}/{tp[1]} is out of range, past the "
                    f"latest offset {latest[tp]} (set failOnDataLoss=false to start there instead)"
                )
            off = latest[tp]
        out[tp] = off
    return out


def plan_ranges(
    start: Mapping[TP, int], end: Mapping[TP, int], min_partitions: int | None = None
) -> list[OffsetRange]:
    """One range per topic-partition with records between start and end; with `min_partitions`,
    large ranges are split so that there are at least that many (as Spark's Kafka source does).
    """
    ranges = [
        OffsetRange(t, p, start.get((t, p), 0), end[(t, p)])
        for (t, p) in sorted(end)
        if end[(t, p)] > start.get((t, p), 0)
    ]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        pieces = max(1, min(r.size, math.ceil(r.size / total * min_partitions)))
        bounds = [r.from_offset + (r.size * i) // pieces for i in range(pieces + 1)]
        out.extend(
            OffsetRange(r.topic, r.partition, lo, hi)
            for lo, hi in itertools.pairwise(bounds)
            if hi > lo
        )
    return out


# A micro-batch of at most this many records is read by one task.
SMALL_BATCH = 20_000


def group_small(
    ranges: list[OffsetRange], small: int = SMALL_BATCH
) -> list[tuple[OffsetRange, ...]]:
    """The ranges as Spark partitions: all in one when together they hold `small` records or
    fewer, else one each. Each task of a Python source costs Python worker round trips (about
    0.1-0.3 s here), which a small streaming micro-batch would otherwise pay once for every
    topic-partition with new records."""
    if ranges and sum(r.size for r in ranges) <= small:
        return [tuple(ranges)]
    return [(r,) for r in ranges]


def rate_limit(start: Mapping[TP, int], latest: Mapping[TP, int], max_rows: int) -> Positions:
    """End positions that take at most `max_rows` records, shared in proportion to each
    partition's backlog (Spark's Kafka source does the same); every partition with a backlog
    advances by at least one record so that none starves.
    """
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    end: Positions = {}
    for tp, off in latest.items():
        begin = start.get(tp, off)
        if backlog[tp] == 0:
            end[tp] = begin
            continue
        share = max(1, math.floor(backlog[tp] / total * max_rows))
        end[tp] = min(off, begin + share)
    return end
