"""TxnOffsetCommit in the group coordinator: offsets pending per producer until the marker,
UNSTABLE_OFFSET_COMMIT for require_stable meanwhile, commit applies them and abort drops
them, and a reload from a log with transactional batches and markers gives the same view."""

from __future__ import annotations

from typing import Any

from coordinator_support import make_harness
from manual_clock import ManualClock

from samsa.coordinator import (
    GroupCoordinator,
    GroupCoordinatorConfig,
    OffsetCommitPartition,
)
from samsa.coordinator.group_store import TxnMarker, TxnRecord
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode

E = ErrorCode
G = "app"
T0 = TopicPartition("t1", 0)


class ReplayLogStore:
    """Keeps what replay would give back: (key, value), TxnRecord, TxnMarker."""

    def __init__(self) -> None:
        self.logs: dict[int, list[Any]] = {}

    async def append(
        self, partition: int, records: list[Any], producer_id: int = -1, producer_epoch: int = -1
    ) -> None:
        log = self.logs.setdefault(partition, [])
        for key, value in records:
            log.append(TxnRecord(producer_id, key, value) if producer_id >= 0 else (key, value))

    def marker(self, partition: int, producer_id: int, committed: bool) -> None:
        self.logs.setdefault(partition, []).append(TxnMarker(producer_id, committed))


async def new_coordinator(store: ReplayLogStore) -> GroupCoordinator:
    config = GroupCoordinatorConfig(offsets_topic_num_partitions=4)
    c = GroupCoordinator(config, store, clock=ManualClock())
    for p in range(4):
        await c.load_partition(p, list(store.logs.get(p, [])))
    c.start(enable_offset_expiration=False)
    return c


async def offsets(c: GroupCoordinator, stable: bool = False) -> dict[int, object]:
    r = await c.fetch_offsets(G, [T0], require_stable=stable)
    return {p.partition: (p.error if p.error is not E.none else p.offset) for p in r.partitions}


async def test_txn_offsets_are_pending_until_the_commit_marker() -> None:
    h = await make_harness()
    got = await h.coordinator.commit_transactional_offsets(
        G, 7, 0, [OffsetCommitPartition("t1", 0, 42)]
    )
    assert got == {T0: E.none}
    # Not visible, and unstable for a require_stable fetch (KIP-447).
    assert await offsets(h.coordinator) == {0: -1}
    assert await offsets(h.coordinator, stable=True) == {0: E.unstable_offset_commit}
    h.coordinator.on_txn_marker(h.partition_of(G), 7, committed=True)
    assert await offsets(h.coordinator, stable=True) == {0: 42}


async def test_aborted_txn_offsets_are_dropped() -> None:
    h = await make_harness()
    await h.coordinator.commit_offsets(G, "", -1, [OffsetCommitPartition("t1", 0, 5)])
    await h.coordinator.commit_transactional_offsets(G, 7, 0, [OffsetCommitPartition("t1", 0, 9)])
    # A marker for another producer, or on another partition, changes nothing.
    h.coordinator.on_txn_marker(h.partition_of(G), 8, committed=True)
    h.coordinator.on_txn_marker((h.partition_of(G) + 1) % 4, 7, committed=True)
    assert await offsets(h.coordinator, stable=True) == {0: E.unstable_offset_commit}
    h.coordinator.on_txn_marker(h.partition_of(G), 7, committed=False)
    assert await offsets(h.coordinator, stable=True) == {0: 5}


async def test_txn_commit_from_a_stale_generation_is_refused() -> None:
    h = await make_harness()
    got = await h.coordinator.commit_transactional_offsets(
        G, 7, 0, [OffsetCommitPartition("t1", 0, 1)], member_id="nobody", generation_id=3
    )
    assert got == {T0: E.unknown_member_id}
    got = await h.coordinator.commit_transactional_offsets(
        "", 7, 0, [OffsetCommitPartition("t1", 0, 1)]
    )
    assert got == {T0: E.invalid_group_id}


async def test_reload_applies_committed_transactions_and_keeps_open_ones_pending() -> None:
    store = ReplayLogStore()
    c = await new_coordinator(store)
    p = c.partition_for(G)
    await c.commit_transactional_offsets(G, 1, 0, [OffsetCommitPartition("t1", 0, 10)])
    store.marker(p, 1, committed=True)
    await c.commit_transactional_offsets(G, 2, 0, [OffsetCommitPartition("t1", 0, 20)])
    store.marker(p, 2, committed=False)
    await c.commit_transactional_offsets(G, 3, 0, [OffsetCommitPartition("t1", 0, 30)])

    other = await new_coordinator(store)
    assert await offsets(other) == {0: 10}
    assert await offsets(other, stable=True) == {0: E.unstable_offset_commit}
    other.on_txn_marker(p, 3, committed=True)
    assert await offsets(other, stable=True) == {0: 30}
