"""Group features and other clients: cooperative-sticky rebalancing, the choice of a common
assignor and static membership with confluent-kafka; subscribe, commit and resume with
kafka-python, aiokafka and kcat -G."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription
from groups_support import (
    HEARTBEAT_INTERVAL_MS,
    SESSION_TIMEOUT_MS,
    Handled,
    Member,
    assert_exactly_once,
    committed,
    fill,
    index_of,
    stop_all,
    wait_balanced,
    wait_handled,
)
from kafka import KafkaConsumer
from kafka_support import create_topic, wait_until

from samsa.testing import InProcessBroker

PARTITIONS = 6
COOPERATIVE = {"partition.assignment.strategy": "cooperative-sticky"}
RACING_A_REBALANCE = ("REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION")


def _describe(bootstrap: str, group: str) -> ConsumerGroupDescription:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(20)


# -- confluent-kafka: cooperative-sticky ------------------------------------------------------


def test_cooperative_sticky_moves_only_what_it_must(
    broker: InProcessBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS)
    fill(bootstrap, topic, 6000, PARTITIONS)
    members: list[Member] = []
    try:
        for n in (1, 2, 3):
            joined_at = time.monotonic()
            before = [set(m.assignment) for m in members]
            members.append(Member(bootstrap, group, [topic], batch=100, **COOPERATIVE).start())
            wait_balanced(members, PARTITIONS)
            newcomer = members[-1].assignment
            assert len(newcomer) == PARTITIONS // n
            for m, had in zip(members, before, strict=False):
                # Sticky: each kept what it had, less what went to the newcomer.
                assert m.assignment == had - newcomer
                # Cooperative: only the partitions that moved were ever revoked, and the
                # member went on consuming the others all along.
                revoked = {p for e in m.rebalances_since(joined_at, "revoke") for p in e.partitions}
                assert revoked == had & newcomer
        wait_handled(members, 6000)
        description = _describe(bootstrap, group)
        assert description.partition_assignor == "cooperative-sticky"
        assert sorted(
            tp.partition for md in description.members for tp in md.assignment.topic_partitions
        ) == list(range(PARTITIONS))
        for m in members:
            assert not [e for e in m.events if e.kind == "lost"]
            # A commit racing a rebalance is refused as Kafka refuses it; the records are
            # then handled again by their next owner.  Nothing else may go wrong.
            unexpected = [e for e in m.errors if not any(c in e for c in RACING_A_REBALANCE)]
            assert not unexpected, unexpected[:5]
    finally:
        stop_all(members)
    # At least once through every rebalance; each record handled by its partition's owner.
    handled = {h.index for m in members for h in m.handled}
    assert handled == set(range(6000))


def test_the_group_agrees_on_an_assignor_every_member_supports(
    broker: InProcessBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS)
    strategies = ["range,roundrobin", "roundrobin"]  # range first, but only one has it
    members = [
        Member(bootstrap, group, [topic], **{"partition.assignment.strategy": s}).start()
        for s in strategies
    ]
    try:
        wait_balanced(members, PARTITIONS)
        assert _describe(bootstrap, group).partition_assignor == "roundrobin"
        # Round-robin deals the partitions out one by one.
        assert sorted(sorted(m.assignment) for m in members) == [[0, 2, 4], [1, 3, 5]]
    finally:
        stop_all(members)


# -- confluent-kafka: static membership -------------------------------------------------------


def test_restarted_static_member_gets_its_partitions_back_without_a_rebalance(
    broker: InProcessBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS)
    members = [
        Member(bootstrap, group, [topic], **{"group.instance.id": f"instance-{i}"}).start()
        for i in range(3)
    ]
    try:
        wait_balanced(members, PARTITIONS)
        fill(bootstrap, topic, 3000, PARTITIONS)
        wait_handled(members, 3000)
        mine = set(members[2].assignment)
        events = [len(m.events) for m in members[:2]]

        # A static member closes without leaving the group, and comes back within its
        # session timeout under the same group.instance.id.
        gone = members[2]
        gone.stop()
        restarted_at = time.monotonic()
        members[2] = Member(bootstrap, group, [topic], **{"group.instance.id": "instance-2"})
        members[2].start()
        wait_until(lambda: members[2].assignment, SESSION_TIMEOUT_MS / 1000, what="its partitions")
        assert time.monotonic() - restarted_at < SESSION_TIMEOUT_MS / 1000
        assert members[2].assignment == mine

        # The others went on undisturbed.  Had the restart started a rebalance, they would
        # have had to rejoin before the restarted member got any partition back.
        fill(bootstrap, topic, 3000, PARTITIONS, start=3000)
        wait_handled([*members, gone], 6000)
        assert [len(m.events) for m in members[:2]] == events
        assert {h.partition for h in members[2].handled} == mine
        assert min(h.index for h in members[2].handled) >= 3000
        assert len(_describe(bootstrap, group).members) == 3
    finally:
        stop_all(members)
    assert_exactly_once([h for m in members for h in m.handled if h.index >= 3000], 3000, 3000)


# -- kafka-python ------------------------------------------------------------------------------


def _kafka_python(bootstrap: str, group: str, topic: str) -> KafkaConsumer:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
    )
    consumer.subscribe([topic])
    # Works around a bug of kafka-python 3.0.12. Its first poll joins the group before the
    # topic's metadata is in, so the leader assigns nothing and rejoins once the metadata
    # comes. If that poll's time runs out while the rejoin's SyncGroup is in flight, the
    # answer is never applied (join_group_async loops only while need_rejoin(), and the
    # rejoin no longer needs one), and the member keeps its empty assignment for good.
    # Having the metadata before the first poll means one join. The broker answered that
    # SyncGroup in 3-17 ms each time; the 200 ms polls below ran out around it.
    consumer.topics()
    return consumer


def _kafka_python_handle(consumer: KafkaConsumer, until: int) -> list[Handled]:
    handled: list[Handled] = []
    deadline = time.monotonic() + 30
    while len(handled) < until:
        assert time.monotonic() < deadline, f"handled {len(handled)} of {until}"
        for tp, records in consumer.poll(timeout_ms=200, max_records=100).items():
            handled += [Handled(tp.partition, r.offset, index_of(r.value)) for r in records]
            consumer.commit()
    return handled


def test_kafka_python_group_subscribes_commits_and_resumes(
    broker: InProcessBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 3)
    fill(bootstrap, topic, 3000, 3)
    first = _kafka_python(bootstrap, group, topic)
    try:
        before = _kafka_python_handle(first, 1000)
    finally:
        first.close()
    commits = committed(bootstrap, group, topic, 3)
    assert sum(commits.values()) == len(before)
    second = _kafka_python(bootstrap, group, topic)
    try:
        after = _kafka_python_handle(second, 3000 - len(before))
    finally:
        second.close()
    assert_exactly_once([*before, *after], 3000)
    for p in range(3):
        resumed = min((h.offset for h in after if h.partition == p), default=1000)
        assert resumed == commits.get(p, 0)


# -- aiokafka ----------------------------------------------------------------------------------


async def _aiokafka_run(bootstrap: str, group: str, topic: str, until: int) -> list[Handled]:
    """A member that handles `until` records, committing after each batch, then leaves."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
    )
    await consumer.start()
    handled: list[Handled] = []
    try:
        deadline = time.monotonic() + 30
        while len(handled) < until:
            assert time.monotonic() < deadline, f"handled {len(handled)} of {until}"
            batches = await consumer.getmany(timeout_ms=200, max_records=100)
            for tp, records in batches.items():
                handled += [Handled(tp.partition, r.offset, index_of(r.value)) for r in records]
            if batches:
                await consumer.commit()
    finally:
        await consumer.stop()
    return handled


async def test_aiokafka_group_subscribes_commits_and_resumes(
    broker: InProcessBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 3)
    fill(bootstrap, topic, 3000, 3)
    before = await _aiokafka_run(bootstrap, group, topic, 1000)
    commits = committed(bootstrap, group, topic, 3)
    assert sum(commits.values()) == len(before)
    after = await _aiokafka_run(bootstrap, group, topic, 3000 - len(before))
    assert_exactly_once([*before, *after], 3000)
    for p in range(3):
        resumed = min((h.offset for h in after if h.partition == p), default=1000)
        assert resumed == commits.get(p, 0)


# -- kcat -G -----------------------------------------------------------------------------------

KCAT = shutil.which("kcat")


def _kcat_group(bootstrap: str, group: str, topic: str) -> list[int]:
    """One run of kcat's balanced consumer to the end of every partition: the indices."""
    assert KCAT is not None
    proc = subprocess.run(
        [
            KCAT,
            "-b",
            bootstrap,
            "-G",
            group,
            "-X",
            "auto.offset.reset=earliest",
            "-X",
            f"session.timeout.ms={SESSION_TIMEOUT_MS}",
            "-e",
            "-q",
            "-f",
            "%s\\n",
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return [int(line) for line in proc.stdout.split()]


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_balanced_consumer_commits_and_resumes(
    broker: InProcessBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 3)
    fill(bootstrap, topic, 1000, 3)
    assert sorted(_kcat_group(bootstrap, group, topic)) == list(range(1000))
    assert committed(bootstrap, group, topic, 3) == {0: 334, 1: 333, 2: 333}
    # Nothing new: the next run resumes at the end.  Then it gets just the new records.
    assert _kcat_group(bootstrap, group, topic) == []
    fill(bootstrap, topic, 500, 3, start=1000)
    assert sorted(_kcat_group(bootstrap, group, topic)) == list(range(1000, 1500))
