"""Partition: one topic partition on this broker, its log, leadership, ISR and high watermark.

As leader it tracks each follower's log end offset from its fetches, advances the high
watermark to the smallest log end offset in the ISR, and proposes ISR changes (a follower that
lags longer than replica.lag.time.max.ms leaves, one that caught up joins) to the controller
through an injected ``alter_isr`` callback: the change takes effect when the controller has
committed it.  While a change is in flight the high watermark is computed over the larger of
the two ISRs (Kafka's "maximal ISR", KIP-497), so a shrink never lets it advance early.

Everything here is synchronous and does no I/O; the replica manager drives it.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter
from typing import Protocol

from samsa.log import Log, LogAppendInfo
from samsa.log.producer_state import AppendOrigin
from samsa.log.record_validation import RecordError
from samsa.metadata.model import PartitionState, TopicPartition
from samsa.protocol.errors import ErrorCode, KafkaApiError
from samsa.protocol.record_batch import BatchHeader
from samsa.replica.latency_stages import AppendTimes, StageClock


@dataclass(slots=True)
class ProducePartitionResponse:
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    # acks=all: the offset the high watermark must pass before the answer (-1: none).
    required_offset: int = -1
    # KIP-467: the records that made the batch fail, as (index in the batch, message).
    record_errors: tuple[RecordError, ...] = ()


class FetchClock(Protocol):
    """A follower's fetch session, as the leader's ISR check sees it: when the follower last
    fetched through it, and when before that (monotonic ms)."""

    fetch_ms: int
    previous_fetch_ms: int


# Versions of partitions' state, unique across Partition objects, so that a partition created
# again (deleted and re-created) never matches what a fetch session noted of the one before.
_versions = itertools.count(1)


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one follower."""

    log_end_offset: int = -1
    # Unknown (-1) until the follower's first fetch reports it.
    log_start_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    # The leader's log end offset when this follower last fetched.
    last_fetch_leader_leo: int = -1
    # When records were last sent to this follower (0: its last fetch got none).
    records_sent_at: float = 0.0
    # The fetch session that found the follower at the end of this partition's log, and
    # skips the partition while nothing changes (``Partition.version``): the follower has been
    # caught up as of that session's every fetch since, which its own times above no longer
    # record. None once a fetch reads the partition again.
    session: FetchClock | None = None

    def caught_up_ms(self) -> int:
        """When the follower was last known to have the leader's whole log."""
        session = self.session
        if session is not None and session.fetch_ms > self.last_caught_up_ms:
            return session.fetch_ms
        return self.last_caught_up_ms


@dataclass(slots=True)
class PendingIsr:
    """An ISR change sent to the controller and not yet answered."""

    isr: tuple[int, ...]
    # The ISR the high watermark is computed over meanwhile: the union of old and new.
    maximal: tuple[int, ...]


@dataclass(order=True, slots=True)
class _AckWaiter:
    offset: int
    future: asyncio.Future[int] = field(compare=False)


AlterIsr = Callable[["Partition", tuple[int, ...]], None]

# Fetch's and ListOffsets' isolation_level.
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def _complete(waiters: list[_AckWaiter], reached: int) -> list[_AckWaiter]:
    """Resolve the waiters whose offset ``reached`` passes; returns those still waiting."""
    still = []
    for w in waiters:
        if w.future.done():
            continue
        if w.offset <= reached:
            w.future.set_result(ErrorCode.none.value)
        else:
            still.append(w)
    return still


class Partition:
    def __init__(
        self,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        log: Log,
        broker_id: int,
        on_data: Callable[[TopicPartition, bool], None],
        now_ms: Callable[[], int],
        alter_isr: AlterIsr | None = None,
        high_watermark: int | None = None,
        stages: StageClock | None = None,
    ) -> None:
        self.tp = tp
        self.topic_id = topic_id
        self.log = log
        self.broker_id = broker_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.controller_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.adding: tuple[int, ...] = ()
        self.removing: tuple[int, ...] = ()
        self.pending: PendingIsr | None = None
        self.remote: dict[int, ReplicaState] = {}
        # The offset at which this broker's current leadership began (for ISR expansion).
        self.leader_epoch_start_offset = -1
        start = log.log_end_offset if high_watermark is None else high_watermark
        self._high_watermark = -1
        self.high_watermark = max(min(start, log.log_end_offset), log.log_start_offset)
        self._on_data = on_data
        # Changes with anything a follower's fetch of this partition would see (the log end,
        # the offsets, the leadership and ISR): a fetch session skips a partition whose
        # version is the one it found quiet at.
        self.version = next(_versions)
        # Milliseconds for the followers' lag (last caught up, last fetch): a monotonic clock.
        self._now_ms = now_ms
        self._alter_isr = alter_isr
        self._ack_waiters: list[_AckWaiter] = []
        # DeleteRecords waiting for every live replica's log start offset (DelayedDeleteRecords).
        self._low_watermark_waiters: list[_AckWaiter] = []
        # Whether a broker is alive: a dead follower does not hold the low watermark back.
        self.replica_alive: Callable[[int], bool] = lambda broker_id: True
        self.stages = stages or StageClock()
        # As leader: when recent batches were appended, for the stage timings.
        self.appended = AppendTimes()
        # As leader: the last client append failed on the disk, and none has succeeded since.
        self.storage_error = False

    def _news(self, committed: bool) -> None:
        """The log grew or its start moved (False), or the high watermark moved (True)."""
        self.version = next(_versions)
        self._on_data(self.tp, committed)

    # ------------------------------------------------------------------ offsets

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, hw: int) -> None:
        self._high_watermark = hw
        self.version = next(_versions)
        # Transactions whose markers it passed stop holding the last stable offset.
        self.log.producer_state.on_high_watermark(hw)

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of the transactions not complete and replicated, high
        watermark): what read_committed consumers may read below."""
        state = self.log.producer_state
        if not state.ongoing_txns and not state.unreplicated_txns:
            return self._high_watermark  # the common case, on every fetch: no transactions
        return self.log.last_stable_offset(self._high_watermark)

    # ------------------------------------------------------------------ roles

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.pending.maximal if self.pending is not None else self.isr

    def is_newer(self, state: PartitionState) -> bool:
        """Whether a controller's state for this partition is newer than what we have."""
        if state.leader_epoch != self.leader_epoch:
            return state.leader_epoch > self.leader_epoch
        return state.partition_epoch > self.partition_epoch

    def _apply(self, state: PartitionState) -> None:
        self.version = next(_versions)
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.replicas = state.replicas
        self.isr = state.isr
        self.adding = state.adding
        self.removing = state.removing
        self.pending = None

    def make_leader(self, state: PartitionState) -> bool:
        """Take leadership (or an update of it); True if this broker just became leader."""
        became = not self.is_leader or state.leader_epoch != self.leader_epoch
        self._apply(state)
        now = self._now_ms()
        leo = self.log.log_end_offset
        if became:
            # Followers must prove themselves again: reset what we knew of them (Kafka does).
            self.remote = {r: ReplicaState(last_caught_up_ms=now) for r in state.replicas}
            self.leader_epoch_start_offset = leo
            self.appended.clear()
            if state.leader_epoch >= 0:
                self.log.assign_epoch(state.leader_epoch, leo)
        else:
            self.remote = {
                r: self.remote.get(r) or ReplicaState(last_caught_up_ms=now) for r in state.replicas
            }
        self.remote.pop(self.broker_id, None)
        self._maybe_advance_high_watermark()
        return became

    def make_follower(self, state: PartitionState) -> bool:
        """Follow ``state.leader``; True if the leader or its epoch changed (refetch needed)."""
        changed = self.leader_id != state.leader or self.leader_epoch != state.leader_epoch
        was_leader = self.is_leader
        self._apply(state)
        self.remote = {}
        if was_leader:
            self.fail_waiters(ErrorCode.not_leader_or_follower)
        return changed

    def make_offline(self) -> None:
        self.version = next(_versions)
        self.leader_id = -1
        self.pending = None
        self.remote = {}
        self.fail_waiters(ErrorCode.not_leader_or_follower)

    # ------------------------------------------------------------------ produce (leader)

    def append_records_to_leader(
        self,
        records: bytes | memoryview,
        headers: list[BatchHeader],
        required_acks: int,
        min_insync_replicas: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        if not self.is_leader:
            raise KafkaApiError(ErrorCode.not_leader_or_follower)
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise KafkaApiError(
                ErrorCode.not_enough_replicas,
                f"The in-sync replicas of {self.tp} ({len(self.isr)}) are fewer than "
                f"min.insync.replicas ({min_insync_replicas})",
            )
        info = self.log.append_as_leader(records, self.leader_epoch, headers, origin)
        if self.stages.sink is not None:
            self.appended.appended(info.last_offset + 1, perf_counter())
        self._news(False)  # followers may fetch it
        self._maybe_advance_high_watermark()
        return info

    def wait_for_high_watermark(self, offset: int) -> asyncio.Future[int]:
        """A future resolved with ErrorCode.none once the high watermark reaches ``offset``,
        or with an error code if this broker stops leading first."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self.high_watermark >= offset:
            future.set_result(ErrorCode.none.value)
        elif not self.is_leader:
            future.set_result(ErrorCode.not_leader_or_follower.value)
        else:
            self._ack_waiters.append(_AckWaiter(offset, future))
        return future

    def fail_waiters(self, error: ErrorCode) -> None:
        waiters = self._ack_waiters + self._low_watermark_waiters
        self._ack_waiters, self._low_watermark_waiters = [], []
        for w in waiters:
            if not w.future.done():
                w.future.set_result(error.value)

    def _complete_waiters(self) -> None:
        if self._ack_waiters:
            self._ack_waiters = _complete(self._ack_waiters, self.high_watermark)

    # ------------------------------------------------------------------ DeleteRecords (leader)

    def delete_records_on_leader(self, offset: int) -> tuple[int, int]:
        """Move the log start offset to ``offset`` (-1: the high watermark), as Kafka's
        deleteRecordsOnLeader; returns (the offset asked for, the low watermark)."""
        if not self.is_leader:
            raise KafkaApiError(ErrorCode.not_leader_or_follower)
        if not self.log.config.delete:
            raise KafkaApiError(
                ErrorCode.policy_violation,
                f"Records of partition {self.tp} can not be deleted due to the configured policy",
            )
        wanted = self.high_watermark if offset == -1 else offset
        if wanted < 0 or wanted > self.high_watermark:
            raise KafkaApiError(
                ErrorCode.offset_out_of_range,
                f"Cannot increment the log start offset to {wanted} of partition {self.tp} "
                f"since it is outside [0, the high watermark {self.high_watermark}]",
            )
        if self.log.maybe_increment_log_start_offset(wanted):
            # Wake parked follower fetches, so they learn the new log start offset now.
            self._news(False)
        return wanted, self.low_watermark()

    def low_watermark(self) -> int:
        """The smallest log start offset among this leader and its live followers."""
        low = self.log.log_start_offset
        for replica, state in self.remote.items():
            if state.log_start_offset < low and self.replica_alive(replica):
                low = state.log_start_offset
        return low

    def wait_for_low_watermark(self, offset: int) -> asyncio.Future[int]:
        """A future resolved with ErrorCode.none once every live replica's log start offset
        reached ``offset``, or with an error code if this broker stops leading first."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if not self.is_leader:
            future.set_result(ErrorCode.not_leader_or_follower.value)
        elif self.low_watermark() >= offset:
            future.set_result(ErrorCode.none.value)
        else:
            self._low_watermark_waiters.append(_AckWaiter(offset, future))
        return future

    # ------------------------------------------------------------------ followers' fetches

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, log_start_offset: int = -1
    ) -> None:
        """A follower fetched from ``fetch_offset``: it has everything below it, and nothing
        below ``log_start_offset``."""
        state = self.remote.get(replica_id)
        if state is None:
            return  # not (or no longer) a replica: its fetch is answered, its offset ignored
        session = state.session
        if session is not None:
            # The session skipped this partition up to its fetch before this one, each time
            # finding the follower at the end: its last fetch of the partition, as Kafka
            # would have recorded it.
            state.session = None
            if session.previous_fetch_ms > state.last_fetch_ms:
                state.last_fetch_ms = session.previous_fetch_ms
                state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        now = self._now_ms()
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            state.last_caught_up_ms = now
        elif fetch_offset >= state.last_fetch_leader_leo >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        if log_start_offset != state.log_start_offset:
            state.log_start_offset = log_start_offset
            if self._low_watermark_waiters:
                self._low_watermark_waiters = _complete(
                    self._low_watermark_waiters, self.low_watermark()
                )
        state.last_fetch_ms = now
        if state.records_sent_at:
            self.stages.since("follower_refetch", state.records_sent_at)
            state.records_sent_at = 0.0
        state.last_fetch_leader_leo = leo
        self._maybe_expand_isr(replica_id, state)
        self._maybe_advance_high_watermark()

    def follower_at_end(
        self, replica_id: int, fetch_offset: int, session: FetchClock | None = None
    ) -> bool:
        """A follower's fetch, the same as its last, finds it in the ISR with the whole log:
        note it caught up now, as ``update_follower_fetch_state`` would, and say so. False:
        the fetch must be read in full (the follower lags, or is not in the ISR).
        ``session``: the fetch session that will skip the partition from now on while its
        ``version`` holds, and keeps the follower's caught-up time."""
        state = self.remote.get(replica_id)
        leo = self.log.log_end_offset
        if (
            state is None
            or fetch_offset != leo
            or state.log_end_offset != leo
            or replica_id not in self.isr
        ):
            return False
        state.last_caught_up_ms = state.last_fetch_ms = self._now_ms()
        state.last_fetch_leader_leo = leo
        state.session = session
        return True

    def _maybe_expand_isr(self, replica_id: int, state: ReplicaState) -> None:
        if self.pending is not None or replica_id in self.isr or self._alter_isr is None:
            return
        if replica_id not in self.replicas:
            return
        if (
            state.log_end_offset >= self.high_watermark
            and state.log_end_offset >= self.leader_epoch_start_offset
        ):
            self._propose(tuple(sorted({*self.isr, replica_id})))

    def maybe_shrink_isr(self, max_lag_ms: int) -> tuple[int, ...]:
        """Propose dropping followers that have not caught up for ``max_lag_ms``; returns
        the out-of-sync replicas found."""
        if not self.is_leader or self.pending is not None or self._alter_isr is None:
            return ()
        now = self._now_ms()
        leo = self.log.log_end_offset
        lagging = tuple(
            r
            for r in self.isr
            if r != self.broker_id
            and (state := self.remote.get(r)) is not None
            and state.log_end_offset < leo
            and now - state.caught_up_ms() > max_lag_ms
        )
        if lagging:
            self._propose(tuple(r for r in self.isr if r not in lagging))
        return lagging

    def _propose(self, isr: tuple[int, ...]) -> None:
        assert self._alter_isr is not None
        self.pending = PendingIsr(isr, tuple(sorted({*self.isr, *isr})))
        self._alter_isr(self, isr)

    def on_isr_committed(
        self, isr: tuple[int, ...], leader_epoch: int, partition_epoch: int
    ) -> None:
        """The controller answered our proposal with the committed state."""
        if leader_epoch != self.leader_epoch:
            self.pending = None
            return
        self.isr = isr
        self.partition_epoch = partition_epoch
        self.pending = None
        self.version = next(_versions)
        self._maybe_advance_high_watermark()

    def on_isr_failed(self) -> None:
        """The proposal was refused or lost: forget it, and propose again when it applies."""
        self.pending = None

    # ------------------------------------------------------------------ high watermark

    def _maybe_advance_high_watermark(self) -> bool:
        if not self.is_leader:
            return False
        hw = self.log.log_end_offset
        for replica in self.maximal_isr:
            if replica != self.broker_id:
                state = self.remote.get(replica)
                hw = min(hw, state.log_end_offset if state is not None else -1)
        hw = max(hw, self.log.log_start_offset)
        if hw > self.high_watermark:
            self.high_watermark = hw
            if self.stages.sink is not None:
                self.appended.committed(hw, self.stages, perf_counter())
            self._complete_waiters()
            # Consumers parked on this partition may now read what just became committed.
            self._news(True)
            return True
        if self.high_watermark > self.log.log_end_offset:
            self.high_watermark = self.log.log_end_offset
        return False

    def records_read(self, fetch_offset: int, replica_id: int) -> None:
        """A fetch response carries records from ``fetch_offset``: time them since their
        append, for a follower (``replica_id`` >= 0) or a consumer."""
        if self.stages.sink is None:
            return
        at = perf_counter()
        appended = self.appended.time_of(fetch_offset)
        if replica_id >= 0:
            state = self.remote.get(replica_id)
            if state is not None:
                state.records_sent_at = at
            if appended is not None:
                self.stages.observe("follower_fetch", at - appended)
        elif appended is not None:
            self.stages.observe("consumer_fetch", at - appended)

    def update_follower_high_watermark(self, leader_hw: int) -> None:
        """A follower's high watermark: the leader's, bounded by what it has itself."""
        hw = max(min(leader_hw, self.log.log_end_offset), self.log.log_start_offset)
        if hw != self.high_watermark:
            self.high_watermark = hw
            # Consumers reading here (KIP-392) may read more: the high watermark, and with it
            # the last stable offset, moved.
            self._news(True)

    def fetch_upper_bound(self, isolation_level: int, for_replica: bool) -> int:
        """Consumers read below the high watermark (read_committed ones below the last
        stable offset); followers read to the log end."""
        if for_replica:
            return self.log.log_end_offset
        if isolation_level == READ_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark

    def after_log_truncated(self) -> None:
        self.appended.clear()
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self.high_watermark = max(self.high_watermark, self.log.log_start_offset)
