"""GroupCoordinator membership: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, driven by a
manual clock. Each test plays the clients by hand, the leader included."""

from __future__ import annotations

import asyncio

from coordinator_support import (
    REBALANCE_MS,
    SESSION_MS,
    Harness,
    decode_assignment,
    make_harness,
    range_assign,
    subscription,
)

from samsa.coordinator import (
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberIdentity,
    OffsetCommitPartition,
    SyncResult,
)
from samsa.coordinator.group_records import GroupMetadataKey, GroupMetadataValue
from samsa.protocol.errors import ErrorCode, KafkaApiError

E = ErrorCode
G = "payments"


async def form_group(
    h: Harness, n: int = 3, group: str = G, topics: tuple[str, ...] = ("t1",)
) -> list[JoinResult]:
    """n dynamic members join through KIP-394, the leader assigns (range), everyone syncs."""
    ids = [await h.new_member_id(group, client_id=f"c{i}") for i in range(n)]
    tasks = [await h.join(group, mid, topics=topics) for mid in ids]
    await h.advance(0)  # a zero initial delay still runs on the timer
    results = [t.result() for t in tasks]
    await sync_all(h, results, group)
    return results


async def sync_all(h: Harness, results: list[JoinResult], group: str = G) -> list[SyncResult]:
    leader = next(r for r in results if r.member_id == r.leader_id)
    plan = range_assign(leader, h.topics["t1"])
    followers = [
        h.start(h.coordinator.sync_group(group, r.generation_id, r.member_id))
        for r in results
        if r is not leader
    ]
    await h.settle()
    assert not any(f.done() for f in followers), "followers wait for the leader"
    lead = await h.coordinator.sync_group(group, leader.generation_id, leader.member_id, plan)
    await h.settle()
    by_member = {leader.member_id: lead}
    for r, f in zip([r for r in results if r is not leader], followers, strict=True):
        by_member[r.member_id] = f.result()
    return [by_member[r.member_id] for r in results]


async def keep_alive(h: Harness, ms: int, *members: str, group: str = G) -> None:
    """Advance time in half-session steps, heartbeating for the given members."""
    step = SESSION_MS // 2
    while ms > 0:
        await h.advance(min(step, ms))
        ms -= step
        for m in members:
            await h.coordinator.heartbeat(group, group_of(h, group).generation_id, m)


def group_of(h: Harness, group: str = G) -> GroupMetadata:
    g = h.coordinator.manager.get_group(group)
    assert g is not None
    return g


async def test_three_members_join_sync_and_heartbeat() -> None:
    h = await make_harness(initial_delay_ms=3_000)
    ids = [await h.new_member_id(G, client_id=f"c{i}") for i in range(3)]
    assert len(set(ids)) == 3
    tasks = [await h.join(G, mid) for mid in ids]
    assert group_of(h).is_(GroupState.PREPARING_REBALANCE)
    await h.advance(2_999)
    assert not any(t.done() for t in tasks), "KIP-134: the first rebalance waits"
    await h.advance(3_001)  # others joined during the delay, so it was extended once
    results = [t.result() for t in tasks]
    assert {r.error for r in results} == {E.none}
    assert {r.generation_id for r in results} == {1}
    assert {r.protocol_name for r in results} == {"range"}
    assert {r.protocol_type for r in results} == {"consumer"}
    leader_id = results[0].leader_id
    assert leader_id in ids and {r.leader_id for r in results} == {leader_id}
    leader = next(r for r in results if r.member_id == leader_id)
    assert sorted(m.member_id for m in leader.members) == sorted(ids)
    assert all(not r.members for r in results if r is not leader)

    syncs = await sync_all(h, results)
    assert {s.error for s in syncs} == {E.none}
    owned = [decode_assignment(s.assignment)["t1"] for s in syncs]
    assert sorted(p for ps in owned for p in ps) == [0, 1, 2, 3]
    assert group_of(h).is_(GroupState.STABLE)

    # The assignment is persisted before anyone sees it.
    stored = [v for k, v in h.store.decoded(h.partition_of(G)) if isinstance(k, GroupMetadataKey)]
    assert isinstance(stored[-1], GroupMetadataValue)
    assert stored[-1].generation == 1 and len(stored[-1].members) == 3
    assert {m.member_id for m in stored[-1].members} == set(ids)

    for r in results:
        assert await h.coordinator.heartbeat(G, 1, r.member_id) is E.none
    assert await h.coordinator.heartbeat(G, 0, ids[0]) is E.illegal_generation
    assert await h.coordinator.heartbeat(G, 1, "nobody") is E.unknown_member_id
    assert await h.coordinator.heartbeat("other-group", 1, ids[0]) is E.unknown_member_id

    described = await h.coordinator.describe_group(G)
    assert described.state == "Stable" and described.protocol == "range"
    assert {m.member_id for m in described.members} == set(ids)
    assert all(m.assignment for m in described.members)


async def test_initial_delay_is_extended_by_new_members_but_capped_by_rebalance_timeout() -> None:
    h = await make_harness(initial_delay_ms=3_000)
    a = await h.join(G, await h.new_member_id(G, "a"), rebalance_ms=5_000)
    await h.advance(1_000)
    b = await h.join(G, await h.new_member_id(G, "b"), rebalance_ms=5_000)
    await h.advance(2_000)  # t=3000: b arrived during the delay, wait min(3000, 2000) more
    assert not a.done()
    c = await h.join(G, await h.new_member_id(G, "c"), rebalance_ms=5_000)
    await h.advance(1_999)
    assert not a.done()
    await h.advance(1)  # t=5000: the rebalance timeout caps the delay, c or not
    assert [t.result().error for t in (a, b, c)] == [E.none] * 3
    assert len(a.result().members or b.result().members or c.result().members) == 3


async def test_session_expiry_triggers_a_rebalance_and_the_others_rejoin() -> None:
    h = await make_harness()
    results = await form_group(h)
    a, b, c = (r.member_id for r in results)
    await h.advance(SESSION_MS // 2)
    assert await h.coordinator.heartbeat(G, 1, a) is E.none
    assert await h.coordinator.heartbeat(G, 1, b) is E.none
    await h.advance(SESSION_MS // 2)
    # c never heartbeated: gone after its session timeout, which starts a rebalance.
    g = group_of(h)
    assert not g.has(c) and g.is_(GroupState.PREPARING_REBALANCE)
    assert await h.coordinator.heartbeat(G, 1, a) is E.rebalance_in_progress
    assert await h.coordinator.heartbeat(G, 1, c) is E.unknown_member_id

    ta = await h.join(G, a)
    assert not ta.done()
    tb = await h.join(G, b)
    # Everyone known has rejoined: no need to wait for the rebalance timeout.
    ra, rb = ta.result(), tb.result()
    assert ra.error is E.none and ra.generation_id == 2 and rb.generation_id == 2
    syncs = await sync_all(h, [ra, rb])
    parts = sorted(p for s in syncs for p in decode_assignment(s.assignment)["t1"])
    assert parts == [0, 1, 2, 3]
    assert await h.coordinator.heartbeat(G, 2, a) is E.none


async def test_members_that_do_not_rejoin_are_dropped_at_the_rebalance_timeout() -> None:
    h = await make_harness()
    a, b, c = (r.member_id for r in await form_group(h))
    leader = group_of(h).leader_id
    assert leader == a  # the first to join leads
    ta = await h.join(G, a)
    assert group_of(h).is_(GroupState.PREPARING_REBALANCE)
    tb = await h.join(G, b)
    # c stays alive (its heartbeats say REBALANCE_IN_PROGRESS) but never rejoins.
    await keep_alive(h, REBALANCE_MS - 1, c)
    assert not tb.done() and group_of(h).has(c)
    await h.advance(1)
    assert ta.result().error is E.none
    assert tb.result().error is E.none and tb.result().generation_id == 2
    assert not group_of(h).has(c)
    assert len(group_of(h).members) == 2


async def test_leader_rejoining_a_stable_group_forces_a_rebalance() -> None:
    h = await make_harness()
    results = await form_group(h, n=2)
    leader = next(r for r in results if r.member_id == r.leader_id)
    follower = next(r for r in results if r is not leader)
    # A follower rejoining with unchanged metadata just gets the current generation back.
    same = await h.join(G, follower.member_id)
    assert same.result().generation_id == 1 and group_of(h).is_(GroupState.STABLE)
    # The leader rejoining starts a rebalance (its way to react to metadata changes).
    t = await h.join(G, leader.member_id)
    assert not t.done() and group_of(h).is_(GroupState.PREPARING_REBALANCE)


async def test_leave_group_single_and_batch() -> None:
    h = await make_harness()
    a, b, c = (r.member_id for r in await form_group(h))
    left = await h.coordinator.leave_group(G, [MemberIdentity(a)])
    assert left.error is E.none and [m.error for m in left.members] == [E.none]
    assert group_of(h).is_(GroupState.PREPARING_REBALANCE)
    assert await h.coordinator.heartbeat(G, 1, b) is E.rebalance_in_progress

    batch = await h.coordinator.leave_group(
        G, [MemberIdentity(b), MemberIdentity("ghost"), MemberIdentity(c)]
    )
    assert [(m.member_id, m.error) for m in batch.members] == [
        (b, E.none),
        ("ghost", E.unknown_member_id),
        (c, E.none),
    ]
    await h.settle()
    g = group_of(h)
    assert g.is_(GroupState.EMPTY) and g.generation_id == 2
    # An empty group's new generation is persisted too.
    stored = [v for k, v in h.store.decoded(h.partition_of(G)) if isinstance(k, GroupMetadataKey)]
    assert isinstance(stored[-1], GroupMetadataValue)
    assert stored[-1].generation == 2 and stored[-1].members == ()

    unknown = await h.coordinator.leave_group("no-such-group", [MemberIdentity("x")])
    assert unknown.error is E.none and unknown.members[0].error is E.unknown_member_id


async def test_member_id_required_and_pending_member_expiry() -> None:
    h = await make_harness()
    results = await form_group(h, n=1)
    pending = await h.new_member_id(G, client_id="late")
    g = group_of(h)
    assert g.is_pending_member(pending) and g.is_(GroupState.STABLE)
    await h.advance(SESSION_MS - 1)
    assert await h.coordinator.heartbeat(G, 1, results[0].member_id) is E.none
    await h.advance(1)
    assert not g.is_pending_member(pending)
    # Too late: the id was forgotten.
    late = await h.join(G, pending)
    assert late.result().error is E.unknown_member_id


async def test_pending_member_blocks_the_rebalance_until_it_joins() -> None:
    h = await make_harness()
    (r,) = await form_group(h, n=1)
    pending = await h.new_member_id(G, client_id="late")
    t1 = await h.join(G, r.member_id)  # the leader rejoins: rebalance
    assert not t1.done()
    t2 = await h.join(G, pending)
    assert t1.result().generation_id == 2 and t2.result().generation_id == 2
    assert len(group_of(h).members) == 2


async def test_old_clients_without_kip_394_join_in_one_round_trip() -> None:
    h = await make_harness()
    t = await h.join(G, "", require_known_member_id=False)
    await h.advance(0)
    assert t.result().error is E.none and t.result().member_id.startswith("client-")


async def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    h = await make_harness()
    tasks = [await h.join(G, "", instance_id=f"i{i}", client_id=f"c{i}") for i in range(3)]
    await h.advance(0)
    results = [t.result() for t in tasks]
    syncs = await sync_all(h, results)
    by_instance = dict(zip(("i0", "i1", "i2"), results, strict=True))
    old = by_instance["i1"]
    old_assignment = dict(zip((r.member_id for r in results), syncs, strict=True))[
        old.member_id
    ].assignment
    appends = h.store.appends

    # i1 restarts: it has lost its member id but keeps its group.instance.id.
    t = await h.join(G, "", instance_id="i1", client_id="c1")
    rejoin = t.result()
    assert rejoin.error is E.none and rejoin.member_id != old.member_id
    assert rejoin.member_id.startswith("i1-")
    assert rejoin.generation_id == 1, "no new generation"
    assert group_of(h).is_(GroupState.STABLE)
    assert rejoin.leader_id == old.leader_id
    assert h.store.appends == appends + 1, "the new member id was persisted"
    synced = await h.coordinator.sync_group(G, 1, rejoin.member_id, group_instance_id="i1")
    assert synced.error is E.none and synced.assignment == old_assignment

    # The old incarnation is fenced.
    fenced = await h.coordinator.heartbeat(G, 1, old.member_id, group_instance_id="i1")
    assert fenced is E.fenced_instance_id
    fenced_join = await h.join(G, old.member_id, instance_id="i1")
    assert fenced_join.result().error is E.fenced_instance_id
    commit = await h.coordinator.commit_offsets(
        G, old.member_id, 1, [OffsetCommitPartition("t1", 0, 1)], group_instance_id="i1"
    )
    assert list(commit.values()) == [E.fenced_instance_id]
    assert await h.coordinator.heartbeat(G, 1, rejoin.member_id, group_instance_id="i1") is E.none


async def test_static_leader_restart_with_skip_assignment_v9() -> None:
    h = await make_harness()
    tasks = [await h.join(G, "", instance_id=f"i{i}") for i in range(2)]
    await h.advance(0)
    results = [t.result() for t in tasks]
    await sync_all(h, results)
    leader = next(r for r in results if r.member_id == r.leader_id)
    instance = "i0" if leader is results[0] else "i1"
    new = (await h.join(G, "", instance_id=instance, supports_skip_assignment=True)).result()
    assert new.leader_id == new.member_id and new.skip_assignment
    assert len(new.members) == 2
    old_style = (await h.join(G, "", instance_id=instance, supports_skip_assignment=False)).result()
    assert old_style.leader_id == new.member_id != old_style.member_id
    assert not old_style.skip_assignment and not old_style.members


async def test_static_member_changing_the_groups_protocol_rebalances() -> None:
    h = await make_harness()
    both = [("range", subscription("t1")), ("roundrobin", subscription("t1"))]
    t = await h.join(G, "", instance_id="i0", protocols=both)
    await h.advance(0)
    await sync_all(h, [t.result()])
    flipped = [("roundrobin", subscription("t1")), ("range", subscription("t1"))]
    t2 = await h.join(G, "", instance_id="i0", protocols=flipped)
    assert t2.result().protocol_name == "roundrobin" and t2.result().generation_id == 2


async def test_static_member_storage_failure_restores_the_old_member_id() -> None:
    h = await make_harness()
    t = await h.join(G, "", instance_id="i0")
    await h.advance(0)
    old = t.result()
    await sync_all(h, [old])
    h.store.fail_with = KafkaApiError(E.not_leader_or_follower)
    failed = (await h.join(G, "", instance_id="i0")).result()
    assert failed.error is E.not_coordinator and failed.member_id == ""
    h.store.fail_with = None
    assert group_of(h).current_static_member_id("i0") == old.member_id
    assert await h.coordinator.heartbeat(G, 1, old.member_id, group_instance_id="i0") is E.none


async def test_static_member_leave_by_instance_id() -> None:
    h = await make_harness()
    tasks = [await h.join(G, "", instance_id=f"i{i}") for i in range(2)]
    await h.advance(0)
    await sync_all(h, [t.result() for t in tasks])
    left = await h.coordinator.leave_group(
        G, [MemberIdentity("", "i1"), MemberIdentity("", "nope")]
    )
    assert [m.error for m in left.members] == [E.none, E.unknown_member_id]
    assert group_of(h).current_static_member_id("i1") is None


async def test_static_members_survive_a_rebalance_they_miss_until_their_session_ends() -> None:
    h = await make_harness()
    tasks = [await h.join(G, "", instance_id=f"i{i}") for i in range(2)]
    await h.advance(0)
    results = [t.result() for t in tasks]
    await sync_all(h, results)
    leader = next(r for r in results if r.member_id == r.leader_id)
    other = next(r for r in results if r is not leader)
    inst = "i0" if leader is results[0] else "i1"
    t = await h.join(G, leader.member_id, instance_id=inst)
    await h.advance(SESSION_MS // 2)
    assert await h.coordinator.heartbeat(G, 1, leader.member_id, group_instance_id=inst) is (
        E.rebalance_in_progress
    )
    await h.advance(SESSION_MS // 2)
    # The other static member stopped heartbeating: its session, not the rebalance, ends it.
    assert not group_of(h).has(other.member_id)
    assert t.result().generation_id == 2 and len(group_of(h).members) == 1


async def test_sync_group_errors() -> None:
    h = await make_harness()
    (r,) = await form_group(h, n=1)
    assert (await h.coordinator.sync_group(G, 1, "ghost")).error is E.unknown_member_id
    assert (await h.coordinator.sync_group(G, 7, r.member_id)).error is E.illegal_generation
    bad = await h.coordinator.sync_group(G, 1, r.member_id, protocol_type="connect")
    assert bad.error is E.inconsistent_group_protocol
    ok = await h.coordinator.sync_group(G, 1, r.member_id, protocol_name="range")
    assert ok.error is E.none and ok.protocol_name == "range" and ok.protocol_type == "consumer"
    assert (await h.coordinator.sync_group("nope", 1, r.member_id)).error is E.unknown_member_id
    # During a rebalance SyncGroup is refused.
    await h.join(G, r.member_id, topics=("t1", "t2"))
    assert (await h.coordinator.sync_group(G, 1, r.member_id)).error is E.illegal_generation


async def test_members_that_never_sync_are_removed() -> None:
    h = await make_harness()
    ids = [await h.new_member_id(G, client_id=f"c{i}") for i in range(2)]
    tasks = [await h.join(G, mid) for mid in ids]
    await h.advance(0)
    results = [t.result() for t in tasks]
    leader = next(r for r in results if r.member_id == r.leader_id)
    follower = next(r for r in results if r is not leader)
    plan = range_assign(leader, 4)
    assert (await h.coordinator.sync_group(G, 1, leader.member_id, plan)).error is E.none
    await keep_alive(h, REBALANCE_MS, leader.member_id)
    g = group_of(h)
    assert not g.has(follower.member_id) and g.is_(GroupState.PREPARING_REBALANCE)


async def test_a_rejoin_during_completing_rebalance_answers_parked_syncs() -> None:
    h = await make_harness()
    ids = [await h.new_member_id(G, client_id=f"c{i}") for i in range(2)]
    tasks = [await h.join(G, mid) for mid in ids]
    await h.advance(0)
    results = [t.result() for t in tasks]
    follower = next(r for r in results if r.member_id != r.leader_id)
    parked = h.start(h.coordinator.sync_group(G, 1, follower.member_id))
    await h.settle()
    # Same metadata: a retry of a lost response, answered with the current generation.
    again = await h.join(G, follower.member_id)
    assert again.result().generation_id == 1 and not parked.done()
    # New metadata: start over; the parked SyncGroup learns of it.
    await h.join(G, follower.member_id, topics=("t1", "t2"))
    assert parked.result().error is E.rebalance_in_progress


async def test_storage_failure_of_the_assignment_fails_the_sync_and_rebalances() -> None:
    h = await make_harness()
    ids = [await h.new_member_id(G, client_id=f"c{i}") for i in range(2)]
    tasks = [await h.join(G, mid) for mid in ids]
    await h.advance(0)
    results = [t.result() for t in tasks]
    leader = next(r for r in results if r.member_id == r.leader_id)
    follower = next(r for r in results if r is not leader)
    parked = h.start(h.coordinator.sync_group(G, 1, follower.member_id))
    h.store.fail_with = KafkaApiError(E.not_enough_replicas)
    lead = await h.coordinator.sync_group(G, 1, leader.member_id, range_assign(leader, 4))
    assert lead.error is E.coordinator_not_available
    await h.settle()
    assert parked.result().error is E.coordinator_not_available
    assert group_of(h).is_(GroupState.PREPARING_REBALANCE)


async def test_request_timeout_storing_the_assignment_is_rebalance_in_progress() -> None:
    h = await make_harness()
    (mid,) = [await h.new_member_id(G)]
    t = await h.join(G, mid)
    await h.advance(0)
    h.store.fail_with = TimeoutError()
    r = t.result()
    res = await h.coordinator.sync_group(G, 1, mid, range_assign(r, 4))
    assert res.error is E.rebalance_in_progress


async def test_join_group_validation_errors() -> None:
    h = await make_harness()
    assert (await h.join("", "")).result().error is E.invalid_group_id
    assert (await h.join(G, "", session_ms=1)).result().error is E.invalid_session_timeout
    assert (await h.join(G, "", session_ms=10**7)).result().error is E.invalid_session_timeout
    assert (await h.join(G, "made-up")).result().error is E.unknown_member_id
    no_protocols = await h.join(G, "", protocols=[])
    assert no_protocols.result().error is E.inconsistent_group_protocol
    await form_group(h, n=1)
    other_type = await h.join(G, "", protocol_type="connect", protocols=[("v0", b"")])
    assert other_type.result().error is E.inconsistent_group_protocol
    other_protocol = await h.join(G, "", protocols=[("sticky", subscription("t1"))])
    assert other_protocol.result().error is E.inconsistent_group_protocol
    assert await h.coordinator.heartbeat("", 1, "x") is E.invalid_group_id
    assert (await h.coordinator.sync_group("", 1, "x")).error is E.invalid_group_id
    assert (await h.coordinator.leave_group("", [])).error is E.invalid_group_id


async def test_group_max_size() -> None:
    h = await make_harness(group_max_size=2)
    await form_group(h, n=2)
    # A third member is turned away before it even gets a member id.
    full = await h.join(G, "", client_id="c3")
    assert full.result().error is E.group_max_size_reached and full.result().member_id == ""


async def test_members_the_group_record_could_not_hold_are_turned_away() -> None:
    h = await make_harness(max_message_bytes=2_000)
    fat = [("range", subscription("t1", user_data=b"x" * 700))]
    ids = [await h.new_member_id(G, client_id=f"c{i}") for i in range(3)]
    first, second = [await h.join(G, mid, protocols=fat) for mid in ids[:2]]
    await h.advance(0)
    # A third would make the group's record larger than message.max.bytes: Kafka would let
    # it in and fail every SyncGroup; here it alone is refused, and the others go on.
    third = await h.join(G, ids[2], protocols=fat)
    assert third.result().error is E.group_max_size_reached
    assert third.result().member_id == ""
    results = [first.result(), second.result()]
    assert [s.error for s in await sync_all(h, results)] == [E.none, E.none]
    assert group_of(h).is_(GroupState.STABLE) and len(group_of(h).members) == 2
    # One member too large on its own is refused before it gets a member id.
    huge = [("range", subscription("t1", user_data=b"x" * 2_000))]
    alone = await h.join("another-group", "", protocols=huge)
    assert alone.result().error is E.group_max_size_reached


async def test_group_max_size_counts_members_that_rejoined_during_a_rebalance() -> None:
    h = await make_harness(group_max_size=2)
    a, b = (r.member_id for r in await form_group(h, n=2))
    ta = await h.join(G, a)  # the leader rejoins: a rebalance, with one member rejoined
    # While rebalancing, a newcomer is counted against those who rejoined, not all members.
    c = await h.new_member_id(G, client_id="c")
    tc = await h.join(G, c)
    assert not tc.done()
    # b rejoins last and finds the group full: it is the one turned away.
    tb = await h.join(G, b)
    assert tb.result().error is E.group_max_size_reached and tb.result().member_id == ""
    assert ta.result().error is E.none and tc.result().error is E.none
    assert set(group_of(h).members) == {a, c}


async def test_new_member_that_never_gets_its_answer_times_out_after_five_minutes() -> None:
    h = await make_harness()
    (r,) = await form_group(h, n=1)
    mid = await h.new_member_id(G, client_id="slow")
    t = await h.join(G, mid, rebalance_ms=10 * 60_000, session_ms=SESSION_MS)
    # r keeps heartbeating but never rejoins; the rebalance waits for it up to 10 minutes.
    await keep_alive(h, 5 * 60_000 - 1, r.member_id)
    assert not t.done()
    await h.advance(1)
    assert t.result().error is E.unknown_member_id
    assert not group_of(h).has(mid)


async def test_unknown_coordinator_and_inactive_coordinator() -> None:
    h = await make_harness(owned=[])
    assert (await h.join(G, "")).result().error is E.not_coordinator
    assert await h.coordinator.heartbeat(G, 1, "m") is E.not_coordinator
    await h.coordinator.shutdown()
    assert (await h.join(G, "")).result().error is E.coordinator_not_available
    listed = await h.coordinator.list_groups()
    assert listed.error is E.coordinator_not_available


async def test_list_groups_with_states_filter() -> None:
    h = await make_harness()
    await form_group(h, n=1, group="g-stable")
    await h.coordinator.commit_offsets("g-simple", "", -1, [OffsetCommitPartition("t1", 0, 5)])
    all_groups = await h.coordinator.list_groups()
    assert all_groups.error is E.none
    assert {(g.group_id, g.state, g.protocol_type) for g in all_groups.groups} == {
        ("g-stable", "Stable", "consumer"),
        ("g-simple", "Empty", ""),
    }
    stable = await h.coordinator.list_groups(states=["STABLE"])
    assert [g.group_id for g in stable.groups] == ["g-stable"]
    assert (await h.coordinator.list_groups(types=["consumer"])).groups == ()
    assert len((await h.coordinator.list_groups(types=["Classic"])).groups) == 2


async def test_describe_unknown_group() -> None:
    h = await make_harness()
    old = await h.coordinator.describe_group("nope", api_version=5)
    assert old.error is E.none and old.state == "Dead" and old.members == ()
    new = await h.coordinator.describe_group("nope", api_version=6)
    assert new.error is E.group_id_not_found and new.error_message == "Group nope not found."


async def test_describe_during_a_rebalance_has_no_metadata() -> None:
    h = await make_harness(initial_delay_ms=3_000)
    await h.join(G, await h.new_member_id(G))
    d = await h.coordinator.describe_group(G)
    assert d.state == "PreparingRebalance" and d.protocol == ""
    assert d.members[0].metadata == b"" and d.members[0].assignment == b""


async def test_cancelled_join_request_does_not_wedge_the_group() -> None:
    h = await make_harness()
    mid = await h.new_member_id(G)
    t = await h.join(G, mid)
    t.cancel()
    await asyncio.gather(t, return_exceptions=True)
    await h.advance(0)
    # The coordinator answered into the void; the member then has to heartbeat or go.
    assert group_of(h).is_(GroupState.COMPLETING_REBALANCE)
    # It never syncs nor heartbeats, so its session runs out and the group empties.
    await h.advance(SESSION_MS)
    assert group_of(h).is_(GroupState.EMPTY) and group_of(h).generation_id == 2
