"""The group coordinator's API (Kafka's GroupCoordinator): one coroutine per Kafka request.

JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups,
ListGroups, DeleteGroups and OffsetDelete, with Kafka 3.x's semantics and error codes, plus
becoming and ceasing to be the coordinator of a __consumer_offsets partition and the periodic
expiry of offsets. A thin API handler awaits these: JoinGroup returns when the rebalance
completes, SyncGroup when the leader's assignment is stored, OffsetCommit when the commit is
durable. Group state only changes synchronously on the event loop, so there are no locks; only
store writes await.

This module finds the group and checks that this broker coordinates it; the classic rebalance
protocol itself is ``join_group``, ``static_membership``, ``sync_group``, ``leave_group``,
``heartbeats`` and ``rebalance``, and the groups' storage is ``group_metadata_manager``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from samsa.coordinator.config import GroupCoordinatorConfig
from samsa.coordinator.group import GroupMetadata, GroupState
from samsa.coordinator.group_metadata_manager import GroupMetadataManager, ReplayRecords
from samsa.coordinator.group_store import GroupStore
from samsa.coordinator.join_group import handle_join
from samsa.coordinator.leave_group import handle_leave
from samsa.coordinator.offsets import OffsetAndMetadata
from samsa.coordinator.rebalance import Rebalancer
from samsa.coordinator.results import (
    UNKNOWN_MEMBER_ID,
    GroupSummary,
    JoinRequest,
    JoinResult,
    LeaveMemberResult,
    LeaveResult,
    ListGroupsResult,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetDeleteResult,
    OffsetFetchResult,
    SyncResult,
)
from samsa.coordinator.sync_group import handle_sync
from samsa.coordinator.timers import AsyncioClock, Clock, TimerHandle
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

T = TypeVar("T")

_S = GroupState


class GroupCoordinator:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        store: GroupStore,
        *,
        clock: Clock | None = None,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> None:
        """``partition_exists(topic, partition)`` says whether a commit's partition exists
        (UNKNOWN_TOPIC_OR_PARTITION otherwise)."""
        self.config = config
        self.clock: Clock = clock or AsyncioClock()
        self.manager = GroupMetadataManager(config, store, self.clock.now_ms)
        self.rebalancer = Rebalancer(config, self.manager, self.clock, self._spawn)
        self._partition_exists = partition_exists or (lambda _topic, _partition: True)
        self._active = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._cleanup_timer: TimerHandle | None = None

    # ================================================================== lifecycle

    def start(self, enable_offset_expiration: bool = True) -> None:
        """Answer requests; expire offsets every offsets.retention.check.interval.ms."""
        self._active = True
        if enable_offset_expiration:
            self._schedule_cleanup()

    async def shutdown(self) -> None:
        """Answer every parked JoinGroup and SyncGroup with NOT_COORDINATOR (clients go and
        find the new coordinator), drop all groups and timers, and wait for writes in flight."""
        self._active = False
        if self._cleanup_timer is not None:
            self._cleanup_timer.cancel()
            self._cleanup_timer = None
        owned = self.manager.owned_partitions | set(self.manager.loading_partitions)
        for partition in sorted(owned):
            self.unload_partition(partition)
        await self.wait_idle()

    async def wait_idle(self) -> None:
        """Wait for the background writes (group metadata, commits, tombstones) started so far."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    @property
    def is_active(self) -> bool:
        return self._active

    def partition_for(self, group_id: str) -> int:
        """The __consumer_offsets partition of a group, exactly as Kafka computes it."""
        return self.manager.partition_for(group_id)

    @property
    def owned_partitions(self) -> frozenset[int]:
        return frozenset(self.manager.owned_partitions)

    async def load_partition(self, partition: int, records: ReplayRecords) -> None:
        """Become the coordinator of a __consumer_offsets partition (this broker now leads it):
        replay its (key, value) records, then serve its groups. Meanwhile their requests get
        COORDINATOR_LOAD_IN_PROGRESS. A replay error propagates and leaves it unowned."""
        loaded = await self.manager.load_partition(partition, records)
        for group in loaded or ():
            self.rebalancer.on_group_loaded(group)
        log.info("loaded __consumer_offsets-%d: %d groups", partition, len(loaded or ()))

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating a partition's groups (this broker became a follower)."""
        n = self.manager.unload_partition(partition, self.rebalancer.on_group_unloaded)
        log.info("unloaded __consumer_offsets-%d: %d groups", partition, n)

    # ================================================================== membership

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        group_instance_id: str | None = None,
        require_known_member_id: bool = True,
        supports_skip_assignment: bool = True,
        reason: str | None = None,
    ) -> JoinResult:
        """JoinGroup; see ``JoinRequest`` for how the flags follow the request version."""
        req = JoinRequest(
            group_id=group_id,
            member_id=member_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            protocols=tuple((name, bytes(metadata)) for name, metadata in protocols),
            group_instance_id=group_instance_id,
            require_known_member_id=require_known_member_id,
            supports_skip_assignment=supports_skip_assignment,
            reason=reason or "not provided",
        )
        error = self._validate_group_status(group_id)
        if error is not None:
            return JoinResult.failed(member_id, error)
        future, respond = _waiter(JoinResult)
        handle_join(self.rebalancer, req, respond)
        return await future

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: Mapping[str, bytes] | None = None,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncResult:
        """SyncGroup: the leader passes every member's assignment, the others none."""
        error = self._validate_group_status(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            # The rebalance was lost with the old coordinator: make the member rejoin (older
            # clients do not expect COORDINATOR_LOAD_IN_PROGRESS here).
            return SyncResult(ErrorCode.rebalance_in_progress)
        if error is not None:
            return SyncResult(error)
        group = self.manager.get_group(group_id)
        if group is None:
            return SyncResult(ErrorCode.unknown_member_id)
        future, respond = _waiter(SyncResult)
        handle_sync(
            self.rebalancer,
            group,
            generation_id,
            member_id,
            protocol_type,
            protocol_name,
            group_instance_id,
            dict(assignments or {}),
            respond,
        )
        return await future

    async def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        error = self._validate_group_status(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            return ErrorCode.none  # the group is still loading: answer blindly, as Kafka does
        if error is not None:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        return self.rebalancer.heartbeats.handle_heartbeat(
            group, generation_id, member_id, group_instance_id
        )

    async def leave_group(self, group_id: str, members: Sequence[MemberIdentity]) -> LeaveResult:
        """LeaveGroup in its v3+ batch form (v0-v2: one MemberIdentity, the top-level error
        being that member's)."""
        error = self._validate_group_status(group_id)
        if error is not None:
            return LeaveResult(error)
        group = self.manager.get_group(group_id)
        if group is None:
            unknown = ErrorCode.unknown_member_id
            return LeaveResult(
                ErrorCode.none,
                tuple(
                    LeaveMemberResult(m.member_id, m.group_instance_id, unknown) for m in members
                ),
            )
        return handle_leave(self.rebalancer, group, members)

    # ================================================================== OffsetCommit

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: Sequence[OffsetCommitPartition],
        group_instance_id: str | None = None,
        retention_time_ms: int = -1,
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit, one error per partition. Generation -1 with an empty member id is a
        commit from outside group management (a standalone consumer, admin tools), accepted
        only while the group is empty or does not exist. ``retention_time_ms`` is the field
        of OffsetCommit v2-v4 (-1: the broker's offsets.retention.minutes)."""
        now = self.clock.now_ms()
        results: dict[TopicPartition, ErrorCode] = {}
        known: dict[TopicPartition, OffsetAndMetadata] = {}
        for p in offsets:
            tp = TopicPartition(p.topic, p.partition)
            if not self._partition_exists(p.topic, p.partition):
                results[tp] = ErrorCode.unknown_topic_or_partition
                continue
            known[tp] = OffsetAndMetadata(
                offset=p.offset,
                leader_epoch=None if p.leader_epoch == -1 else p.leader_epoch,
                metadata=p.metadata or "",
                commit_timestamp_ms=now if p.commit_timestamp_ms == -1 else p.commit_timestamp_ms,
                expire_timestamp_ms=None if retention_time_ms == -1 else now + retention_time_ms,
            )
        if known:
            results.update(
                await self._commit_known(
                    group_id, member_id, group_instance_id, generation_id, known
                )
            )
        return {tp: results[tp] for tp in (TopicPartition(p.topic, p.partition) for p in offsets)}

    async def _commit_known(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        error = self._validate_group_status(group_id, allow_empty_group_id=True)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # From a generation of a group that is gone: reject.
                return dict.fromkeys(offsets, ErrorCode.illegal_generation)
            group = self.manager.add_group(GroupMetadata(group_id, self.clock.now_ms))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        if group.is_(_S.COMPLETING_REBALANCE):
            # The member has its new generation from JoinGroup but no assignment yet.
            return dict.fromkeys(offsets, ErrorCode.rebalance_in_progress)
        if group.state in (_S.STABLE, _S.PREPARING_REBALANCE):
            # Still allowed while preparing: the heartbeat is what tells members to rejoin.
            self.rebalancer.heartbeats.complete_and_schedule_next_heartbeat(
                group, group.get(member_id)
            )
        # Shielded: a client that disconnects must not leave the commit half applied.
        task = self._spawn(self.manager.store_offsets(group, offsets))
        return await asyncio.shield(task)

    def _validate_offset_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> ErrorCode | None:
        if group.is_(_S.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and group.is_(_S.EMPTY):
            return None
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = group.validate_current_member(member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.illegal_generation
            return error
        if not group.is_(_S.EMPTY):
            return ErrorCode.unknown_member_id  # once a group has members, only they commit
        return None

    # ================================================================== TxnOffsetCommit

    async def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: Sequence[OffsetCommitPartition],
        member_id: str = UNKNOWN_MEMBER_ID,
        generation_id: int = -1,
        group_instance_id: str | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit (KIP-98; KIP-447's member and generation from v3): offsets written
        in the producer's transaction, visible once its commit marker reaches the group's
        partition (``on_txn_marker``). Unlike OffsetCommit, a producer that is not a member
        may commit for a group with members (older clients send no member id)."""
        now = self.clock.now_ms()
        results: dict[TopicPartition, ErrorCode] = {}
        known: dict[TopicPartition, OffsetAndMetadata] = {}
        for p in offsets:
            tp = TopicPartition(p.topic, p.partition)
            if not self._partition_exists(p.topic, p.partition):
                results[tp] = ErrorCode.unknown_topic_or_partition
                continue
            known[tp] = OffsetAndMetadata(
                offset=p.offset,
                leader_epoch=None if p.leader_epoch == -1 else p.leader_epoch,
                metadata=p.metadata or "",
                commit_timestamp_ms=now,
            )
        if known:
            error = self._validate_group_status(group_id)
            group = None
            if error is None:
                group = self.manager.get_group(group_id) or self.manager.add_group(
                    GroupMetadata(group_id, self.clock.now_ms)
                )
                if group.is_(_S.DEAD):
                    error = ErrorCode.coordinator_not_available
                elif (
                    generation_id >= 0
                    or member_id != UNKNOWN_MEMBER_ID
                    or group_instance_id is not None
                ):
                    error = group.validate_current_member(member_id, group_instance_id)
                    if error is None and generation_id != group.generation_id:
                        error = ErrorCode.illegal_generation
            if error is not None or group is None:
                results.update(dict.fromkeys(known, error or ErrorCode.unknown_server_error))
            else:
                task = self._spawn(
                    self.manager.store_txn_offsets(group, producer_id, producer_epoch, known)
                )
                results.update(await asyncio.shield(task))
        return {tp: results[tp] for tp in (TopicPartition(p.topic, p.partition) for p in offsets)}

    def on_txn_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        """A transaction marker reached __consumer_offsets-``partition``: the producer's
        pending transactional offsets there are applied (commit) or dropped (abort)."""
        if partition in self.manager.owned_partitions:
            self.manager.complete_txn(partition, producer_id, committed)

    # ================================================================== OffsetFetch

    async def fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None = None,
        require_stable: bool = False,
    ) -> OffsetFetchResult:
        """OffsetFetch of one group (v8's multi-group form is a loop); ``partitions=None``
        is every committed partition. Offsets come back whatever the group's state: groups
        may use Kafka only to store them."""
        error = self._validate_group_status(group_id, allow_empty_group_id=True)
        if error is not None:
            return OffsetFetchResult(error)
        found = self.manager.get_offsets(group_id, require_stable, partitions)
        return OffsetFetchResult(ErrorCode.none, tuple(found))

    # ================================================================== admin

    async def describe_group(self, group_id: str, api_version: int = 0) -> GroupSummary:
        """One DescribeGroups entry. An unknown group is reported Dead, with
        GROUP_ID_NOT_FOUND from v6 on."""
        error = self._validate_group_status(group_id, allow_empty_group_id=True)
        if error is not None:
            return GroupSummary(group_id, error, "")
        group = self.manager.get_group(group_id)
        if group is not None:
            return group.summary()
        if api_version >= 6:
            return GroupSummary(
                group_id,
                ErrorCode.group_id_not_found,
                str(_S.DEAD),
                error_message=f"Group {group_id} not found.",
            )
        return GroupSummary(group_id, ErrorCode.none, str(_S.DEAD))

    async def describe_groups(
        self, group_ids: Iterable[str], api_version: int = 0
    ) -> list[GroupSummary]:
        return [await self.describe_group(g, api_version) for g in group_ids]

    async def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> ListGroupsResult:
        """ListGroups; empty filters match all, states are case-insensitive. Every group here
        is a classic group."""
        if not self._active:
            return ListGroupsResult(ErrorCode.coordinator_not_available)
        loading = self.manager.is_loading()
        error = ErrorCode.coordinator_load_in_progress if loading else ErrorCode.none
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and "classic" not in wanted_types:
            return ListGroupsResult(error)
        return ListGroupsResult(
            error,
            tuple(
                g.overview()
                for g in self.manager.current_groups()
                if not wanted_states or str(g.state).lower() in wanted_states
            ),
        )

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """DeleteGroups: only empty groups (NON_EMPTY_GROUP otherwise), offsets included."""
        errors: dict[str, ErrorCode] = {}
        eligible: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self._validate_group_status(group_id, allow_empty_group_id=True)
            group = self.manager.get_group(group_id)
            if error is not None:
                errors[group_id] = error
            elif group is None or group.is_(_S.DEAD):
                errors[group_id] = self._not_found(group_id)
            elif group.is_(_S.EMPTY):
                group.transition_to(_S.DEAD)
                eligible.append(group)
            else:
                errors[group_id] = ErrorCode.non_empty_group
        if eligible:
            removed = await self.manager.cleanup_group_metadata(
                eligible, lambda g: g.remove_all_offsets()
            )
            for group in eligible:
                self.rebalancer.cancel_group_timers(group)
                errors[group.group_id] = ErrorCode.none
            log.info("deleted groups %s (%d offsets)", [g.group_id for g in eligible], removed)
        return errors

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> OffsetDeleteResult:
        """OffsetDelete: any partition of an empty group; of a consumer group with members,
        only topics it does not subscribe to (GROUP_SUBSCRIBED_TO_TOPIC otherwise)."""
        error = self._validate_group_status(group_id)
        if error is not None:
            return OffsetDeleteResult(error)
        group = self.manager.get_group(group_id)
        if group is None or group.is_(_S.DEAD):
            return OffsetDeleteResult(self._not_found(group_id))
        tps = [TopicPartition(*tp) for tp in partitions]
        results: dict[TopicPartition, ErrorCode] = {}
        if group.is_(_S.EMPTY):
            eligible = tps
        elif group.is_consumer_group:
            eligible = []
            for tp in tps:
                if group.is_subscribed_to_topic(tp.topic):
                    results[tp] = ErrorCode.group_subscribed_to_topic
                else:
                    eligible.append(tp)
        else:
            return OffsetDeleteResult(ErrorCode.non_empty_group)
        if eligible:
            await self.manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
            for tp in eligible:
                results[tp] = ErrorCode.none
        return OffsetDeleteResult(ErrorCode.none, {tp: results[tp] for tp in tps})

    def _not_found(self, group_id: str) -> ErrorCode:
        if self.manager.group_not_exists(group_id):
            return ErrorCode.group_id_not_found
        return ErrorCode.not_coordinator

    # ================================================================== expiry

    async def cleanup(self, now_ms: int | None = None) -> int:
        """Expire offsets (offsets.retention.minutes; KIP-211 for empty groups) and drop empty
        groups left with no offsets, writing tombstones. Returns how many offsets went."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        groups = [
            g for g in self.manager.current_groups() if self.manager.is_group_local(g.group_id)
        ]
        removed = await self.manager.cleanup_group_metadata(
            groups, lambda g: g.remove_expired_offsets(now, retention)
        )
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    async def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> int:
        """Topics or partitions were deleted: drop every group's offsets for them (Kafka's
        handleDeletedPartitions). Returns how many offsets went."""
        tps = [TopicPartition(*tp) for tp in partitions]
        groups = [
            g for g in self.manager.current_groups() if self.manager.is_group_local(g.group_id)
        ]
        return await self.manager.cleanup_group_metadata(groups, lambda g: g.remove_offsets(tps))

    def _schedule_cleanup(self) -> None:
        def run() -> None:
            if self._active:
                self._spawn(self.cleanup())
                self._schedule_cleanup()

        self._cleanup_timer = self.clock.call_later(
            self.config.offsets_retention_check_interval_ms, run
        )

    # ================================================================== helpers

    def _validate_group_status(
        self, group_id: str | None, allow_empty_group_id: bool = False
    ) -> ErrorCode | None:
        """Kafka's validateGroupStatus. OffsetCommit, OffsetFetch, DescribeGroups and
        DeleteGroups accept the empty group id, for old clients; the rest do not."""
        if group_id is None or (group_id == "" and not allow_empty_group_id):
            return ErrorCode.invalid_group_id
        if not self._active:
            return ErrorCode.coordinator_not_available
        if self.manager.is_group_loading(group_id):
            return ErrorCode.coordinator_load_in_progress
        if not self.manager.is_group_local(group_id):
            return ErrorCode.not_coordinator
        return None

    def _spawn(self, coro: Awaitable[T]) -> asyncio.Task[T]:
        task: asyncio.Task[T] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("group coordinator background task failed", exc_info=task.exception())


def _waiter(result_type: type[T]) -> tuple[asyncio.Future[T], Callable[[T], None]]:
    """A future for a parked request and the callback that answers it, at most once: a client
    that went away leaves a cancelled future behind."""
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def respond(result: T) -> None:
        if not future.done():
            future.set_result(result)

    return future, respond
