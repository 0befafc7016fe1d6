"""GroupCoordinator offsets: OffsetCommit, OffsetFetch, expiry, DeleteGroups, OffsetDelete,
loading and unloading __consumer_offsets partitions, and storage failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from coordinator_support import (
    SESSION_MS,
    Harness,
    MemoryGroupStore,
    make_harness,
    range_assign,
)
from manual_clock import ManualClock

from samsa.coordinator import (
    GroupCoordinator,
    GroupCoordinatorConfig,
    GroupState,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetFetchPartition,
)
from samsa.coordinator.group_records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode, KafkaApiError

E = ErrorCode
G = "payments"
RETENTION_MS = 60 * 60_000
LONG_SESSION_MS = 30 * 60_000  # group.max.session.timeout.ms: heartbeats every 20 minutes do


def commits(*items: tuple[str, int, int]) -> list[OffsetCommitPartition]:
    return [OffsetCommitPartition(t, p, o) for t, p, o in items]


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


async def stable_group(
    h: Harness,
    group: str = G,
    n: int = 2,
    topics: tuple[str, ...] = ("t1",),
    session_ms: int = SESSION_MS,
) -> list[str]:
    ids = [await h.new_member_id(group, client_id=f"c{i}") for i in range(n)]
    tasks = [await h.join(group, mid, topics=topics, session_ms=session_ms) for mid in ids]
    await h.advance(0)
    results = [t.result() for t in tasks]
    leader = next(r for r in results if r.member_id == r.leader_id)
    plan = range_assign(leader, 4)
    syncs = [
        h.start(h.coordinator.sync_group(group, 1, r.member_id, plan if r is leader else None))
        for r in results
    ]
    await h.settle()
    assert all(s.result().error is E.none for s in syncs)
    return ids


async def fetched(
    h: Harness, group: str = G, partitions: list[TopicPartition] | None = None
) -> dict[TopicPartition, int]:
    result = await h.coordinator.fetch_offsets(group, partitions)
    assert result.error is E.none
    return {tp(p.topic, p.partition): p.offset for p in result.partitions}


async def test_members_commit_and_fetch_with_generation_checks() -> None:
    h = await make_harness()
    a, b = await stable_group(h)
    got = await h.coordinator.commit_offsets(G, a, 1, commits(("t1", 0, 10), ("t1", 1, 20)))
    assert got == {tp("t1", 0): E.none, tp("t1", 1): E.none}
    assert await fetched(h) == {tp("t1", 0): 10, tp("t1", 1): 20}

    assert await h.coordinator.commit_offsets(G, a, 0, commits(("t1", 0, 99))) == {
        tp("t1", 0): E.illegal_generation
    }
    assert await h.coordinator.commit_offsets(G, "stranger", 1, commits(("t1", 0, 99))) == {
        tp("t1", 0): E.unknown_member_id
    }
    # A generation -1 commit is for groups without members.
    assert await h.coordinator.commit_offsets(G, "", -1, commits(("t1", 0, 99))) == {
        tp("t1", 0): E.unknown_member_id
    }
    assert (await fetched(h))[tp("t1", 0)] == 10

    # Unknown partitions are refused one by one, the rest go through.
    mixed = await h.coordinator.commit_offsets(
        G, b, 1, commits(("t1", 2, 5), ("nope", 0, 1), ("t1", 99, 1))
    )
    assert mixed == {
        tp("t1", 2): E.none,
        tp("nope", 0): E.unknown_topic_or_partition,
        tp("t1", 99): E.unknown_topic_or_partition,
    }

    # Leader epoch and metadata come back as committed.
    await h.coordinator.commit_offsets(
        G, a, 1, [OffsetCommitPartition("t2", 0, 7, leader_epoch=3, metadata="ckpt")]
    )
    (p,) = (await h.coordinator.fetch_offsets(G, [tp("t2", 0)])).partitions
    assert p == OffsetFetchPartition("t2", 0, 7, 3, "ckpt", E.none)
    (missing,) = (await h.coordinator.fetch_offsets(G, [tp("t3", 1)])).partitions
    assert missing == OffsetFetchPartition("t3", 1, -1, -1, "", E.none)

    # Each commit is one record per partition in the group's __consumer_offsets partition.
    keys = [k for k, _ in h.store.decoded(h.partition_of(G)) if isinstance(k, OffsetCommitKey)]
    assert OffsetCommitKey(G, "t1", 0) in keys


async def test_commits_during_a_rebalance() -> None:
    h = await make_harness()
    a, b = await stable_group(h)
    rejoin = await h.join(G, a, topics=("t1", "t2"))  # new subscription: rebalance
    assert h.coordinator.manager.get_group(G).is_(GroupState.PREPARING_REBALANCE)
    # Preparing: the previous generation may still commit what it has processed.
    assert await h.coordinator.commit_offsets(G, b, 1, commits(("t1", 3, 33))) == {
        tp("t1", 3): E.none
    }
    tb = await h.join(G, b)
    assert rejoin.result().generation_id == 2 and tb.result().generation_id == 2
    # Completing: the new generation has no assignment yet.
    assert await h.coordinator.commit_offsets(G, b, 2, commits(("t1", 3, 34))) == {
        tp("t1", 3): E.rebalance_in_progress
    }
    assert await h.coordinator.commit_offsets(G, b, 1, commits(("t1", 3, 34))) == {
        tp("t1", 3): E.illegal_generation
    }
    assert (await fetched(h))[tp("t1", 3)] == 33


async def test_a_commit_counts_as_a_heartbeat() -> None:
    h = await make_harness()
    a, b = await stable_group(h)
    for _ in range(4):
        await h.advance(SESSION_MS // 2)
        assert await h.coordinator.commit_offsets(G, a, 1, commits(("t1", 0, 1)))
        assert await h.coordinator.heartbeat(G, 1, b) is E.none
    group = h.coordinator.manager.get_group(G)
    assert group.has(a) and group.is_(GroupState.STABLE)


async def test_simple_commits_with_generation_minus_one() -> None:
    h = await make_harness()
    got = await h.coordinator.commit_offsets("standalone", "", -1, commits(("t1", 0, 5)))
    assert got == {tp("t1", 0): E.none}
    assert await fetched(h, "standalone") == {tp("t1", 0): 5}
    group = h.coordinator.manager.get_group("standalone")
    assert group.is_(GroupState.EMPTY) and group.protocol_type is None
    # A group that does not exist cannot take commits from a generation.
    assert await h.coordinator.commit_offsets("gone", "m", 3, commits(("t1", 0, 5))) == {
        tp("t1", 0): E.illegal_generation
    }
    # An empty group id is accepted for commits and fetches, as Kafka does for old clients.
    assert await h.coordinator.commit_offsets("", "", -1, commits(("t1", 0, 1))) == {
        tp("t1", 0): E.none
    }
    assert await fetched(h, "") == {tp("t1", 0): 1}
    # Once a consumer group forms, simple commits are refused.
    await stable_group(h, "standalone", n=1)
    assert await h.coordinator.commit_offsets("standalone", "", -1, commits(("t1", 0, 6))) == {
        tp("t1", 0): E.unknown_member_id
    }


async def test_commits_to_only_unknown_partitions_create_no_group() -> None:
    h = await make_harness()
    got = await h.coordinator.commit_offsets("g", "", -1, commits(("nope", 0, 1)))
    assert got == {tp("nope", 0): E.unknown_topic_or_partition}
    assert h.coordinator.manager.get_group("g") is None


async def test_offset_metadata_too_large() -> None:
    h = await make_harness(offset_metadata_max_bytes=8)
    got = await h.coordinator.commit_offsets(
        "g",
        "",
        -1,
        [
            OffsetCommitPartition("t1", 0, 1, metadata="x" * 9),
            OffsetCommitPartition("t1", 1, 1, metadata="x" * 8),
        ],
    )
    assert got == {tp("t1", 0): E.offset_metadata_too_large, tp("t1", 1): E.none}
    all_too_large = await h.coordinator.commit_offsets(
        "g", "", -1, [OffsetCommitPartition("t1", 2, 1, metadata="y" * 100)]
    )
    assert all_too_large == {tp("t1", 2): E.offset_metadata_too_large}
    assert await fetched(h, "g") == {tp("t1", 1): 1}


async def test_fetch_all_partitions_and_unstable_offsets() -> None:
    h = await make_harness()
    await h.coordinator.commit_offsets("g", "", -1, commits(("t1", 0, 1), ("t2", 3, 2)))
    assert await fetched(h, "g") == {tp("t1", 0): 1, tp("t2", 3): 2}
    assert await fetched(h, "unknown-group") == {}
    h.store.gate = asyncio.Event()
    pending = h.start(h.coordinator.commit_offsets("g", "", -1, commits(("t1", 0, 9))))
    await asyncio.sleep(0)
    stable = await h.coordinator.fetch_offsets("g", [tp("t1", 0), tp("t2", 3)], require_stable=True)
    assert [p.error for p in stable.partitions] == [E.unstable_offset_commit, E.none]
    # A plain fetch never shows an offset that is not yet durable.
    assert (await fetched(h, "g"))[tp("t1", 0)] == 1
    h.store.gate.set()
    assert (await pending) == {tp("t1", 0): E.none}
    assert (await fetched(h, "g"))[tp("t1", 0)] == 9


async def test_a_disconnected_committer_still_completes_its_commit() -> None:
    h = await make_harness()
    h.store.gate = asyncio.Event()
    pending = h.start(h.coordinator.commit_offsets("g", "", -1, commits(("t1", 0, 4))))
    await asyncio.sleep(0)
    pending.cancel()
    h.store.gate.set()
    await h.settle()
    assert await fetched(h, "g") == {tp("t1", 0): 4}
    assert not h.coordinator.manager.get_group("g").pending_offset_commits


async def test_storage_failure_fails_the_commit_and_loses_nothing_else() -> None:
    h = await make_harness()
    a, _ = await stable_group(h)
    await h.coordinator.commit_offsets(G, a, 1, commits(("t1", 0, 10)))
    await h.coordinator.commit_offsets("other", "", -1, commits(("t1", 0, 50)))
    before = {p: list(h.store.logs[p]) for p in h.store.logs}

    for raised, expected in [
        (KafkaApiError(E.not_enough_replicas), E.coordinator_not_available),
        (KafkaApiError(E.not_leader_or_follower), E.not_coordinator),
        (KafkaApiError(E.request_timed_out), E.request_timed_out),
        (KafkaApiError(E.message_too_large), E.invalid_commit_offset_size),
        (TimeoutError(), E.request_timed_out),
        (OSError("disk gone"), E.not_coordinator),
        (RuntimeError("bug"), E.unknown_server_error),
    ]:
        h.store.fail_with = raised
        got = await h.coordinator.commit_offsets(G, a, 1, commits(("t1", 0, 11), ("t1", 1, 11)))
        assert got == {tp("t1", 0): expected, tp("t1", 1): expected}, raised

    h.store.fail_with = None
    assert await fetched(h) == {tp("t1", 0): 10}
    assert await fetched(h, "other") == {tp("t1", 0): 50}
    assert {p: list(h.store.logs[p]) for p in h.store.logs} == before
    group = h.coordinator.manager.get_group(G)
    assert not group.pending_offset_commits and group.is_(GroupState.STABLE)
    assert await h.coordinator.commit_offsets(G, a, 1, commits(("t1", 0, 12))) == {
        tp("t1", 0): E.none
    }
    assert (await fetched(h))[tp("t1", 0)] == 12


async def test_expiry_of_offsets_of_an_empty_group_counts_from_when_it_emptied() -> None:
    h = await make_harness(offsets_retention_ms=RETENTION_MS)
    a, b = await stable_group(h, session_ms=LONG_SESSION_MS)
    await h.coordinator.commit_offsets(G, a, 1, commits(("t1", 0, 10), ("t1", 1, 11)))
    # Stable and subscribed: nothing expires however old the commits are.
    for _ in range(3):
        await h.advance(RETENTION_MS // 3)
        assert await h.coordinator.heartbeat(G, 1, a) is E.none
        assert await h.coordinator.heartbeat(G, 1, b) is E.none
    assert await h.coordinator.cleanup() == 0
    await h.coordinator.leave_group(G, [MemberIdentity(a), MemberIdentity(b)])
    await h.settle()
    group = h.coordinator.manager.get_group(G)
    assert group.is_(GroupState.EMPTY)

    await h.advance(RETENTION_MS - 1)
    assert await h.coordinator.cleanup() == 0
    assert len(await fetched(h)) == 2
    await h.advance(1)
    assert await h.coordinator.cleanup() == 2
    assert await fetched(h) == {}
    # The group, empty and offset-less, is gone too, with a tombstone for its metadata.
    assert h.coordinator.manager.get_group(G) is None
    tail = h.store.decoded(h.partition_of(G))[-3:]
    assert sorted(str(k) for k, v in tail if v is None) == sorted(
        [
            str(OffsetCommitKey(G, "t1", 0)),
            str(OffsetCommitKey(G, "t1", 1)),
            str(GroupMetadataKey(G)),
        ]
    )


async def test_expiry_of_simple_commits_counts_from_each_commit_and_runs_periodically() -> None:
    h = await make_harness(
        offsets_retention_ms=RETENTION_MS, offsets_retention_check_interval_ms=60_000
    )
    h.coordinator.start(enable_offset_expiration=True)
    await h.coordinator.commit_offsets("simple", "", -1, commits(("t1", 0, 1)))
    await h.advance(RETENTION_MS // 2)
    await h.coordinator.commit_offsets("simple", "", -1, commits(("t1", 1, 2)))
    await h.advance(RETENTION_MS // 2)
    assert await fetched(h, "simple") == {tp("t1", 1): 2}
    await h.advance(RETENTION_MS // 2)
    assert h.coordinator.manager.get_group("simple") is None
    # Generation 0: the group never had metadata, so only offset tombstones were written.
    assert not any(
        isinstance(k, GroupMetadataKey) for k, _ in h.store.decoded(h.partition_of("simple"))
    )


async def test_offsets_of_topics_a_stable_group_dropped_expire() -> None:
    h = await make_harness(offsets_retention_ms=RETENTION_MS)
    (a,) = await stable_group(h, n=1, topics=("t1",), session_ms=LONG_SESSION_MS)
    await h.coordinator.commit_offsets(G, a, 1, commits(("t1", 0, 1), ("t2", 0, 1)))
    for _ in range(3):
        await h.advance(RETENTION_MS // 3)
        assert await h.coordinator.heartbeat(G, 1, a) is E.none
    assert await h.coordinator.cleanup() == 1
    assert await fetched(h) == {tp("t1", 0): 1}


async def test_delete_groups() -> None:
    h = await make_harness()
    await stable_group(h, "busy", n=1)
    await h.coordinator.commit_offsets("idle", "", -1, commits(("t1", 0, 1), ("t2", 0, 1)))
    result = await h.coordinator.delete_groups(["busy", "idle", "ghost", ""])
    assert result == {
        "busy": E.non_empty_group,
        "idle": E.none,
        "ghost": E.group_id_not_found,
        "": E.group_id_not_found,
    }
    assert h.coordinator.manager.get_group("idle") is None
    assert await fetched(h, "idle") == {}
    tombstones = [k for k, v in h.store.decoded(h.partition_of("idle")) if v is None]
    assert set(map(str, tombstones)) == {
        str(OffsetCommitKey("idle", "t1", 0)),
        str(OffsetCommitKey("idle", "t2", 0)),
    }
    # A deleted group can be used again from scratch.
    assert await h.coordinator.commit_offsets("idle", "", -1, commits(("t1", 0, 7)))
    assert await fetched(h, "idle") == {tp("t1", 0): 7}


async def test_delete_a_group_that_had_generations_writes_a_metadata_tombstone() -> None:
    h = await make_harness()
    (a,) = await stable_group(h, n=1)
    await h.coordinator.leave_group(G, [MemberIdentity(a)])
    await h.settle()
    assert await h.coordinator.delete_groups([G]) == {G: E.none}
    last_key, last_value = h.store.decoded(h.partition_of(G))[-1]
    assert last_key == GroupMetadataKey(G) and last_value is None


async def test_offset_delete() -> None:
    h = await make_harness()
    (a,) = await stable_group(h, n=1, topics=("t1",))
    await h.coordinator.commit_offsets(G, a, 1, commits(("t1", 0, 1), ("t2", 0, 2), ("t2", 1, 3)))
    result = await h.coordinator.delete_offsets(G, [tp("t1", 0), tp("t2", 0)])
    assert result.error is E.none
    assert result.partitions == {tp("t1", 0): E.group_subscribed_to_topic, tp("t2", 0): E.none}
    assert await fetched(h) == {tp("t1", 0): 1, tp("t2", 1): 3}

    assert (await h.coordinator.delete_offsets("ghost", [tp("t1", 0)])).error is (
        E.group_id_not_found
    )
    assert (await h.coordinator.delete_offsets("", [tp("t1", 0)])).error is E.invalid_group_id

    # An empty group may delete anything; with no offsets left it goes away.
    await h.coordinator.commit_offsets("simple", "", -1, commits(("t1", 0, 1)))
    emptied = await h.coordinator.delete_offsets("simple", [tp("t1", 0), tp("t1", 1)])
    assert emptied.partitions == {tp("t1", 0): E.none, tp("t1", 1): E.none}
    assert h.coordinator.manager.get_group("simple") is None


async def test_offset_delete_on_unknown_subscriptions_and_other_protocols() -> None:
    h = await make_harness()
    t = await h.join(
        "garbled", "", protocols=[("range", b"\xff\xff")], require_known_member_id=False
    )
    await h.advance(0)
    r = t.result()
    await h.coordinator.sync_group("garbled", 1, r.member_id, {r.member_id: b""})
    res = await h.coordinator.delete_offsets("garbled", [tp("t2", 0)])
    assert res.partitions == {tp("t2", 0): E.group_subscribed_to_topic}, "unknown means all"

    t2 = await h.join(
        "connect",
        "",
        protocol_type="connect",
        protocols=[("v1", b"")],
        require_known_member_id=False,
    )
    await h.advance(0)
    assert t2.result().error is E.none
    assert (await h.coordinator.delete_offsets("connect", [tp("t1", 0)])).error is (
        E.non_empty_group
    )


async def test_load_rebuilds_groups_and_offsets_from_the_partition() -> None:
    h = await make_harness()
    a, b = await stable_group(h)
    await h.coordinator.commit_offsets(G, a, 1, commits(("t1", 0, 10), ("t1", 1, 11)))
    await h.coordinator.commit_offsets(G, a, 1, commits(("t1", 0, 12)))
    await h.coordinator.commit_offsets("simple", "", -1, commits(("t2", 0, 5)))
    await h.coordinator.commit_offsets("deleted", "", -1, commits(("t2", 0, 5)))
    await h.coordinator.delete_groups(["deleted"])

    # Another broker becomes the coordinator, from the same log.
    clock = ManualClock(h.clock.now_ms())
    store = MemoryGroupStore()
    store.logs = h.store.logs
    config = GroupCoordinatorConfig(
        offsets_topic_num_partitions=4, group_initial_rebalance_delay_ms=0
    )
    other = GroupCoordinator(config, store, clock=clock)
    other.start(enable_offset_expiration=False)
    for p in range(4):
        await other.load_partition(p, store.records(p))

    g = other.manager.get_group(G)
    assert g is not None and g.is_(GroupState.STABLE) and g.generation_id == 1
    assert set(g.members) == {a, b} and g.protocol_name == "range"
    assert g.subscribed_topics == {"t1"}
    assert all(m.assignment for m in g.all_member_metadata())
    fetched_g = await other.fetch_offsets(G)
    assert {(p.partition, p.offset) for p in fetched_g.partitions} == {(0, 12), (1, 11)}
    assert [p.offset for p in (await other.fetch_offsets("simple")).partitions] == [5]
    assert other.manager.get_group("deleted") is None

    # Loaded members heartbeat into the new coordinator as if nothing happened...
    assert await other.heartbeat(G, 1, a) is E.none
    synced = await other.sync_group(G, 1, b)
    assert synced.error is E.none and synced.assignment
    # ...and those that do not are dropped after their session timeout.
    clock.advance(SESSION_MS)
    await asyncio.sleep(0)
    assert not g.has(a) and not g.has(b)


async def test_load_skips_unreadable_records() -> None:
    h = await make_harness(owned=[])
    part = h.partition_of("g")
    good = (
        encode_offset_commit_key(OffsetCommitKey("g", "t1", 0)),
        encode_offset_commit_value(OffsetCommitValue(3, "", 1)),
    )
    records = [(b"\x00", b"junk"), (b"\x00\x09\x00\x01x", b""), good, (good[0], b"\x00\x63junk")]
    await h.coordinator.load_partition(part, records)
    assert await fetched(h, "g") == {tp("t1", 0): 3}


async def test_requests_during_a_load_get_coordinator_load_in_progress() -> None:
    h = await make_harness(owned=[])
    part = h.partition_of(G)
    release = asyncio.Event()

    async def slow_replay() -> AsyncIterator[tuple[bytes, bytes | None]]:
        yield (
            encode_offset_commit_key(OffsetCommitKey(G, "t1", 0)),
            encode_offset_commit_value(OffsetCommitValue(8, "", 1)),
        )
        await release.wait()

    loading = h.start(h.coordinator.load_partition(part, slow_replay()))
    await h.settle()
    c = h.coordinator
    assert (await h.join(G, "")).result().error is E.coordinator_load_in_progress
    assert (await c.fetch_offsets(G)).error is E.coordinator_load_in_progress
    assert await c.commit_offsets(G, "", -1, commits(("t1", 0, 1))) == {
        tp("t1", 0): E.coordinator_load_in_progress
    }
    # Kafka answers heartbeats blindly and sends SyncGroup back to JoinGroup while loading.
    assert await c.heartbeat(G, 1, "m") is E.none
    assert (await c.sync_group(G, 1, "m")).error is E.rebalance_in_progress
    assert (await c.list_groups()).error is E.coordinator_load_in_progress
    assert (await c.describe_group(G)).error is E.coordinator_load_in_progress
    assert await c.delete_groups([G]) == {G: E.coordinator_load_in_progress}
    release.set()
    await loading
    assert await fetched(h, G) == {tp("t1", 0): 8}
    assert (await c.list_groups()).error is E.none


async def test_unload_answers_parked_requests_and_hands_the_groups_over() -> None:
    h = await make_harness(initial_delay_ms=3_000)
    await h.coordinator.commit_offsets(G, "", -1, commits(("t1", 0, 1)))
    t = await h.join(G, await h.new_member_id(G))
    h.coordinator.unload_partition(h.partition_of(G))
    await h.settle()
    assert t.result().error is E.not_coordinator
    assert h.coordinator.manager.get_group(G) is None
    assert (await h.coordinator.fetch_offsets(G)).error is E.not_coordinator
    assert await h.coordinator.heartbeat(G, 0, "m") is E.not_coordinator
    assert h.clock.pending() == 0, "no timer of the unloaded group is left"
    # Loading it back brings the offsets back.
    part = h.partition_of(G)
    await h.coordinator.load_partition(part, h.store.records(part))
    assert await fetched(h) == {tp("t1", 0): 1}


async def test_unload_during_a_load_discards_it() -> None:
    h = await make_harness(owned=[])
    part = h.partition_of(G)
    release = asyncio.Event()

    async def slow_replay() -> AsyncIterator[tuple[bytes, bytes | None]]:
        await release.wait()
        yield (
            encode_offset_commit_key(OffsetCommitKey(G, "t1", 0)),
            encode_offset_commit_value(OffsetCommitValue(8, "", 1)),
        )

    loading = h.start(h.coordinator.load_partition(part, slow_replay()))
    await h.settle()
    h.coordinator.unload_partition(part)
    release.set()
    await loading
    assert part not in h.coordinator.owned_partitions
    assert (await h.coordinator.fetch_offsets(G)).error is E.not_coordinator


async def test_a_failed_load_leaves_the_partition_unowned() -> None:
    h = await make_harness(owned=[])
    part = h.partition_of(G)

    def broken() -> object:
        yield (b"\x00\x02\x00\x01g", None)
        raise OSError("log unreadable")

    try:
        await h.coordinator.load_partition(part, broken())  # type: ignore[arg-type]
    except OSError:
        pass
    else:
        raise AssertionError("the load error must reach the caller")
    assert (await h.coordinator.fetch_offsets(G)).error is E.not_coordinator
    await h.coordinator.load_partition(part, [])
    assert (await h.coordinator.fetch_offsets(G)).error is E.none


async def test_one_groups_failure_does_not_touch_another_groups_offsets() -> None:
    h = await make_harness(offsets_retention_ms=RETENTION_MS)
    await h.coordinator.commit_offsets("x", "", -1, commits(("t1", 0, 1)))
    await h.coordinator.commit_offsets("y", "", -1, commits(("t1", 0, 2)))

    class FailForX(MemoryGroupStore):
        async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
            if any(b"\x00\x01x" in k for k, _ in records):
                raise KafkaApiError(E.not_leader_or_follower)
            await super().append(partition, records)

    flaky = FailForX()
    flaky.logs = h.store.logs
    h.coordinator.manager.store = flaky
    got_x = await h.coordinator.commit_offsets("x", "", -1, commits(("t1", 0, 9)))
    got_y = await h.coordinator.commit_offsets("y", "", -1, commits(("t1", 0, 9)))
    assert got_x == {tp("t1", 0): E.not_coordinator} and got_y == {tp("t1", 0): E.none}
    assert await fetched(h, "x") == {tp("t1", 0): 1}
    assert await fetched(h, "y") == {tp("t1", 0): 9}


async def test_max_group_size_on_load_rebalances_the_group() -> None:
    h = await make_harness()
    await stable_group(h, n=3)
    part = h.partition_of(G)
    clock = ManualClock(h.clock.now_ms())
    store = MemoryGroupStore()
    store.logs = h.store.logs
    cfg = GroupCoordinatorConfig(offsets_topic_num_partitions=4, group_max_size=2)
    other = GroupCoordinator(cfg, store, clock=clock)
    other.start(enable_offset_expiration=False)
    await other.load_partition(part, store.records(part))
    group = other.manager.get_group(G)
    assert group.is_(GroupState.PREPARING_REBALANCE)
    await other.shutdown()
    assert clock.pending() == 0


async def test_deleted_partitions_lose_their_offsets_in_every_group() -> None:
    h = await make_harness()
    (a,) = await stable_group(h, n=1)
    await h.coordinator.commit_offsets(G, a, 1, commits(("t1", 0, 1), ("t2", 0, 1)))
    await h.coordinator.commit_offsets("simple", "", -1, commits(("t2", 0, 5)))
    assert await h.coordinator.on_partitions_deleted([tp("t2", 0)]) == 2
    assert await fetched(h) == {tp("t1", 0): 1}
    # The simple group had nothing else: it is gone.
    assert h.coordinator.manager.get_group("simple") is None


async def test_metadata_longer_than_a_record_string_is_too_large() -> None:
    h = await make_harness(offset_metadata_max_bytes=100_000)
    got = await h.coordinator.commit_offsets(
        "g", "", -1, [OffsetCommitPartition("t1", 0, 1, metadata="é" * 20_000)]
    )
    assert got == {tp("t1", 0): E.offset_metadata_too_large}
