"""GroupMetadata alone: Kafka's state machine, membership counts, protocol choice, offsets."""

from __future__ import annotations

import pytest
from coordinator_support import subscription

from samsa.coordinator.group import GroupMetadata, GroupState, IllegalGroupTransition
from samsa.coordinator.member import MemberMetadata
from samsa.coordinator.offsets import CommitRecordMetadataAndOffset, OffsetAndMetadata
from samsa.coordinator.results import JoinResult, SyncResult
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode

S = GroupState


class Time:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def member(
    member_id: str,
    protocols: list[tuple[str, bytes]] | None = None,
    instance: str | None = None,
    rebalance_ms: int = 30_000,
    protocol_type: str = "consumer",
) -> MemberMetadata:
    return MemberMetadata(
        member_id,
        instance,
        "client",
        "/h",
        rebalance_ms,
        10_000,
        protocol_type,
        protocols or [("range", subscription("t1"))],
    )


def test_legal_transitions_and_state_timestamp() -> None:
    t = Time()
    g = GroupMetadata("g", t)
    assert g.is_(S.EMPTY) and g.current_state_timestamp == 1_000
    t.now = 2_000
    for target in (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE, S.PREPARING_REBALANCE):
        g.transition_to(target)
    assert g.current_state_timestamp == 2_000
    g.transition_to(S.EMPTY)
    g.transition_to(S.DEAD)
    g.transition_to(S.DEAD)


@pytest.mark.parametrize(
    ("start", "target"),
    [
        (S.EMPTY, S.STABLE),
        (S.EMPTY, S.COMPLETING_REBALANCE),
        (S.STABLE, S.EMPTY),
        (S.STABLE, S.COMPLETING_REBALANCE),
        (S.PREPARING_REBALANCE, S.STABLE),
        (S.COMPLETING_REBALANCE, S.EMPTY),
        (S.DEAD, S.PREPARING_REBALANCE),
        (S.PREPARING_REBALANCE, S.PREPARING_REBALANCE),
    ],
)
def test_illegal_transitions_raise(start: GroupState, target: GroupState) -> None:
    g = GroupMetadata("g", Time(), start)
    with pytest.raises(IllegalGroupTransition):
        g.transition_to(target)


def test_can_rebalance_only_from_stable_completing_or_empty() -> None:
    for state in GroupState:
        g = GroupMetadata("g", Time(), state)
        assert g.can_rebalance() == (state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY))


def test_first_member_sets_protocol_type_and_leader_and_leader_moves_on_remove() -> None:
    g = GroupMetadata("g", Time())
    g.add(member("a"))
    g.add(member("b"))
    assert g.protocol_type == "consumer" and g.leader_id == "a"
    g.remove("a")
    assert g.leader_id == "b"
    g.remove("b")
    assert g.leader_id is None and g.size == 0


def test_select_protocol_by_vote_among_protocols_all_support() -> None:
    g = GroupMetadata("g", Time())
    g.add(member("a", [("roundrobin", b""), ("range", b"")]))
    g.add(member("b", [("range", b""), ("roundrobin", b"")]))
    g.add(member("c", [("range", b""), ("sticky", b"")]))
    # "sticky" is not supported by all; a and b split, c breaks the tie for range.
    assert g.select_protocol() == "range"
    g.remove("c")
    g.add(member("d", [("roundrobin", b""), ("range", b"")]))
    assert g.select_protocol() == "roundrobin"


def test_supports_protocols() -> None:
    g = GroupMetadata("g", Time())
    assert not g.supports_protocols("", ["range"])
    assert not g.supports_protocols("consumer", [])
    assert g.supports_protocols("consumer", ["range"])
    g.add(member("a", [("range", b""), ("roundrobin", b"")]))
    g.transition_to(S.PREPARING_REBALANCE)
    assert g.supports_protocols("consumer", ["roundrobin"])
    assert not g.supports_protocols("consumer", ["sticky"])
    assert not g.supports_protocols("connect", ["range"])


def test_awaiting_join_counts_and_pending_members_block_completion() -> None:
    g = GroupMetadata("g", Time())
    answers: list[JoinResult] = []
    g.add(member("a"), answers.append)
    g.add(member("b"))
    assert g.num_awaiting == 1 and not g.has_all_members_joined()
    g.update_member(g.get("b"), [("range", b"")], 30_000, 10_000, answers.append)
    assert g.has_all_members_joined()
    g.add_pending_member("p")
    assert not g.has_all_members_joined()
    g.remove("p")
    assert g.has_all_members_joined()
    g.maybe_invoke_join_callback(g.get("a"), JoinResult.failed("a", ErrorCode.none))
    assert g.num_awaiting == 1 and len(answers) == 1
    g.remove("b")
    assert g.num_awaiting == 0


def test_maybe_elect_new_joined_leader() -> None:
    g = GroupMetadata("g", Time())
    assert not g.maybe_elect_new_joined_leader()
    g.add(member("a"))
    g.add(member("b"), lambda _r: None)
    assert g.maybe_elect_new_joined_leader() and g.leader_id == "b"
    g.maybe_invoke_join_callback(g.get("b"), JoinResult.failed("b", ErrorCode.none))
    assert not g.maybe_elect_new_joined_leader()


def test_replace_static_member_fences_the_old_member_id() -> None:
    g = GroupMetadata("g", Time())
    joins: list[JoinResult] = []
    syncs: list[SyncResult] = []
    m = member("old", instance="i1")
    g.add(m, joins.append)
    m.awaiting_sync = syncs.append
    assert g.is_static_member_fenced("i1", "other") and not g.is_static_member_fenced("i1", "old")
    replaced = g.replace_static_member("i1", "old", "new")
    assert replaced is m and m.member_id == "new"
    assert joins == [JoinResult.failed("old", ErrorCode.fenced_instance_id)]
    assert syncs == [SyncResult(ErrorCode.fenced_instance_id)]
    assert g.leader_id == "new" and g.current_static_member_id("i1") == "new"
    assert not g.has("old") and g.num_awaiting == 0


def test_init_next_generation() -> None:
    g = GroupMetadata("g", Time())
    g.add(member("a", [("range", subscription("t1", "t2"))]), lambda _r: None)
    g.add(member("b", [("range", subscription("t3"))]), lambda _r: None)
    g.transition_to(S.PREPARING_REBALANCE)
    g.init_next_generation()
    assert g.generation_id == 1 and g.is_(S.COMPLETING_REBALANCE)
    assert g.protocol_name == "range"
    assert g.subscribed_topics == {"t1", "t2", "t3"}
    assert [m.member_id for m in g.current_member_metadata()] == ["a", "b"]
    g.transition_to(S.PREPARING_REBALANCE)
    g.remove("a")
    g.remove("b")
    g.init_next_generation()
    assert g.generation_id == 2 and g.is_(S.EMPTY) and g.protocol_name is None
    assert g.subscribed_topics == set()


def test_unreadable_subscriptions_mean_subscribed_to_everything() -> None:
    g = GroupMetadata("g", Time())
    g.add(member("a", [("range", b"\x00")]), lambda _r: None)
    g.transition_to(S.PREPARING_REBALANCE)
    g.init_next_generation()
    assert g.subscribed_topics is None and g.is_subscribed_to_topic("anything")


def test_other_protocol_types_have_no_subscription_knowledge() -> None:
    g = GroupMetadata("g", Time())
    g.add(member("a", [("v1", b"whatever")], protocol_type="connect"), lambda _r: None)
    g.transition_to(S.PREPARING_REBALANCE)
    g.init_next_generation()
    assert g.subscribed_topics is None


tp0 = TopicPartition("t1", 0)
tp1 = TopicPartition("t1", 1)


def oam(offset: int, ts: int = 0, expire: int | None = None) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, None, "", ts, expire)


def test_pending_commit_becomes_visible_only_when_appended() -> None:
    g = GroupMetadata("g", Time())
    g.prepare_offset_commit({tp0: oam(5)})
    assert g.offset(tp0) is None and g.has_pending_offset_commits_for(tp0)
    g.on_offset_commit_append(tp0, CommitRecordMetadataAndOffset(1, oam(5)))
    assert g.offset(tp0) == oam(5) and not g.has_pending_offset_commits_for(tp0)


def test_an_older_append_never_overwrites_a_newer_one() -> None:
    g = GroupMetadata("g", Time())
    g.prepare_offset_commit({tp0: oam(5)})
    g.prepare_offset_commit({tp0: oam(6)})
    g.on_offset_commit_append(tp0, CommitRecordMetadataAndOffset(2, oam(6)))
    # The second is done; the first completes late but must not win.
    g.prepare_offset_commit({tp0: oam(5)})
    g.on_offset_commit_append(tp0, CommitRecordMetadataAndOffset(1, oam(5)))
    assert g.offset(tp0) == oam(6)


def test_failed_write_clears_only_its_own_pending_commit() -> None:
    g = GroupMetadata("g", Time())
    g.initialize_offsets({tp0: CommitRecordMetadataAndOffset(0, oam(1))})
    g.prepare_offset_commit({tp0: oam(5)})
    g.prepare_offset_commit({tp0: oam(6)})
    g.fail_pending_offset_write(tp0, oam(5))
    assert g.has_pending_offset_commits_for(tp0)
    g.fail_pending_offset_write(tp0, oam(6))
    assert not g.has_pending_offset_commits_for(tp0) and g.offset(tp0) == oam(1)


def test_expiry_of_an_empty_group_counts_from_when_it_became_empty() -> None:
    t = Time()
    g = GroupMetadata("g", t)
    g.protocol_type = "consumer"
    g.initialize_offsets({tp0: CommitRecordMetadataAndOffset(0, oam(1, ts=0))})
    t.now = 50_000
    g.transition_to(S.PREPARING_REBALANCE)
    g.transition_to(S.EMPTY)  # became empty at 50s
    assert g.remove_expired_offsets(now_ms=50_000 + 9_999, retention_ms=10_000) == {}
    assert g.remove_expired_offsets(now_ms=60_000, retention_ms=10_000) == {tp0: oam(1, ts=0)}


def test_expiry_of_a_simple_group_counts_from_each_commit() -> None:
    g = GroupMetadata("g", Time())
    g.initialize_offsets(
        {
            tp0: CommitRecordMetadataAndOffset(0, oam(1, ts=0)),
            tp1: CommitRecordMetadataAndOffset(1, oam(1, ts=5_000)),
        }
    )
    assert set(g.remove_expired_offsets(now_ms=10_000, retention_ms=10_000)) == {tp0}
    assert set(g.remove_expired_offsets(now_ms=15_000, retention_ms=10_000)) == {tp1}


def test_explicit_expire_timestamps_and_pending_commits() -> None:
    g = GroupMetadata("g", Time())
    g.initialize_offsets(
        {
            tp0: CommitRecordMetadataAndOffset(0, oam(1, ts=0, expire=3_000)),
            tp1: CommitRecordMetadataAndOffset(1, oam(1, ts=0)),
        }
    )
    g.prepare_offset_commit({tp1: oam(2)})
    assert set(g.remove_expired_offsets(now_ms=3_000, retention_ms=10_000)) == {tp0}
    assert g.remove_expired_offsets(now_ms=100_000, retention_ms=10_000) == {}


def test_stable_consumer_group_expires_only_unsubscribed_topics() -> None:
    g = GroupMetadata("g", Time())
    g.add(member("a", [("range", subscription("t1"))]), lambda _r: None)
    g.transition_to(S.PREPARING_REBALANCE)
    g.init_next_generation()
    g.transition_to(S.STABLE)
    other = TopicPartition("old-topic", 0)
    g.initialize_offsets(
        {
            tp0: CommitRecordMetadataAndOffset(0, oam(1, ts=0)),
            other: CommitRecordMetadataAndOffset(1, oam(1, ts=0)),
        }
    )
    assert set(g.remove_expired_offsets(now_ms=10_000, retention_ms=10_000)) == {other}
    assert g.offset(tp0) is not None


def test_preparing_rebalance_group_expires_nothing() -> None:
    g = GroupMetadata("g", Time())
    g.add(member("a"), lambda _r: None)
    g.transition_to(S.PREPARING_REBALANCE)
    g.initialize_offsets({tp0: CommitRecordMetadataAndOffset(0, oam(1, ts=0))})
    assert g.remove_expired_offsets(now_ms=10**9, retention_ms=1) == {}
