"""The campaign's report in markdown (docs/reliability.md): the faults by kind, the operations,
the checker's figures per partition, the longest unavailability per fault kind and what acks=1
lost."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chaos.runner import Outcome

FIGURES = [
    ("acked", "acks=all acknowledged"),
    ("acked_acks1", "acks=1 acknowledged"),
    ("acked_without_offset", "acknowledged without offset"),
    ("read", "read at the end"),
    ("lost", "acknowledged lost"),
    ("duplicates", "duplicates"),
    ("reordered", "reordered"),
    ("offset_mismatch", "offset differs from ack"),
    ("unacked_read", "read, never acknowledged"),
    ("acks1_lost", "acks=1 lost"),
    ("commits", "commits"),
    ("consumed", "consumed"),
    ("consumed_diverged", "consumed, then contradicted"),
    ("offsets_backwards", "offsets backwards"),
]


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def render(outcome: Outcome) -> str:
    v = outcome.verdict
    c = outcome.campaign
    verdict = "**passed**" if outcome.ok else "**FAILED**"
    out = [
        "# Reliability: a fault campaign with an independent checker",
        "",
        "Written by `make chaos` (`python -m chaos`): a seeded nemesis injects one fault at a "
        "time into a local cluster (ZooKeeper and "
        f"{c.brokers} brokers, replication factor 3, min.insync.replicas 2) under client load, "
        "heals it and waits until every partition has its full ISR again; the checker "
        "(`chaos/checker.py`, which shares no code with the broker) then judges the operation "
        "logs against a full read of every partition.",
        "",
        f"Seed {c.seed}, {sum(v.faults.values())} faults in {outcome.elapsed_s / 60:.1f} minutes; "
        f"verdict {verdict}. Faults not recovered from within the wait: {outcome.unrecovered}.",
        "",
    ]
    if outcome.rejudged:
        out += [
            "The verdict was given again from the campaign's kept logs "
            "(`python -m chaos --check WORKDIR`).",
            "",
        ]
    out += [
        "## Faults by kind",
        "",
        _table(["kind", "faults"], [[k, str(n)] for k, n in v.faults.items()]),
        "",
    ]
    if outcome.skipped_kinds:
        out += [f"Not applicable here: {', '.join(outcome.skipped_kinds)}.", ""]
    out += [
        "## Operations",
        "",
        _table(["operation", "count"], [[k, str(n)] for k, n in v.operations.items()]),
        "",
        "## The checker's figures",
        "",
        "Violations: acknowledged lost, duplicates, reordered, offset differs from ack, "
        "consumed then contradicted by the final read, offsets backwards. Records read that "
        "were never acknowledged (the client gave up or never heard "
        "back) are allowed; so are acks=1 losses, which Kafka documents when a leader fails "
        "before its followers copied the record.",
        "",
        _table(
            ["partition"] + [label for _, label in FIGURES],
            [[p] + [str(getattr(f, name)) for name, _ in FIGURES] for p, f in v.partitions.items()],
        ),
        "",
        "## Longest unavailability per fault kind",
        "",
        "The longest gap between two acknowledged acks=all writes on a partition, attributed to "
        "the fault under way (from injection to recovery); `none` is the load's own worst pause.",
        "",
        _table(
            ["fault kind", "longest gap (s)"], [[k, f"{g:.1f}"] for k, g in v.gaps_by_kind.items()]
        ),
        "",
        "## acks=1 losses",
        "",
        "acks=1 records acknowledged by a leader alone and gone after the fault under way (or "
        "the next one):",
        "",
        _table(
            ["fault kind", "acks=1 lost"],
            [[k, str(n)] for k, n in v.acks1_lost_by_kind.items()] or [["(none)", "0"]],
        ),
        "",
    ]
    out += ["## What the brokers logged as errors", ""]
    if outcome.broker_errors:
        out += [
            _table(
                ["logger and message (digits as N)", "lines"],
                [[f"`{m}`", str(n)] for m, n in list(outcome.broker_errors.items())[:20]],
            ),
            "",
        ]
    else:
        out += ["Nothing at ERROR or above.", ""]
    if v.examples or outcome.load_failures:
        out += ["## Violations and load failures", ""]
        out += [f"- {e}" for e in v.examples + outcome.load_failures]
        out += [""]
    return "\n".join(out)
