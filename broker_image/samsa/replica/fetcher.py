"""ReplicaFetcherManager and ReplicaFetcher: followers pulling from their leaders.

One fetcher (an asyncio task) per leader broker fetches every partition this broker follows
there.  A partition starts by truncating: the follower asks the leader (OffsetForLeaderEpoch)
where its latest epoch ends and cuts off any tail the leader does not have (KIP-101/279,
``truncation``), then fetches from its log end offset with Fetch requests carrying its
replica id, appending what comes back with the leader's offsets and taking the leader's high
watermark.  Errors back off ``replica.fetch.backoff.ms``; a fenced or stale epoch waits for
the controller's next LeaderAndIsr, which re-adds the partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from samsa.client import ConnectionPool
from samsa.log import OffsetOutOfRangeError
from samsa.log.errors import out_of_space
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import build, request_type
from samsa.protocol.record_batch import CorruptRecordError
from samsa.protocol.replica_fetch import VERSION as REPLICA_FETCH_VERSION
from samsa.protocol.replica_fetch import PartitionFetch, encode_replica_fetch
from samsa.replica.fetch_session import FetchSessionHandler
from samsa.replica.partition import Partition
from samsa.replica.truncation import UNDEFINED_EPOCH, offset_truncation_state

log = logging.getLogger(__name__)

FETCH = 1
FETCH_VERSION = REPLICA_FETCH_VERSION
# The leader lost or moved past the session: the next fetch opens a new one, at once.
_SESSION_ERRORS = (ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch)
OFFSET_FOR_LEADER_EPOCH = 23
OFFSET_FOR_LEADER_EPOCH_VERSION = 4


@dataclass
class FetcherConfig:
    broker_id: int
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 * 1024 * 1024
    partition_max_bytes: int = 1024 * 1024
    backoff_ms: int = 1000
    request_timeout_ms: int = 30_000


@dataclass
class FetchState:
    partition: Partition
    truncating: bool = True
    # Monotonic time before which this partition is not fetched (after an error).
    delayed_until: float = 0.0
    # What the next fetch asks of the partition, kept while the log does not change (None:
    # build it again): most partitions of a fetch are idle, and the follower's side of a
    # round trip cost a rebuild of each.
    fetch: PartitionFetch | None = None


class Throttle:
    """A token bucket over bytes/s for replicas being added by a reassignment; 0: off."""

    def __init__(self, rate: Callable[[], int]) -> None:
        self._rate = rate
        self._tokens = 0.0
        self._last = time.monotonic()

    def allowance(self, wanted: int) -> int:
        rate = self._rate()
        if rate <= 0:
            return wanted
        now = time.monotonic()
        self._tokens = min(float(rate), self._tokens + (now - self._last) * rate)
        self._last = now
        return max(int(self._tokens), 0)

    def spend(self, n: int) -> None:
        if self._rate() > 0:
            self._tokens -= n


class ReplicaFetcher:
    """Fetches the partitions this broker follows on one leader."""

    def __init__(
        self,
        leader_id: int,
        config: FetcherConfig,
        pool: ConnectionPool,
        on_appended: Callable[[Partition, int, int], None],
        throttle: Throttle,
        throttled: Callable[[Partition], bool],
    ) -> None:
        self.leader_id = leader_id
        self.config = config
        self.pool = pool
        self.on_appended = on_appended
        self.throttle = throttle
        self.throttled = throttled
        self.states: dict[TopicPartition, FetchState] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.session: FetchSessionHandler[PartitionFetch] = FetchSessionHandler()

    def add(self, partition: Partition) -> None:
        self.states[partition.tp] = FetchState(partition)
        self._wakeup.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"replica-fetcher-{self.leader_id}"
            )

    def log_starts_moved(self) -> None:
        """Retention may have moved log start offsets, which each fetch tells the leader."""
        for s in self.states.values():
            s.fetch = None

    def remove(self, tp: TopicPartition) -> None:
        self.states.pop(tp, None)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _run(self) -> None:
        backoff = self.config.backoff_ms / 1000
        while self.states:
            try:
                truncating = [s for s in self.states.values() if s.truncating]
                for s in truncating:
                    s.fetch = None
                if truncating:
                    await self._truncate(truncating)
                now = time.monotonic()
                ready = [
                    s for s in self.states.values() if not s.truncating and s.delayed_until <= now
                ]
                if not ready:
                    self._wakeup.clear()
                    pause = min(
                        (s.delayed_until for s in self.states.values() if not s.truncating),
                        default=now + backoff,
                    )
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(max(pause - now, 0.01)):
                            await self._wakeup.wait()
                    continue
                await self._fetch(ready)
            except asyncio.CancelledError:
                raise
            except (OSError, ConnectionError, TimeoutError) as exc:
                log.info("fetching from broker %d failed: %s", self.leader_id, exc)
                self.pool.drop(self.leader_id)
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("replica fetcher for broker %d failed", self.leader_id)
                await asyncio.sleep(backoff)

    # ------------------------------------------------------------------ truncation

    async def _truncate(self, states: list[FetchState]) -> None:
        asks: dict[TopicPartition, tuple[FetchState, int]] = {}
        for s in states:
            plog = s.partition.log
            epoch = plog.latest_epoch
            if epoch is None:
                # No epochs known: keep what is below our high watermark (KIP-101's fallback).
                self._truncate_to(s.partition, s.partition.high_watermark)
                s.truncating = False
                continue
            asks[s.partition.tp] = (s, epoch)
        if not asks:
            return
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, (s, epoch) in asks.items():
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": s.partition.leader_epoch,
                    "leader_epoch": epoch,
                }
            )
        request = build(
            request_type(OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION),
            {
                "replica_id": self.config.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        response = await self.pool.request(
            self.leader_id,
            OFFSET_FOR_LEADER_EPOCH,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            request,
            self.config.request_timeout_ms / 1000,
        )
        for topic in response.topics:
            for p in topic.partitions:
                entry = asks.get(TopicPartition(topic.topic, p.partition))
                if entry is None or self.states.get(entry[0].partition.tp) is not entry[0]:
                    continue
                state = entry[0]
                if p.error_code != ErrorCode.none:
                    self._on_partition_error(state, p.error_code)
                    continue
                partition = state.partition
                plog = partition.log
                found = offset_truncation_state(
                    p.leader_epoch,
                    p.end_offset,
                    plog.log_end_offset,
                    partition.high_watermark,
                    functools.partial(_own_end_offset, plog),
                )
                self._truncate_to(partition, found.offset)
                state.truncating = not found.completed

    def _truncate_to(self, partition: Partition, offset: int) -> None:
        plog = partition.log
        if offset < plog.log_end_offset:
            log.info(
                "truncating %s from %d to %d (leader %d, epoch %d)",
                partition.tp,
                plog.log_end_offset,
                offset,
                self.leader_id,
                partition.leader_epoch,
            )
            plog.truncate_to(max(offset, 0))
            partition.after_log_truncated()

    # ------------------------------------------------------------------ fetch

    async def _fetch(self, states: list[FetchState]) -> None:
        wanted: list[tuple[TopicPartition, PartitionFetch]] = []
        for s in states:
            partition = s.partition
            kept = s.fetch
            if kept is not None and not partition.adding:
                wanted.append((partition.tp, kept))
                continue
            plog = partition.log
            max_bytes = self.config.partition_max_bytes
            if self.throttled(partition):
                max_bytes = min(max_bytes, self.throttle.allowance(max_bytes))
                if max_bytes <= 0:
                    s.delayed_until = time.monotonic() + 0.1
                    continue
            epoch = plog.latest_epoch
            s.fetch = (
                partition.tp.partition,
                partition.leader_epoch,
                plog.log_end_offset,
                epoch if epoch is not None else UNDEFINED_EPOCH,
                plog.log_start_offset,
                max_bytes,
            )
            wanted.append((partition.tp, s.fetch))
        if not wanted:
            await asyncio.sleep(0.05)
            return
        plan = self.session.plan(wanted)
        topics: dict[str, list[PartitionFetch]] = {}
        for tp, fetch in plan.send:
            topics.setdefault(tp.topic, []).append(fetch)
        forgotten: dict[str, list[int]] = {}
        for tp in plan.forgotten:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        config = self.config
        request = encode_replica_fetch(
            config.broker_id,
            config.max_wait_ms,
            config.min_bytes,
            config.max_bytes,
            topics.items(),
            plan.session_id,
            plan.epoch,
            forgotten.items(),
        )
        try:
            response = await self.pool.request(
                self.leader_id,
                FETCH,
                FETCH_VERSION,
                request,
                (self.config.max_wait_ms + self.config.request_timeout_ms) / 1000,
            )
        except BaseException:
            # The leader may or may not have taken the request: begin a new session.
            self.session.failed()
            raise
        received = time.perf_counter()
        if response.error_code in _SESSION_ERRORS:
            log.info(
                "fetch session %d with broker %d: %s; fetching in full",
                plan.session_id,
                self.leader_id,
                response.error_code.name,
            )
            self.session.failed()
            return
        if response.error_code != ErrorCode.none:
            self.session.failed()
            raise ConnectionError(f"fetch refused: {response.error_code.name}")
        self.session.answered(response.session_id)
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition_index)
                state = self.states.get(tp)
                if state is None:
                    # No longer fetched here (moved to another leader, or stopped) though the
                    # leader's session still holds it: forgotten in the next request.
                    self.session.resend(tp)
                    continue
                if state.truncating:
                    continue
                if p.error_code != ErrorCode.none:
                    # The leader may have kept it out of the session (a topic it did not
                    # know yet) or kept it in: named again in full when next fetched, and
                    # forgotten while it backs off.
                    self.session.resend(tp)
                    self._on_partition_error(state, p.error_code, p)
                    continue
                self._append(state, p, received)

    def _append(self, state: FetchState, p: Any, received: float) -> None:
        state.fetch = None  # its log end or start may move
        partition = state.partition
        plog = partition.log
        records = p.records
        if records:
            try:
                info = plog.append_as_follower(records)
            except CorruptRecordError as exc:
                log.warning(
                    "corrupt data from leader %d for %s: %s", self.leader_id, partition.tp, exc
                )
                state.delayed_until = time.monotonic() + self.config.backoff_ms / 1000
                return
            except Exception as exc:
                if isinstance(exc, OSError) and out_of_space(exc):
                    # A full disk: nothing is wrong with the log, so no truncation; try again
                    # after the backoff, as Kafka's fetcher backs off a failed partition.
                    log.warning(
                        "cannot append %s from leader %d: %s; trying again in %d ms",
                        partition.tp,
                        self.leader_id,
                        exc,
                        self.config.backoff_ms,
                    )
                    state.delayed_until = time.monotonic() + self.config.backoff_ms / 1000
                    return
                # Offsets out of order: start again from truncation.
                log.warning(
                    "cannot append %s from leader %d: %s", partition.tp, self.leader_id, exc
                )
                state.truncating = True
                return
            if info.num_messages or info.valid_bytes:
                if self.throttled(partition):
                    self.throttle.spend(info.valid_bytes)
                self.on_appended(partition, info.num_messages, info.valid_bytes)
                partition.stages.since("follower_append", received)
        if p.log_start_offset > plog.log_start_offset:
            with contextlib.suppress(OffsetOutOfRangeError):
                plog.maybe_increment_log_start_offset(min(p.log_start_offset, plog.log_end_offset))
        partition.update_follower_high_watermark(p.high_watermark)

    def _on_partition_error(self, state: FetchState, error: ErrorCode, p: Any = None) -> None:
        state.fetch = None
        partition = state.partition
        backoff = self.config.backoff_ms / 1000
        if error == ErrorCode.offset_out_of_range and p is not None:
            plog = partition.log
            leader_start = p.log_start_offset
            if leader_start >= 0 and plog.log_end_offset < leader_start:
                # Retention on the leader moved past everything we have: start over there.
                log.info(
                    "%s: starting again at the leader's log start %d", partition.tp, leader_start
                )
                plog.truncate_fully_and_start_at(leader_start)
                partition.after_log_truncated()
                return
            state.truncating = True
            return
        if error in (
            ErrorCode.fenced_leader_epoch,
            ErrorCode.unknown_leader_epoch,
            ErrorCode.not_leader_or_follower,
            ErrorCode.unknown_topic_or_partition,
        ):
            # Our view is behind or ahead of the leader's: wait for the controller to tell us.
            state.delayed_until = time.monotonic() + backoff
            return
        log.info("%s: fetch from broker %d failed: %s", partition.tp, self.leader_id, error.name)
        state.delayed_until = time.monotonic() + backoff


def _own_end_offset(plog: Any, epoch: int) -> tuple[int, int] | None:
    if plog.latest_epoch is None:
        return None
    found: tuple[int, int] = plog.end_offset_for_epoch(epoch)
    return found


class ReplicaFetcherManager:
    """Which leader each followed partition is fetched from, one fetcher per leader."""

    def __init__(
        self,
        config: FetcherConfig,
        pool: ConnectionPool,
        on_appended: Callable[[Partition, int, int], None],
        throttle_rate: Callable[[], int] = lambda: 0,
    ) -> None:
        self.config = config
        self.pool = pool
        self.on_appended = on_appended
        self.throttle = Throttle(throttle_rate)
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._leader_of: dict[TopicPartition, int] = {}

    def throttled(self, partition: Partition) -> bool:
        return partition.broker_id in partition.adding

    def add(self, partitions: list[Partition]) -> None:
        for partition in partitions:
            self.remove([partition.tp])
            leader = partition.leader_id
            fetcher = self.fetchers.get(leader)
            if fetcher is None:
                fetcher = ReplicaFetcher(
                    leader, self.config, self.pool, self.on_appended, self.throttle, self.throttled
                )
                self.fetchers[leader] = fetcher
            fetcher.add(partition)
            self._leader_of[partition.tp] = leader

    def remove(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            leader = self._leader_of.pop(tp, None)
            if leader is not None and leader in self.fetchers:
                self.fetchers[leader].remove(tp)

    def log_starts_moved(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.log_starts_moved()

    def following(self, tp: TopicPartition) -> int | None:
        return self._leader_of.get(tp)

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._leader_of.clear()
        for fetcher in fetchers:
            await fetcher.stop()
