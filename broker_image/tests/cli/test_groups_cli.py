"""`samsa groups`: what a person sees listing, describing, deleting groups and resetting their
offsets, and the one-line errors for every mistake."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from click.testing import Result
from confluent_kafka import Consumer, TopicPartition
from kafka_support import create_topic, produce, wait_until

from samsa.testing import InProcessBroker

Run = Callable[..., Result]

PARTITIONS = 3
PER_PARTITION = 10


def _fill(broker: InProcessBroker, topic: str, timestamps: list[int] | None = None) -> None:
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    for p in range(PARTITIONS):
        produce(
            broker.bootstrap_servers,
            topic,
            [b"%d-%d" % (p, i) for i in range(PER_PARTITION)],
            partition=p,
            timestamps=timestamps,
        )


def _consumer(broker: InProcessBroker, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )


def _commit(broker: InProcessBroker, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit as a consumer outside group management would (the group stays empty)."""
    c = _consumer(broker, group)
    try:
        c.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
    finally:
        c.close()


def _committed(broker: InProcessBroker, group: str, topic: str) -> dict[int, int]:
    c = _consumer(broker, group)
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


@pytest.fixture
def active(broker: InProcessBroker, topic: str, group: str) -> Iterator[Consumer]:
    """A member of `group` that owns every partition of `topic` and committed 4 of each."""
    _fill(broker, topic)
    c = _consumer(broker, group)
    c.subscribe([topic])
    handled: dict[int, int] = {}

    def poll() -> bool:
        for m in c.consume(100, 0.2):
            handled[m.partition()] = handled.get(m.partition(), 0) + 1
        return len(c.assignment()) == PARTITIONS

    wait_until(poll, 20, what="the member to get every partition")
    c.commit(offsets=[TopicPartition(topic, p, 4) for p in range(PARTITIONS)], asynchronous=False)
    yield c
    c.close()


def _one_line_error(result: Result, code: int = 1) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


# -- list -------------------------------------------------------------------------------------


def test_list_shows_groups_and_their_states(
    samsa: Run, broker: InProcessBroker, active: Consumer, topic: str, group: str
) -> None:
    idle = f"{group}-idle"
    _commit(broker, idle, topic, {0: 1})
    listed = json.loads(samsa("groups", "list", "-o", "json").stdout)
    states = {row["group"]: row["state"] for row in listed}
    assert states[group] == "Stable" and states[idle] == "Empty"
    only_stable = json.loads(samsa("groups", "list", "--state", "stable", "-o", "json").stdout)
    assert group in {r["group"] for r in only_stable}
    assert idle not in {r["group"] for r in only_stable}
    table = samsa("groups", "list").stdout
    assert group in table and "Stable" in table


def test_list_refuses_an_unknown_state(samsa: Run) -> None:
    line = _one_line_error(samsa("groups", "list", "--state", "sleepy"), 2)
    assert "sleepy" in line and "Stable" in line


# -- describe ---------------------------------------------------------------------------------


def test_describe_shows_members_offsets_and_lag(
    samsa: Run, broker: InProcessBroker, active: Consumer, topic: str, group: str
) -> None:
    (info,) = json.loads(samsa("groups", "describe", group, "-o", "json").stdout)
    assert info["state"] == "Stable"
    assert info["assignor"] == "range"
    assert info["coordinator"]["port"] == broker.port
    (member,) = info["members"]
    assert member["member_id"] == active.memberid()
    assert member["assignment"] == [{"topic": topic, "partition": p} for p in range(PARTITIONS)]
    assert info["offsets"] == [
        {
            "topic": topic,
            "partition": p,
            "committed_offset": 4,
            "log_end_offset": PER_PARTITION,
            "lag": PER_PARTITION - 4,
            "member_id": active.memberid(),
        }
        for p in range(PARTITIONS)
    ]
    table = samsa("groups", "describe", group).stdout
    assert f"{group}  state=Stable  assignor=range  members=1" in table
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in table.splitlines()]
    for p in range(PARTITIONS):
        assert [topic, str(p), "4", str(PER_PARTITION), str(PER_PARTITION - 4)] in [
            r[:5] for r in rows
        ]


def test_describe_an_empty_group_with_uncommitted_partitions(
    samsa: Run, broker: InProcessBroker, topic: str, group: str
) -> None:
    _fill(broker, topic)
    _commit(broker, group, topic, {1: 7})
    (info,) = json.loads(samsa("groups", "describe", group, "-o", "json").stdout)
    assert info["state"] == "Empty" and info["members"] == []
    assert [(o["partition"], o["committed_offset"], o["lag"]) for o in info["offsets"]] == [
        (1, 7, PER_PARTITION - 7)
    ]


def test_describe_an_unknown_group(samsa: Run, group: str) -> None:
    assert _one_line_error(samsa("groups", "describe", group)) == (
        f"error: group '{group}' does not exist"
    )


# -- delete -----------------------------------------------------------------------------------


def test_delete_only_groups_without_members(
    samsa: Run, broker: InProcessBroker, active: Consumer, topic: str, group: str
) -> None:
    line = _one_line_error(samsa("groups", "delete", group))
    assert line == f"error: group '{group}' has active members: stop them first"
    assert _committed(broker, group, topic) == dict.fromkeys(range(PARTITIONS), 4)

    idle = f"{group}-idle"
    _commit(broker, idle, topic, {0: 3})
    result = samsa("groups", "delete", idle)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"Deleted group '{idle}'."
    assert _committed(broker, idle, topic) == {}
    assert _one_line_error(samsa("groups", "delete", idle)) == (
        f"error: group '{idle}' does not exist"
    )
    # Several at once: each is reported, and any failure makes the exit code non-zero.
    _commit(broker, idle, topic, {0: 3})
    result = samsa("groups", "delete", idle, group)
    assert result.exit_code == 1
    assert result.stdout.strip() == f"Deleted group '{idle}'."
    assert result.stderr.strip() == f"error: group '{group}' has active members: stop them first"


# -- reset-offsets ----------------------------------------------------------------------------


def _plan(result: Result) -> list[tuple[int, int | None, int]]:
    out = json.loads(result.stdout)
    return [(r["partition"], r["current_offset"], r["new_offset"]) for r in out["partitions"]]


def test_reset_is_a_dry_run_until_executed(
    samsa: Run, broker: InProcessBroker, topic: str, group: str
) -> None:
    _fill(broker, topic)
    _commit(broker, group, topic, {0: 5, 1: 6, 2: 7})
    dry = samsa("groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert dry.exit_code == 0, dry.output
    assert "Dry run: nothing changed" in dry.stderr
    assert _committed(broker, group, topic) == {0: 5, 1: 6, 2: 7}
    done = samsa(
        "groups", "reset-offsets", group, "-t", topic, "--to-earliest", "--execute", "-o", "json"
    )
    assert done.exit_code == 0, done.output
    assert _plan(done) == [(0, 5, 0), (1, 6, 0), (2, 7, 0)]
    assert _committed(broker, group, topic) == {0: 0, 1: 0, 2: 0}


def test_reset_to_latest_some_partitions_and_a_consumer_resumes_there(
    samsa: Run, broker: InProcessBroker, topic: str, group: str
) -> None:
    _fill(broker, topic)
    _commit(broker, group, topic, {0: 1, 1: 1, 2: 1})
    args = ["groups", "reset-offsets", group, "-t", f"{topic}:0,2", "--to-latest", "--execute"]
    assert samsa(*args).exit_code == 0
    assert _committed(broker, group, topic) == {0: PER_PARTITION, 1: 1, 2: PER_PARTITION}
    c = _consumer(broker, group)
    c.subscribe([topic])
    got: list[tuple[int, int]] = []
    try:

        def done() -> bool:
            got.extend((m.partition(), m.offset()) for m in c.consume(100, 0.2))
            return len(got) >= PER_PARTITION - 1

        wait_until(done, 20, what="the consumer to resume")
    finally:
        c.close()
    assert got == [(1, o) for o in range(1, PER_PARTITION)]


def test_reset_to_an_offset_is_kept_inside_the_log(
    samsa: Run, broker: InProcessBroker, topic: str, group: str
) -> None:
    _fill(broker, topic)
    _commit(broker, group, topic, {0: 2})
    done = samsa(
        "groups", "reset-offsets", group, "--all-topics", "--to-offset", "99", "--execute",
        "-o", "json",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    (row,) = json.loads(done.stdout)["partitions"]
    assert (row["partition"], row["new_offset"]) == (0, PER_PARTITION)
    assert "past the log end" in row["note"]
    assert _committed(broker, group, topic)[0] == PER_PARTITION


def test_reset_to_a_datetime(samsa: Run, broker: InProcessBroker, topic: str, group: str) -> None:
    base = int(time.time() * 1000) - 3_600_000
    _fill(broker, topic, timestamps=[base + i * 1000 for i in range(PER_PARTITION)])
    _commit(broker, group, topic, {0: 9, 1: 9, 2: 9})
    when = datetime.datetime.fromtimestamp((base + 3500) / 1000, datetime.UTC).isoformat()
    later = datetime.datetime.fromtimestamp(base / 1000 + 86400, datetime.UTC).isoformat()
    plan = samsa("groups", "reset-offsets", group, "-t", topic, "--to-datetime", when, "-o", "json")
    assert _plan(plan) == [(p, 9, 4) for p in range(PARTITIONS)]
    plan = samsa(
        "groups", "reset-offsets", group, "-t", topic, "--to-datetime", later, "-o", "json"
    )
    assert _plan(plan) == [(p, 9, PER_PARTITION) for p in range(PARTITIONS)]
    assert _committed(broker, group, topic) == dict.fromkeys(range(PARTITIONS), 9)


def test_reset_refuses_an_active_group(
    samsa: Run, broker: InProcessBroker, active: Consumer, topic: str, group: str
) -> None:
    result = samsa("groups", "reset-offsets", group, "-t", topic, "--to-earliest", "--execute")
    line = _one_line_error(result)
    assert f"group '{group}' is active (Stable, 1 member)" in line
    assert _committed(broker, group, topic) == dict.fromkeys(range(PARTITIONS), 4)


@pytest.mark.parametrize(
    ("args", "needle", "code"),
    [
        (["-t", "T"], "say where to reset to", 2),
        (["-t", "T", "--to-earliest", "--to-latest"], "only one of", 2),
        (["-t", "T", "--to-datetime", "yesterday"], "not an ISO-8601", 2),
        (["-t", "T", "--to-offset", "-3"], "0 or more", 2),
        (["--to-earliest"], "--all-topics", 2),
        (["-t", "T", "--all-topics", "--to-earliest"], "not both", 2),
        (["-t", "T:x", "--to-earliest"], "must be numbers", 2),
        (["-t", "T:7", "--to-earliest"], "has no partition 7", 1),
        (["-t", "no-such-topic", "--to-earliest"], "topic 'no-such-topic' does not exist", 1),
        (["--all-topics", "--to-earliest"], "has no committed offsets", 1),
    ],
)
def test_reset_mistakes_are_one_line(
    samsa: Run,
    broker: InProcessBroker,
    topic: str,
    group: str,
    args: list[str],
    needle: str,
    code: int,
) -> None:
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    args = [a.replace("T", topic) if a.startswith("T") else a for a in args]
    line = _one_line_error(samsa("groups", "reset-offsets", group, *args), code)
    assert needle in line


def test_unreachable_broker_is_one_line_and_no_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "samsa.cli", "groups", "describe", "g", "-b", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "error: cannot reach the broker at 127.0.0.1:1"
    assert result.stdout == ""
