"""The independent checker: judges a campaign from its operation logs and the final full read,
knowing nothing of the broker (it must not import samsa; .importlinter and a test hold it).

Per partition it counts acknowledged records lost, records the group consumed that the final
read contradicts, duplicates and reordering within an
idempotent producer, acknowledged offsets that the final read contradicts, records read that
were never acknowledged (allowed), acks=1 records lost (allowed, as Kafka documents for leader
failures), consumer offsets that went backwards after a commit, and the longest gap without a
successful acks=all write, by the fault under way. Only the first six kinds of figure, and
offsets going backwards, are violations.

Log lines (JSON, one file per worker, ``final.jsonl`` for the final read, ``nemesis.jsonl``):
``produce`` {producer, idempotent, acks, topic, partition, key, value, seq, t0, t1, ok, offset};
``consume`` {member, t, topic, partition, offset, value}; ``assign``/``revoke`` {member, t,
partitions}; ``commit`` {member, topic, partition, offset, t0, t1, ok}; ``final`` {topic,
partition, offset, key, value}; ``committed`` {topic, partition, offset}; ``fault`` {kind,
t_inject, t_heal, t_recovered}; ``compacted`` {topic} marks a topic whose older values by key may
be gone.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

Partition = tuple[str, int]
# Gaps between acknowledged writes shorter than this are the load's own pace, not unavailability.
GAP_FLOOR_S = 1.0


@dataclass
class PartitionFigures:
    acked: int = 0
    acked_acks1: int = 0
    acked_without_offset: int = 0
    read: int = 0
    lost: int = 0
    duplicates: int = 0
    reordered: int = 0
    offset_mismatch: int = 0
    unacked_read: int = 0
    acks1_lost: int = 0
    commits: int = 0
    consumed: int = 0
    # A record the group consumed (below the high watermark, so committed) that the final read
    # does not hold at that offset.
    consumed_diverged: int = 0
    offsets_backwards: int = 0
    longest_gap_s: float = 0.0

    def violations(self) -> int:
        return (
            self.lost
            + self.duplicates
            + self.reordered
            + self.offset_mismatch
            + self.consumed_diverged
            + self.offsets_backwards
        )


@dataclass
class Gap:
    """A gap without an acknowledged acks=all write, beside the fault it is blamed on: how long
    that fault held (injection to heal), and when writes came back, counted from the heal
    (negative: during the fault, so the cluster worked around it)."""

    seconds: float
    held_s: float | None = None
    back_after_heal_s: float | None = None


@dataclass
class Verdict:
    partitions: dict[str, PartitionFigures] = field(default_factory=dict)
    # The longest gap without an acknowledged acks=all write, by the fault under way ("none").
    gaps_by_kind: dict[str, float] = field(default_factory=dict)
    # The same gaps with the fault's own timing.
    gap_details: dict[str, Gap] = field(default_factory=dict)
    acks1_lost_by_kind: dict[str, int] = field(default_factory=dict)
    operations: dict[str, int] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def total(self, figure: str) -> int:
        return sum(int(getattr(f, figure)) for f in self.partitions.values())

    @property
    def ok(self) -> bool:
        return all(f.violations() == 0 for f in self.partitions.values())

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"ok": self.ok}


def read_logs(log_dir: Path) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for path in sorted(Path(log_dir).glob("*.jsonl")):
        with path.open() as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        ops.append(json.loads(line))
                    except ValueError:
                        # The last line of a worker killed mid-write; nothing was completed by it.
                        continue
    return ops


def _key(op: dict[str, Any]) -> str:
    return f"{op['topic']}-{op['partition']}"


def _fault_at(faults: list[dict[str, Any]], start: float, end: float) -> dict[str, Any] | None:
    """The fault under way (injected, not yet recovered) for most of [start, end]."""
    best: dict[str, Any] | None = None
    overlap = 0.0
    for f in faults:
        shared = min(end, f.get("t_recovered", f.get("t_heal", end))) - max(start, f["t_inject"])
        if shared > overlap:
            best, overlap = f, shared
    return best


def _gap(seconds: float, fault: dict[str, Any] | None, end: float) -> Gap:
    if fault is None or "t_heal" not in fault:
        return Gap(seconds)
    return Gap(
        seconds,
        round(fault["t_heal"] - fault["t_inject"], 3),
        round(end - fault["t_heal"], 3),
    )


def _fault_before(faults: list[dict[str, Any]], t: float) -> str:
    """The fault under way at ``t``, else the next one after it: what could undo a write
    acknowledged at ``t``."""
    for f in faults:
        if f.get("t_recovered", f.get("t_heal", t)) >= t:
            return str(f["kind"])
    return "none"


def check(ops: Iterable[dict[str, Any]]) -> Verdict:
    verdict = Verdict()
    produced: dict[str, list[dict[str, Any]]] = defaultdict(list)
    final: dict[str, list[dict[str, Any]]] = defaultdict(list)
    commits: dict[str, list[dict[str, Any]]] = defaultdict(list)
    committed_final: dict[str, int] = {}
    by_member: dict[str, list[dict[str, Any]]] = defaultdict(list)
    consumed: dict[str, list[dict[str, Any]]] = defaultdict(list)
    faults: list[dict[str, Any]] = []
    compacted: set[str] = set()
    counts: Counter[str] = Counter()
    for op in ops:
        kind = op.get("op", "")
        counts[kind] += 1
        if kind == "produce":
            produced[_key(op)].append(op)
        elif kind == "final":
            final[_key(op)].append(op)
        elif kind == "commit":
            commits[_key(op)].append(op)
        elif kind == "committed":
            if op.get("offset", -1) >= 0:
                committed_final[_key(op)] = int(op["offset"])
        elif kind in ("consume", "assign", "revoke"):
            by_member[op["member"]].append(op)
            if kind == "consume":
                consumed[_key(op)].append(op)
        elif kind == "fault":
            faults.append(op)
        elif kind == "compacted":
            compacted.add(op["topic"])
    faults.sort(key=lambda f: f["t_inject"])
    verdict.operations = dict(sorted(counts.items()))
    verdict.faults = dict(sorted(Counter(str(f["kind"]) for f in faults).items()))
    gaps: dict[str, Gap] = {}
    acks1_lost: Counter[str] = Counter()

    for part in sorted(set(produced) | set(final)):
        fig = verdict.partitions.setdefault(part, PartitionFigures())
        topic = part.rsplit("-", 1)[0]
        records = sorted(final.get(part, []), key=lambda r: r["offset"])
        fig.read = len(records)
        where: dict[str, list[int]] = defaultdict(list)
        # Per key, the newest record the final read holds: its offset, producer and sequence.
        last_of_key: dict[str, tuple[int, str, int]] = {}
        for r in records:
            where[r["value"]].append(r["offset"])
            if r.get("key") is not None:
                producer, _, seq = str(r["value"]).rpartition(":")
                newest = last_of_key.get(r["key"])
                if newest is None or r["offset"] > newest[0]:
                    last_of_key[r["key"]] = (r["offset"], producer, int(seq))
        acked = [p for p in produced.get(part, []) if p["ok"]]
        acked_values = {p["value"] for p in acked}
        idempotent_producers = {p["producer"] for p in produced.get(part, []) if p["idempotent"]}
        for p in acked:
            strong = str(p["acks"]) in ("all", "-1")
            if strong:
                fig.acked += 1
            else:
                fig.acked_acks1 += 1
            if p["offset"] is None:
                # Acknowledged without an offset: librdkafka's idempotent producer reports a
                # batch whose own answer was lost as persisted once a later batch of the same
                # producer is acknowledged ("implicitly acked"); it must still be found.
                fig.acked_without_offset += 1
            found = where.get(p["value"], [])
            newest = last_of_key.get(p.get("key") or "")
            superseded = (
                topic in compacted
                and newest is not None
                and (
                    newest[0] > p["offset"]
                    if p["offset"] is not None
                    # Without its offset: a later record of the same idempotent producer comes
                    # after it in the log.
                    else newest[1] == p["producer"] and newest[2] > p["seq"]
                )
            )
            if not found and not superseded:
                if strong:
                    fig.lost += 1
                    _example(verdict, f"{part}: acknowledged {p['value']} at {p['offset']} lost")
                else:
                    fig.acks1_lost += 1
                    acks1_lost[_fault_before(faults, p["t1"])] += 1
            elif found and strong and p["offset"] is not None and p["offset"] not in found:
                fig.offset_mismatch += 1
                _example(
                    verdict, f"{part}: {p['value']} acknowledged at {p['offset']}, read at {found}"
                )
        by_producer: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for value, offsets in where.items():
            producer, _, seq = value.rpartition(":")
            if value not in acked_values:
                fig.unacked_read += len(offsets)
            if producer in idempotent_producers:
                if len(offsets) > 1:
                    fig.duplicates += len(offsets) - 1
                    _example(verdict, f"{part}: {value} read at offsets {offsets}")
                by_producer[producer].extend((o, int(seq)) for o in offsets)
        for producer, seen in by_producer.items():
            seen.sort()
            for (o1, s1), (o2, s2) in itertools.pairwise(seen):
                if s2 < s1:
                    fig.reordered += 1
                    _example(
                        verdict, f"{part}: {producer} seq {s1} at {o1} before seq {s2} at {o2}"
                    )
        strong_acks = sorted(p["t1"] for p in acked if str(p["acks"]) in ("all", "-1"))
        for a, b in itertools.pairwise(strong_acks):
            gap = b - a
            fig.longest_gap_s = max(fig.longest_gap_s, round(gap, 3))
            if gap >= GAP_FLOOR_S:
                fault = _fault_at(faults, a, b)
                kind = "none" if fault is None else str(fault["kind"])
                if kind not in gaps or gap > gaps[kind].seconds:
                    gaps[kind] = _gap(round(gap, 3), fault, b)

    for part, reads in consumed.items():
        fig = verdict.partitions.setdefault(part, PartitionFigures())
        at = {r["offset"]: r["value"] for r in final.get(part, [])}
        fig.consumed = len(reads)
        for r in reads:
            if part.rsplit("-", 1)[0] not in compacted and at.get(r["offset"]) != r["value"]:
                fig.consumed_diverged += 1
                _example(
                    verdict,
                    f"{part}: {r['member']} consumed {r['value']} at {r['offset']}, "
                    f"the final read has {at.get(r['offset'])}",
                )

    for part, ops_ in commits.items():
        fig = verdict.partitions.setdefault(part, PartitionFigures())
        ok = sorted((c for c in ops_ if c["ok"]), key=lambda c: c["t1"])
        fig.commits = len(ok)
        for c1, c2 in itertools.pairwise(ok):
            if c2["offset"] < c1["offset"]:
                fig.offsets_backwards += 1
                _example(verdict, f"{part}: commit {c2['offset']} after commit {c1['offset']}")
        if ok and part in committed_final and committed_final[part] < ok[-1]["offset"]:
            fig.offsets_backwards += 1
            _example(
                verdict,
                f"{part}: committed offset {committed_final[part]} at the end, "
                f"after a commit of {ok[-1]['offset']}",
            )
    for member_ops in by_member.values():
        _check_restarts(verdict, member_ops, commits)

    verdict.gap_details = dict(sorted(gaps.items()))
    verdict.gaps_by_kind = {kind: g.seconds for kind, g in verdict.gap_details.items()}
    verdict.acks1_lost_by_kind = dict(sorted(acks1_lost.items()))
    return verdict


def _check_restarts(
    verdict: Verdict, member_ops: list[dict[str, Any]], commits: dict[str, list[dict[str, Any]]]
) -> None:
    """A member given a partition must resume at or past the last offset committed before."""
    waiting: dict[int, float] = {}
    for op in sorted(member_ops, key=lambda o: o["t"]):
        if op["op"] == "assign":
            for p in op["partitions"]:
                waiting[p] = op["t"]
        elif op["op"] == "revoke":
            for p in op["partitions"]:
                waiting.pop(p, None)
        elif op["op"] == "consume" and op["partition"] in waiting:
            assigned_at = waiting.pop(op["partition"])
            part = _key(op)
            before = [
                c["offset"] for c in commits.get(part, []) if c["ok"] and c["t1"] <= assigned_at
            ]
            if before and op["offset"] < max(before):
                fig = verdict.partitions.setdefault(part, PartitionFigures())
                fig.offsets_backwards += 1
                _example(
                    verdict,
                    f"{part}: {op['member']} resumed at {op['offset']} after a commit of "
                    f"{max(before)}",
                )


def _example(verdict: Verdict, text: str) -> None:
    if len(verdict.examples) < 50:
        verdict.examples.append(text)
