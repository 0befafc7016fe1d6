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


# How each kind of fault is meant to cost availability: the design the figures are read
# against, not a measurement.
READING = {
    "kill-broker": "nothing listens on the killed broker's port: the controller's probes "
    "(connections refused) fence it sooner than its ZooKeeper session expires, and new leaders "
    "are elected from the ISR.",
    "kill-controller": "the other brokers' probes of the controller find its port closed, a new "
    "controller is elected and fences it; its leaderships then move as for any killed broker.",
    "pause-short": "a paused broker still accepts connections in the kernel, so probes only "
    "time out and slowness is left to the session: writes wait for the pause, or until a "
    "paused follower leaves the ISR after replica.lag.time.max.ms.",
    "pause-long": "as a short pause, longer than replica.lag.time.max.ms: a paused follower "
    "leaves the ISR; a paused leader keeps its leaderships while its session lives.",
    "zookeeper-session-expiry": "a pause past the session timeout: ZooKeeper expires the "
    "session and the controller moves the broker's leaderships, so the gap is about the session "
    "timeout plus an election.",
    "zookeeper-restart": "shorter than the session timeout: sessions survive, nothing moves.",
    "partition-brokers": "a broker cut off from the other brokers but not from ZooKeeper keeps "
    "its session, so it stays registered and stays leader; its followers cannot fetch, and its "
    "request to shrink the ISR cannot reach a controller on another broker, so acks=all writes "
    "to it wait for the heal. Apache Kafka in ZooKeeper mode does the same: only a lost session "
    "moves leadership.",
    "partition-isolate": "cut off from the brokers and from ZooKeeper: its session expires and "
    "the controller moves its leaderships; clients that still reach it get no acks=all write "
    "acknowledged.",
    "partition-zookeeper": "a broker cut off from ZooKeeper alone still replicates; if it is "
    "the controller it resigns at once and another is elected.",
    "partition-one-way": "packets dropped one way between two nodes: connections stall rather "
    "than fail, as in the two-way cuts.",
    "latency": "50 to 200 ms more on every packet one broker sends: each replication round "
    "trip through it is slower, and nothing fails over.",
    "disk-full": "a leader whose disk is full refuses writes with KAFKA_STORAGE_ERROR, keeps "
    "serving reads and keeps its leaderships, and takes writes again when space returns. "
    "Apache Kafka instead takes the log directory offline (with one directory, the broker "
    "stops), which moves the leaderships.",
    "clock-step": "a broker's clock stepped by 1 s to 6 h either way: replica lag is measured "
    "on the monotonic clock, so the ISR is not fooled; record timestamps and time-based "
    "retention follow the wall clock, as in Kafka. The load's topics accept records any time "
    "ahead (message.timestamp.after.max.ms at Long.MAX_VALUE), or a leader stepped back over "
    "an hour would refuse the producers' records as Kafka does (INVALID_TIMESTAMP).",
}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


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
        "the fault under way (from injection to recovery); `none` is the load's own worst pause. "
        "Beside it, how long that fault held (injection to heal), and when acknowledged writes "
        "came back, counted from the heal: negative when the cluster worked around the fault "
        "while it lasted, positive when writes waited for the heal.",
        "",
        _table(
            [
                "fault kind",
                "longest gap (s)",
                "the fault held (s)",
                "writes back after the heal (s)",
            ],
            [
                [k, f"{g.seconds:.1f}", _seconds(g.held_s), _seconds(g.back_after_heal_s)]
                for k, g in v.gap_details.items()
            ],
        ),
        "",
        "What each kind is meant to cost:",
        "",
        *[f"- {k}: {READING[k]}" for k in v.gap_details if k in READING],
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
