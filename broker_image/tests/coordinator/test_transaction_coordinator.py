"""TransactionCoordinator on an in-memory __transaction_state and a recording marker writer:
InitProducerId fencing, AddPartitionsToTxn, EndTxn with its markers, Kafka's error codes for
bad input, timeouts, reloading a partition, and the log's byte format."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest
from manual_clock import ManualClock

from samsa.coordinator.transaction import (
    TransactionConfig,
    TransactionCoordinator,
    TransactionState,
    TxnMarkerEntry,
)
from samsa.coordinator.transaction.transaction_log import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode

E = ErrorCode
TXN = "orders-processor"
TP0 = TopicPartition("out", 0)
TP1 = TopicPartition("out", 1)


class MemoryTxnStore:
    def __init__(self) -> None:
        self.logs: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        self.fail_with: BaseException | None = None
        self.gate: asyncio.Event | None = None

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        self.logs[partition].extend(records)

    def states(self, partition: int) -> list[str]:
        return [
            TransactionState(decode_value(v).transaction_status).kafka_name
            for _, v in self.logs[partition]
            if v is not None
        ]


class RecordingMarkers:
    """Leaders: broker 1 for partition 0, broker 2 for the rest; answers set per partition."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, TxnMarkerEntry]] = []
        self.errors: dict[TopicPartition, list[ErrorCode]] = defaultdict(list)
        self.deleted_topics: set[str] = set()

    def leader_of(self, tp: TopicPartition) -> int | None:
        if tp.topic in self.deleted_topics:
            return None
        return 1 if tp.partition == 0 else 2

    def topic_exists(self, topic: str) -> bool:
        return topic not in self.deleted_topics

    async def write_markers(
        self, broker_id: int, markers: list[TxnMarkerEntry], timeout_s: float
    ) -> dict[TopicPartition, ErrorCode]:
        out = {}
        for m in markers:
            self.sent.append((broker_id, m))
            for tp in m.partitions:
                queued = self.errors[tp]
                out[tp] = queued.pop(0) if queued else E.none
        return out

    def marked(self) -> dict[TopicPartition, list[bool]]:
        out: dict[TopicPartition, list[bool]] = defaultdict(list)
        for _, m in self.sent:
            for tp in m.partitions:
                out[tp].append(m.committed)
        return out


class Harness:
    def __init__(self, partitions: int = 4) -> None:
        self.clock = ManualClock()
        self.store = MemoryTxnStore()
        self.markers = RecordingMarkers()
        self.next_pid = 1000
        self.config = TransactionConfig(
            transaction_state_log_num_partitions=partitions,
            transaction_max_timeout_ms=60_000,
            marker_retry_backoff_ms=1,
        )
        self.coordinator = self.new_coordinator()

    async def _pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def new_coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(
            self.config, self.store, self._pid, self.markers, clock=self.clock
        )

    async def load_all(self, coordinator_epoch: int = 0) -> None:
        for p in range(self.config.transaction_state_log_num_partitions):
            await self.coordinator.load_partition(p, coordinator_epoch, self.store.logs[p])
        self.coordinator.start(enable_timeouts=False)

    @property
    def partition(self) -> int:
        return self.coordinator.partition_for(TXN)


def _state(c: TransactionCoordinator, txn: str) -> TransactionState:
    d = c.describe(txn)
    s = TransactionState.from_kafka_name(d.state)
    assert s is not None, d
    return s


@pytest.fixture
async def h() -> Harness:
    harness = Harness()
    await harness.load_all()
    return harness


async def init(h: Harness, txn: str = TXN, timeout_ms: int = 10_000) -> tuple[int, int]:
    r = await h.coordinator.init_producer_id(txn, timeout_ms)
    assert r.error is E.none, r
    return r.producer_id, r.producer_epoch


async def settle(h: Harness) -> None:
    await asyncio.wait_for(h.coordinator.wait_idle(), 5)


# ---------------------------------------------------------------- InitProducerId


async def test_new_transactional_id_gets_a_producer_id_at_epoch_0_written_to_its_partition(
    h: Harness,
) -> None:
    pid, epoch = await init(h)
    assert (pid, epoch) == (1001, 0)
    assert h.store.states(h.partition) == ["Empty"]
    key, value = h.store.logs[h.partition][0]
    assert decode_key(key) == TXN
    assert value is not None and decode_value(value).partitions is None


async def test_second_init_bumps_the_epoch_and_fences_the_first_producer(h: Harness) -> None:
    pid, epoch = await init(h)
    pid2, epoch2 = await init(h)
    assert (pid2, epoch2) == (pid, epoch + 1)
    assert await h.coordinator.add_partitions(TXN, pid, epoch, [TP0]) is E.producer_fenced
    assert await h.coordinator.add_partitions(TXN, pid, epoch2, [TP0]) is E.none


async def test_init_with_an_ongoing_transaction_aborts_it_first(h: Harness) -> None:
    pid, epoch = await init(h)
    assert await h.coordinator.add_partitions(TXN, pid, epoch, [TP0, TP1]) is E.none
    r = await h.coordinator.init_producer_id(TXN, 10_000)
    assert r.error is E.concurrent_transactions
    await settle(h)
    # The abort went to both partitions with the fenced epoch, and completed.
    assert h.markers.marked() == {TP0: [False], TP1: [False]}
    assert {m.producer_epoch for _, m in h.markers.sent} == {epoch + 1}
    assert h.store.states(h.partition)[-2:] == ["PrepareAbort", "CompleteAbort"]
    # The retry gets a second bump: the zombie's epoch and the fence's are both behind.
    pid2, epoch2 = await init(h)
    assert (pid2, epoch2) == (pid, epoch + 2)
    assert await h.coordinator.end_transaction(TXN, pid, epoch, True) is E.producer_fenced


async def test_transaction_timeout_above_the_maximum_is_refused(h: Harness) -> None:
    r = await h.coordinator.init_producer_id(TXN, 60_001)
    assert r.error is E.invalid_transaction_timeout
    assert (await h.coordinator.init_producer_id(TXN, 0)).error is E.invalid_transaction_timeout
    assert (await h.coordinator.init_producer_id("", 1000)).error is E.invalid_request


async def test_kip360_retry_with_the_current_epoch_and_a_stale_one(h: Harness) -> None:
    pid, epoch = await init(h)
    r = await h.coordinator.init_producer_id(TXN, 10_000, pid, epoch)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.none, pid, epoch + 1)
    # The same request again (its answer was lost): the same epoch back, no second bump.
    r = await h.coordinator.init_producer_id(TXN, 10_000, pid, epoch)
    assert (r.error, r.producer_epoch) == (E.none, epoch + 1)
    r = await h.coordinator.init_producer_id(TXN, 10_000, pid + 77, 0)
    assert r.error is E.producer_fenced


async def test_exhausted_epoch_rotates_to_a_new_producer_id(h: Harness) -> None:
    pid, _ = await init(h)
    entry = h.coordinator.state_manager.get_transaction_state(TXN)
    assert entry is not None and not isinstance(entry, ErrorCode)
    entry.metadata.producer_epoch = 2**15 - 2
    pid2, epoch2 = await init(h)
    assert pid2 != pid and epoch2 == 0


# ---------------------------------------------------------------- AddPartitions / EndTxn


async def test_commit_writes_prepare_then_markers_then_complete(h: Harness) -> None:
    pid, epoch = await init(h)
    assert await h.coordinator.add_partitions(TXN, pid, epoch, [TP0]) is E.none
    assert await h.coordinator.add_partitions(TXN, pid, epoch, [TP1]) is E.none
    # Already in the transaction: answered without a write.
    writes = len(h.store.logs[h.partition])
    assert await h.coordinator.add_partitions(TXN, pid, epoch, [TP0]) is E.none
    assert len(h.store.logs[h.partition]) == writes
    assert await h.coordinator.end_transaction(TXN, pid, epoch, committed=True) is E.none
    await settle(h)
    assert h.store.states(h.partition) == [
        "Empty",
        "Ongoing",
        "Ongoing",
        "PrepareCommit",
        "CompleteCommit",
    ]
    assert h.markers.marked() == {TP0: [True], TP1: [True]}
    assert sorted(b for b, _ in h.markers.sent) == [1, 2]
    d = h.coordinator.describe(TXN)
    assert (d.state, d.partitions) == ("CompleteCommit", ())
    # A retried EndTxn after completion is answered OK; the opposite outcome is not.
    assert await h.coordinator.end_transaction(TXN, pid, epoch, True) is E.none
    assert await h.coordinator.end_transaction(TXN, pid, epoch, False) is E.invalid_txn_state
    # The next transaction starts from the completed one.
    assert await h.coordinator.add_partitions(TXN, pid, epoch, [TP1]) is E.none


async def test_requests_during_marker_writes_get_concurrent_transactions(h: Harness) -> None:
    pid, epoch = await init(h)
    await h.coordinator.add_partitions(TXN, pid, epoch, [TP0])
    gate = asyncio.Event()
    real = h.markers.write_markers

    async def held(broker_id: int, markers: list[TxnMarkerEntry], timeout_s: float):  # type: ignore[no-untyped-def]
        await gate.wait()
        return await real(broker_id, markers, timeout_s)

    h.markers.write_markers = held  # type: ignore[method-assign]
    assert await h.coordinator.end_transaction(TXN, pid, epoch, True) is E.none
    assert await h.coordinator.add_partitions(TXN, pid, epoch, [TP1]) is E.concurrent_transactions
    assert (await h.coordinator.init_producer_id(TXN, 1000)).error is E.concurrent_transactions
    assert await h.coordinator.end_transaction(TXN, pid, epoch, True) is E.concurrent_transactions
    assert h.coordinator.describe(TXN).state == "PrepareCommit"
    gate.set()
    await settle(h)
    assert h.coordinator.describe(TXN).state == "CompleteCommit"


async def test_markers_are_retried_until_every_partition_has_them(h: Harness) -> None:
    pid, epoch = await init(h)
    await h.coordinator.add_partitions(TXN, pid, epoch, [TP0, TP1])
    h.markers.errors[TP1] = [E.not_leader_or_follower, E.request_timed_out]
    assert await h.coordinator.end_transaction(TXN, pid, epoch, False) is E.none
    await settle(h)
    assert h.markers.marked() == {TP0: [False], TP1: [False, False, False]}
    assert h.coordinator.describe(TXN).state == "CompleteAbort"


async def test_a_fenced_coordinator_stops_writing_markers(h: Harness) -> None:
    pid, epoch = await init(h)
    await h.coordinator.add_partitions(TXN, pid, epoch, [TP0, TP1])
    h.markers.errors[TP1] = [E.transaction_coordinator_fenced]
    assert await h.coordinator.end_transaction(TXN, pid, epoch, True) is E.none
    await settle(h)
    # A newer coordinator owns the transaction: this one neither retries nor completes it.
    assert h.markers.marked()[TP1] == [True]
    assert h.coordinator.describe(TXN).state == "PrepareCommit"


async def test_a_deleted_topic_needs_no_marker(h: Harness) -> None:
    pid, epoch = await init(h)
    await h.coordinator.add_partitions(TXN, pid, epoch, [TP0, TopicPartition("gone", 3)])
    h.markers.deleted_topics.add("gone")
    assert await h.coordinator.end_transaction(TXN, pid, epoch, True) is E.none
    await settle(h)
    assert h.coordinator.describe(TXN).state == "CompleteCommit"


async def test_bad_end_txn_requests_get_kafkas_errors(h: Harness) -> None:
    # EndTxn for an id this coordinator has never seen.
    assert await h.coordinator.end_transaction(TXN, 5, 0, True) is E.invalid_producer_id_mapping
    pid, epoch = await init(h)
    # Without a transaction.
    assert await h.coordinator.end_transaction(TXN, pid, epoch, True) is E.invalid_txn_state
    await h.coordinator.add_partitions(TXN, pid, epoch, [TP0])
    # Another producer id; an older epoch; a newer one than the coordinator handed out.
    assert await h.coordinator.end_transaction(TXN, pid + 1, epoch, True) is (
        E.invalid_producer_id_mapping
    )
    # A new producer fences this one: its transaction is aborted, then it gets its epoch.
    assert (await h.coordinator.init_producer_id(TXN, 1000)).error is E.concurrent_transactions
    await settle(h)
    await init(h)
    assert await h.coordinator.end_transaction(TXN, pid, epoch, True) is E.producer_fenced
    assert await h.coordinator.add_partitions(TXN, pid, epoch + 5, [TP0]) is E.producer_fenced
    assert await h.coordinator.add_partitions("unknown", pid, epoch, [TP0]) is (
        E.invalid_producer_id_mapping
    )


async def test_a_client_that_goes_away_leaves_no_transition_half_done(h: Harness) -> None:
    pid, epoch = await init(h)
    h.store.gate = asyncio.Event()
    # The client disconnects while its AddPartitionsToTxn is being written: the write and
    # the transition still complete.
    request = asyncio.ensure_future(h.coordinator.add_partitions(TXN, pid, epoch, [TP0]))
    await asyncio.sleep(0)
    request.cancel()
    h.store.gate.set()
    await settle(h)
    assert h.coordinator.describe(TXN).state == "Ongoing"
    # Likewise an EndTxn: its markers are written after the decision.
    h.store.gate = asyncio.Event()
    request = asyncio.ensure_future(h.coordinator.end_transaction(TXN, pid, epoch, True))
    await asyncio.sleep(0)
    request.cancel()
    h.store.gate.set()
    await settle(h)
    assert h.coordinator.describe(TXN).state == "CompleteCommit"
    assert (await h.coordinator.init_producer_id(TXN, 1000)).error is E.none


async def test_a_failed_log_write_is_reported_and_leaves_no_pending_state(h: Harness) -> None:
    pid, epoch = await init(h)
    h.store.fail_with = TimeoutError()
    assert await h.coordinator.add_partitions(TXN, pid, epoch, [TP0]) is (
        E.coordinator_not_available
    )
    h.store.fail_with = None
    assert await h.coordinator.add_partitions(TXN, pid, epoch, [TP0]) is E.none
    assert h.coordinator.describe(TXN).partitions == (TP0,)


async def test_not_coordinator_for_an_id_of_a_partition_not_loaded() -> None:
    h = Harness()
    h.coordinator.start(enable_timeouts=False)
    assert (await h.coordinator.init_producer_id(TXN, 1000)).error is E.not_coordinator
    h.coordinator.state_manager.loading[h.partition] = object()
    assert (await h.coordinator.init_producer_id(TXN, 1000)).error is (
        E.coordinator_load_in_progress
    )


# ---------------------------------------------------------------- timeouts


async def test_a_timed_out_transaction_is_aborted_with_an_epoch_bump(h: Harness) -> None:
    pid, epoch = await init(h, timeout_ms=5_000)
    await h.coordinator.add_partitions(TXN, pid, epoch, [TP0])
    h.clock.advance(4_000)
    assert await h.coordinator.abort_timed_out_transactions() == 0
    h.clock.advance(1_001)
    assert await h.coordinator.abort_timed_out_transactions() == 1
    await settle(h)
    assert h.markers.marked() == {TP0: [False]}
    d = h.coordinator.describe(TXN)
    assert (d.state, d.producer_epoch) == ("CompleteAbort", epoch + 1)
    # The producer that timed out is fenced.
    assert await h.coordinator.end_transaction(TXN, pid, epoch, True) is E.producer_fenced
    assert await h.coordinator.add_partitions(TXN, pid, epoch, [TP0]) is E.producer_fenced


async def test_the_timeout_runs_on_its_interval() -> None:
    h = Harness()
    for p in range(4):
        await h.coordinator.load_partition(p, 0, [])
    h.coordinator.start()
    pid, epoch = await init(h, timeout_ms=1_000)
    await h.coordinator.add_partitions(TXN, pid, epoch, [TP0])
    h.clock.advance(h.config.abort_timed_out_transaction_cleanup_interval_ms)
    await settle(h)
    assert h.coordinator.describe(TXN).state == "CompleteAbort"
    await h.coordinator.shutdown()


async def test_idle_transactional_ids_expire(h: Harness) -> None:
    await init(h)
    h.clock.advance(h.config.transactional_id_expiration_ms + 1)
    assert await h.coordinator.remove_expired_transactional_ids() == 1
    assert h.coordinator.describe(TXN).error is E.transactional_id_not_found
    assert h.store.logs[h.partition][-1][1] is None  # a tombstone


# ---------------------------------------------------------------- loading


async def test_a_new_coordinator_finishes_a_prepared_commit(h: Harness) -> None:
    pid, epoch = await init(h)
    await h.coordinator.add_partitions(TXN, pid, epoch, [TP0, TP1])
    h.markers.errors[TP1] = [E.not_leader_or_follower] * 1000  # never lands here
    assert await h.coordinator.end_transaction(TXN, pid, epoch, True) is E.none
    # This broker loses the partition before the markers are all written.
    h.coordinator.unload_partition(h.partition)
    await settle(h)
    assert "CompleteCommit" not in h.store.states(h.partition)
    # Another coordinator (a new leader epoch) loads it and completes the commit.
    h.markers.errors.clear()
    h.markers.sent.clear()
    h.coordinator = h.new_coordinator()
    await h.load_all(coordinator_epoch=1)
    await settle(h)
    assert h.markers.marked() == {TP0: [True], TP1: [True]}
    assert {m.coordinator_epoch for _, m in h.markers.sent} == {1}
    d = h.coordinator.describe(TXN)
    assert (d.state, d.producer_id, d.producer_epoch) == ("CompleteCommit", pid, epoch)


async def test_reloaded_ongoing_transaction_keeps_its_partitions(h: Harness) -> None:
    pid, epoch = await init(h)
    await h.coordinator.add_partitions(TXN, pid, epoch, [TP0, TP1])
    h.coordinator = h.new_coordinator()
    await h.load_all(coordinator_epoch=3)
    d = h.coordinator.describe(TXN)
    assert (d.state, d.partitions, d.producer_epoch) == ("Ongoing", (TP0, TP1), epoch)
    assert await h.coordinator.end_transaction(TXN, pid, epoch, False) is E.none
    await settle(h)
    assert h.coordinator.describe(TXN).state == "CompleteAbort"


# ---------------------------------------------------------------- admin


async def test_describe_and_list_transactions(h: Harness) -> None:
    pid, epoch = await init(h)
    await h.coordinator.add_partitions(TXN, pid, epoch, [TP0])
    await init(h, "other")
    listed = h.coordinator.list_transactions()
    assert [(t.transactional_id, t.state) for t in listed.transactions] == [
        (TXN, "Ongoing"),
        ("other", "Empty"),
    ]
    only = h.coordinator.list_transactions(states=["Ongoing", "Bogus"])
    assert [t.transactional_id for t in only.transactions] == [TXN]
    assert only.unknown_state_filters == ("Bogus",)
    assert [
        t.transactional_id for t in h.coordinator.list_transactions(producer_ids=[pid]).transactions
    ] == [TXN]
    h.clock.advance(100)
    # The Ongoing one started 100 ms ago; the Empty one has no start (-1), as in Kafka.
    longer = h.coordinator.list_transactions(min_duration_ms=50).transactions
    assert len(longer) == 2
    assert h.coordinator.list_transactions(min_duration_ms=100).transactions == (
        listed.transactions[1],
    )
    assert h.coordinator.describe("nope").error is E.transactional_id_not_found


# ---------------------------------------------------------------- format


def test_log_value_round_trips_in_both_versions() -> None:
    value = TransactionLogValue(
        producer_id=42,
        producer_epoch=7,
        transaction_timeout_ms=60_000,
        transaction_status=int(TransactionState.ONGOING),
        partitions=(("a", (0, 2)), ("b", (1,))),
        last_update_timestamp_ms=1_700_000_000_123,
        start_timestamp_ms=1_700_000_000_000,
    )
    assert decode_value(encode_value(value)) == value
    assert decode_value(encode_value(value, version=1)) == value
    assert decode_key(encode_key("tx")) == "tx"


def test_log_value_v0_bytes_are_kafkas() -> None:
    # Laid out by hand from TransactionLogValue.json v0: version, producer id, epoch, timeout,
    # status, partitions (null), last update, start.
    value = TransactionLogValue(5, 1, 1000, 0, None, 2, -1)
    expected = (
        b"\x00\x00"
        + (5).to_bytes(8, "big")
        + b"\x00\x01"
        + (1000).to_bytes(4, "big")
        + b"\x00"
        + b"\xff\xff\xff\xff"
        + (2).to_bytes(8, "big")
        + b"\xff" * 8
    )
    assert encode_value(value) == expected
    assert encode_key("ab") == b"\x00\x00\x00\x02ab"
