"""Group requests a user's client can get wrong, sent raw: each gets the Kafka error code
that clients handle (never UNKNOWN_SERVER_ERROR), and none loses a commit, its own group's
or another's.  Oversized member metadata is refused at JoinGroup with GROUP_MAX_SIZE_REACHED
(Kafka lets the group form, then fails its SyncGroups with UNKNOWN_SERVER_ERROR).

Every test runs beside a bystander: a group on the same __consumer_offsets partition, with
offsets committed before the test, that must find them intact after it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from group_wire import (
    FENCED_INSTANCE_ID,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    RawMember,
    assignment,
    subscription,
)
from groups_support import GROUP_BROKER_CONFIG, Member, member_config, stop_all, wait_balanced
from kafka_support import create_topic, wait_until

from samsa.coordinator import partition_for
from samsa.testing import InProcessBroker

OFFSETS_PARTITIONS = 50  # the broker's offsets.topic.num.partitions


@pytest.fixture
def created(broker: InProcessBroker, topic: str) -> str:
    create_topic(broker.bootstrap_servers, topic, 3)
    return topic


@pytest.fixture
def bystander(broker: InProcessBroker, created: str, group: str) -> Iterator[str]:
    """A group stored beside the test's group, whose commits must survive the test."""
    home = partition_for(group, OFFSETS_PARTITIONS)
    name = next(
        n
        for n in (f"{group}-bystander-{i}" for i in itertools.count())
        if partition_for(n, OFFSETS_PARTITIONS) == home
    )
    offsets = {(created, 0): 11, (created, 1): 22, (created, 2): 33}
    standalone = RawMember(broker.port, name, created)
    try:
        assert set(standalone.commit(offsets).values()) == {NONE}
        yield name
        assert standalone.fetch() == (NONE, offsets), "the bystander group lost its commits"
    finally:
        standalone.close()


@pytest.fixture
def raw(broker: InProcessBroker, created: str, group: str) -> Iterator[list[RawMember]]:
    """Raw members of the test's group, made on demand: raw[i] for i = 0, 1, 2."""
    members = [RawMember(broker.port, group, created) for _ in range(3)]
    yield members
    for m in members:
        m.close()


def test_unknown_member_ids_are_refused(raw: list[RawMember], created: str, bystander: str) -> None:
    member, ghost = raw[0], raw[1]
    member.join_alone()
    assert member.commit({(created, 0): 5}) == {(created, 0): NONE}
    ghost.member_id, ghost.generation = "ghost-of-a-member", member.generation
    assert ghost.join() == UNKNOWN_MEMBER_ID
    assert ghost.sync() == UNKNOWN_MEMBER_ID
    assert ghost.heartbeat() == UNKNOWN_MEMBER_ID
    assert ghost.commit({(created, 0): 99}) == {(created, 0): UNKNOWN_MEMBER_ID}
    assert ghost.leave() == (NONE, [UNKNOWN_MEMBER_ID])
    # Once a group has members, a commit from outside it is refused too.
    assert ghost.commit({(created, 0): 99}, generation=-1, member_id="") == {
        (created, 0): UNKNOWN_MEMBER_ID
    }
    # The real member saw none of it.
    assert member.heartbeat() == NONE
    assert member.fetch() == (NONE, {(created, 0): 5})


def test_unknown_member_of_a_group_that_does_not_exist(
    raw: list[RawMember], created: str, bystander: str
) -> None:
    ghost = raw[0]
    ghost.member_id, ghost.generation = "ghost-of-a-member", 3
    assert ghost.join() == UNKNOWN_MEMBER_ID
    assert ghost.heartbeat() == UNKNOWN_MEMBER_ID
    assert ghost.sync() == UNKNOWN_MEMBER_ID
    # A commit from a generation of a group that is gone.
    assert ghost.commit({(created, 0): 7}) == {(created, 0): ILLEGAL_GENERATION}
    assert ghost.fetch() == (NONE, {})


def test_illegal_generations_are_refused(
    raw: list[RawMember], created: str, bystander: str
) -> None:
    member = raw[0]
    member.join_alone()
    now = member.generation
    assert member.commit({(created, 1): 8}) == {(created, 1): NONE}
    for wrong in (now - 1, now + 1):
        assert member.heartbeat(generation=wrong) == ILLEGAL_GENERATION
        assert member.sync(generation=wrong) == ILLEGAL_GENERATION
        assert member.commit({(created, 1): 99}, generation=wrong) == {
            (created, 1): ILLEGAL_GENERATION
        }
    assert member.heartbeat() == NONE
    assert member.fetch() == (NONE, {(created, 1): 8})


def test_commits_during_a_rebalance(raw: list[RawMember], created: str, bystander: str) -> None:
    first, second = raw[0], raw[1]
    first.join_alone([0, 1, 2])
    old = first.generation
    second.send_join()
    assert second.read_join() == MEMBER_ID_REQUIRED
    second.send_join()  # parked until the rebalance completes
    wait_until(
        lambda: first.heartbeat() == REBALANCE_IN_PROGRESS, 10, what="the rebalance to start"
    )
    # Preparing the rebalance: the current generation may still commit what it handled.
    assert first.commit({(created, 0): 10}) == {(created, 0): NONE}

    assert first.join() == NONE  # rejoining completes the join phase for both
    assert second.read_join() == NONE
    assert first.generation == second.generation == old + 1
    # Joined but not yet synced: no assignment, so no commit; the old generation is over.
    assert second.commit({(created, 1): 20}) == {(created, 1): REBALANCE_IN_PROGRESS}
    assert first.commit({(created, 0): 11}, generation=old) == {(created, 0): ILLEGAL_GENERATION}

    leader, follower = (first, second) if first.leader == first.member_id else (second, first)
    plan = {
        leader.member_id: assignment(created, [0, 1]),
        follower.member_id: assignment(created, [2]),
    }
    assert leader.sync(plan) == NONE
    assert follower.sync() == NONE
    assert second.commit({(created, 1): 21}) == {(created, 1): NONE}
    assert first.fetch() == (NONE, {(created, 0): 10, (created, 1): 21})


def test_commits_for_unknown_topics_or_partitions(
    broker: InProcessBroker, raw: list[RawMember], created: str, bystander: str
) -> None:
    standalone = raw[0]  # a consumer that assigns itself partitions commits with no generation
    asked = {(created, 0): 4, (created, 99): 4, ("no-such-topic", 0): 4}
    assert standalone.commit(asked) == {
        (created, 0): NONE,
        (created, 99): UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert standalone.fetch() == (NONE, {(created, 0): 4})
    # What a confluent-kafka consumer sees for it; the good partition is stored all the same.
    consumer = Consumer(member_config(broker.bootstrap_servers, standalone.group))
    try:
        with pytest.raises(KafkaException) as refused:
            consumer.commit(
                offsets=[TopicPartition(created, 0, 6), TopicPartition("no-such-topic", 0, 6)],
                asynchronous=False,
            )
    finally:
        consumer.close()
    assert refused.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert standalone.fetch() == (NONE, {(created, 0): 6})


def test_empty_group_id_is_invalid(broker: InProcessBroker, created: str, bystander: str) -> None:
    nameless = RawMember(broker.port, "", created)
    try:
        assert nameless.join() == INVALID_GROUP_ID
        nameless.member_id, nameless.generation = "someone", 1
        assert nameless.sync() == INVALID_GROUP_ID
        assert nameless.heartbeat() == INVALID_GROUP_ID
        assert nameless.leave()[0] == INVALID_GROUP_ID
    finally:
        nameless.close()


def test_session_timeouts_outside_the_brokers_bounds(raw: list[RawMember], bystander: str) -> None:
    for timeout_ms in (1000, 1_800_001):
        assert raw[0].join(session_timeout_ms=timeout_ms) == INVALID_SESSION_TIMEOUT


def test_a_member_with_no_protocol_in_common(
    raw: list[RawMember], created: str, bystander: str
) -> None:
    raw[0].join_alone()
    other = subscription(created)
    assert raw[1].join(protocols=[("roundrobin", other)]) == INCONSISTENT_GROUP_PROTOCOL
    assert raw[2].join(protocol_type="connect") == INCONSISTENT_GROUP_PROTOCOL
    assert raw[0].heartbeat() == NONE


def test_offset_metadata_over_the_limit(raw: list[RawMember], created: str, bystander: str) -> None:
    member = raw[0]
    assert member.commit({(created, 2): 3}, metadata="fine") == {(created, 2): NONE}
    too_long = "x" * 4097  # offset.metadata.max.bytes is 4096
    assert member.commit({(created, 2): 9}, metadata=too_long) == {
        (created, 2): OFFSET_METADATA_TOO_LARGE
    }
    assert member.fetch() == (NONE, {(created, 2): 3})


def test_member_metadata_too_large_for_the_group_to_store(
    raw: list[RawMember], created: str, bystander: str
) -> None:
    member, oversized = raw[0], raw[1]
    member.join_alone()
    assert member.commit({(created, 0): 12}) == {(created, 0): NONE}
    # Its subscription alone is over message.max.bytes: the group could never be stored.
    huge = subscription(created, user_data=b"x" * 1_100_000)
    assert oversized.join(protocols=[("range", huge)]) == GROUP_MAX_SIZE_REACHED
    assert member.heartbeat() == NONE
    assert member.commit({(created, 0): 13}) == {(created, 0): NONE}
    assert member.fetch() == (NONE, {(created, 0): 13})


def test_a_second_static_member_with_the_same_instance_id_fences_the_first(
    broker: InProcessBroker, created: str, group: str, bystander: str
) -> None:
    first = RawMember(broker.port, group, created, instance="the-one")
    second = RawMember(broker.port, group, created, instance="the-one")
    try:
        first.join_alone()
        assert first.commit({(created, 0): 1}) == {(created, 0): NONE}
        second.join()  # takes the instance id over
        assert first.heartbeat() == FENCED_INSTANCE_ID
        assert first.commit({(created, 0): 2}) == {(created, 0): FENCED_INSTANCE_ID}
        assert first.fetch() == (NONE, {(created, 0): 1})
    finally:
        first.close()
        second.close()


def test_group_max_size(tmp_path: Path, topic: str, group: str) -> None:
    config = {**GROUP_BROKER_CONFIG, "group.max.size": 2}
    with InProcessBroker(tmp_path / "broker", config) as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, topic, 4)
        members = [Member(bootstrap, group, [topic]).start() for _ in range(2)]
        try:
            wait_balanced(members, 4)
            events = [len(m.events) for m in members]
            extra = RawMember(broker.port, group, topic)
            try:
                assert extra.join() == GROUP_MAX_SIZE_REACHED
            finally:
                extra.close()
            # A real client is told so, and the group goes on as it was.
            third = Member(bootstrap, group, [topic]).start()
            try:
                wait_until(
                    lambda: any("GROUP_MAX_SIZE_REACHED" in e for e in third.errors),
                    20,
                    what="the third consumer to be refused",
                )
                assert not third.assignment
            finally:
                third.stop()
            assert [len(m.events) for m in members] == events
        finally:
            stop_all(members)
