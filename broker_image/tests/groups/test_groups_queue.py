"""Kafka's two consumption models with unmodified confluent-kafka consumers.

A queue: one group's members share a topic's partitions and the group handles each record
once.  Publish-subscribe: every group receives everything.  The members commit after each
batch they handle; the records are produced once every member has its partitions, so no
rebalance falls in the middle and "once" is exact, not at-least-once.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, ConsumerGroupDescription
from groups_support import (
    Member,
    assert_exactly_once,
    committed,
    end_offsets,
    fill,
    stop_all,
    wait_balanced,
    wait_handled,
)
from kafka_support import create_topic

from samsa.testing import InProcessBroker

RECORDS = 100_000
PARTITIONS = 6


def test_queue_three_members_handle_each_record_once(
    broker: InProcessBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS)
    members = [Member(bootstrap, group, [topic]).start() for _ in range(3)]
    try:
        wait_balanced(members, PARTITIONS)
        assignments = [set(m.assignment) for m in members]
        fill(bootstrap, topic, RECORDS, PARTITIONS)
        wait_handled(members, RECORDS)
        # The group is as it was: nobody handled a partition that was not its own.
        assert [m.assignment for m in members] == assignments
        for m, mine in zip(members, assignments, strict=True):
            assert {h.partition for h in m.handled} == mine
            assert not m.errors, m.errors[:5]
            assert m.commits > 0
        # Every member was needed: each handled a third of the records, give or take.
        assert all(len(m.handled) > RECORDS // 6 for m in members)
        assert_exactly_once([h for m in members for h in m.handled], RECORDS)
        description = _describe(bootstrap, group)
        assert str(description.state) == "ConsumerGroupState.STABLE"
        assert len(description.members) == 3
    finally:
        stop_all(members)
    # What was committed is where the group stands: the end of every partition.
    assert committed(bootstrap, group, topic, PARTITIONS) == end_offsets(
        bootstrap, topic, PARTITIONS
    )


def test_publish_subscribe_every_group_receives_everything(
    broker: InProcessBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS)
    groups = {f"{group}-a": 2, f"{group}-b": 1}
    members = {
        g: [Member(bootstrap, g, [topic]).start() for _ in range(n)] for g, n in groups.items()
    }
    try:
        for ms in members.values():
            wait_balanced(ms, PARTITIONS)
        fill(bootstrap, topic, RECORDS, PARTITIONS)
        for ms in members.values():
            wait_handled(ms, RECORDS)
            assert not [e for m in ms for e in m.errors]
            assert_exactly_once([h for m in ms for h in m.handled], RECORDS)
    finally:
        stop_all([m for ms in members.values() for m in ms])
    ends = end_offsets(bootstrap, topic, PARTITIONS)
    for g in groups:
        assert committed(bootstrap, g, topic, PARTITIONS) == ends


def _describe(bootstrap: str, group: str) -> ConsumerGroupDescription:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(20)
