"""Groups and offsets of the __consumer_offsets partitions this broker leads (Kafka's
GroupMetadataManager): the group cache, which partitions are owned or loading, replaying a
partition into groups, and writing group metadata, offsets and tombstones through the
``GroupStore``. The records themselves are built and read by ``group_records``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from samsa.coordinator.config import GroupCoordinatorConfig
from samsa.coordinator.group import GroupMetadata, GroupState
from samsa.coordinator.group_records import (
    GroupMetadataRecord,
    GroupMetadataValue,
    OffsetCommitRecord,
    RecordFormatError,
    group_from_value,
    group_metadata_record,
    group_metadata_tombstone,
    offset_commit_record,
    offset_commit_tombstone,
    read_record,
    read_txn_offset_commit,
)
from samsa.coordinator.group_store import (
    GroupStore,
    Record,
    TxnMarker,
    TxnRecord,
    group_store_error,
    offset_commit_error,
    storage_error_code,
)
from samsa.coordinator.offsets import CommitRecordMetadataAndOffset, OffsetAndMetadata
from samsa.coordinator.offsets_topic import partition_for, utf16_length
from samsa.coordinator.results import OffsetFetchPartition
from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

T = TypeVar("T")

# Replaying a large partition must not starve the event loop.
_LOAD_YIELD_EVERY = 1000

# (key, value) records, and with transactional offset commits TxnRecord and TxnMarker items.
ReplayRecords = Iterable[Any] | AsyncIterable[Any]


async def _done(value: T) -> T:
    return value


class GroupMetadataManager:
    def __init__(
        self,
        config: GroupCoordinatorConfig,
        store: GroupStore,
        now_ms: Callable[[], int],
    ) -> None:
        self.config = config
        self.store = store
        self.now_ms = now_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        # partition -> token of the load in progress; an unload replaces or drops the token,
        # which tells a running load that its result is stale.
        self.loading_partitions: dict[int, object] = {}
        self._append_order = itertools.count()
        self._pending_txn_replay: dict[
            int, dict[int, dict[tuple[str, TopicPartition], CommitRecordMetadataAndOffset]]
        ] = {}

    # ------------------------------------------------------------------ ownership

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def is_group_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    def group_not_exists(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return self.is_group_local(group_id) and (group is None or group.is_(GroupState.DEAD))

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def get_or_maybe_create_group(self, group_id: str, create: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.add_group(GroupMetadata(group_id, self.now_ms))
        return group

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def current_groups(self) -> list[GroupMetadata]:
        return list(self.groups.values())

    # ------------------------------------------------------------------ writes

    def store_group(
        self, group: GroupMetadata, assignment: Mapping[str, bytes]
    ) -> Coroutine[Any, Any, ErrorCode]:
        """Persist the group's membership and assignment; the error Kafka's storeGroup gives.

        The record is built at the call, from the group as it is then; the returned coroutine
        only writes it.
        """
        partition = self.partition_for(group.group_id)
        if partition not in self.owned_partitions:
            return _done(ErrorCode.not_coordinator)
        return self._append_group(group, partition, group_metadata_record(group, assignment))

    async def _append_group(
        self, group: GroupMetadata, partition: int, record: Record
    ) -> ErrorCode:
        try:
            await self.store.append(partition, [record])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            code = storage_error_code(exc)
            log.warning(
                "storing metadata of group %s generation %d failed: %s (%r)",
                group.group_id,
                group.generation_id,
                code.name,
                exc,
            )
            return group_store_error(code)
        return ErrorCode.none

    def _metadata_fits(self, offset: OffsetAndMetadata) -> bool:
        # Kafka compares Java's String.length() with offset.metadata.max.bytes; the record
        # format also caps a string at 32767 encoded bytes, whatever the setting.
        return (
            utf16_length(offset.metadata) <= self.config.offset_metadata_max_bytes
            and len(offset.metadata.encode("utf-8")) <= 0x7FFF
        )

    def store_offsets(
        self, group: GroupMetadata, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Coroutine[Any, Any, dict[TopicPartition, ErrorCode]]:
        """Write commits; only once they are durable do they become visible to OffsetFetch.

        Validation and marking the commits pending happen at the call (as under Kafka's group
        lock); the returned coroutine writes and then applies them.
        """
        valid = {tp: o for tp, o in offsets.items() if self._metadata_fits(o)}
        if not valid:
            return _done(dict.fromkeys(offsets, ErrorCode.offset_metadata_too_large))
        partition = self.partition_for(group.group_id)
        if partition not in self.owned_partitions:
            return _done(dict.fromkeys(offsets, ErrorCode.not_coordinator))
        records = [offset_commit_record(group.group_id, tp, o) for tp, o in valid.items()]
        order = next(self._append_order)
        group.prepare_offset_commit(valid)
        return self._append_offsets(group, partition, records, offsets, valid, order)

    async def _append_offsets(
        self,
        group: GroupMetadata,
        partition: int,
        records: list[Record],
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        valid: Mapping[TopicPartition, OffsetAndMetadata],
        order: int,
    ) -> dict[TopicPartition, ErrorCode]:
        error = ErrorCode.none
        try:
            await self.store.append(partition, records)
        except BaseException as exc:
            if not group.is_(GroupState.DEAD):
                for tp, o in valid.items():
                    group.fail_pending_offset_write(tp, o)
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
            code = storage_error_code(exc)
            log.warning("offset commit of group %s failed: %s (%r)", group.group_id, code.name, exc)
            error = offset_commit_error(code)
        else:
            if not group.is_(GroupState.DEAD):
                for tp, o in valid.items():
                    group.on_offset_commit_append(tp, CommitRecordMetadataAndOffset(order, o))
        return {
            tp: (error if tp in valid else ErrorCode.offset_metadata_too_large) for tp in offsets
        }

    def store_txn_offsets(
        self,
        group: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> Coroutine[Any, Any, dict[TopicPartition, ErrorCode]]:
        """TxnOffsetCommit: write the offsets in the producer's transaction (a transactional
        batch of its id and epoch). They stay pending until its marker reaches the partition
        (``complete_txn``): committed, they count; aborted, they are dropped."""
        valid = {tp: o for tp, o in offsets.items() if self._metadata_fits(o)}
        if not valid:
            return _done(dict.fromkeys(offsets, ErrorCode.offset_metadata_too_large))
        partition = self.partition_for(group.group_id)
        if partition not in self.owned_partitions:
            return _done(dict.fromkeys(offsets, ErrorCode.not_coordinator))
        records = [offset_commit_record(group.group_id, tp, o) for tp, o in valid.items()]
        order = next(self._append_order)
        group.prepare_txn_offset_commit(producer_id, valid)
        return self._append_txn_offsets(
            group, partition, records, offsets, valid, order, producer_id, producer_epoch
        )

    async def _append_txn_offsets(
        self,
        group: GroupMetadata,
        partition: int,
        records: list[Record],
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        valid: Mapping[TopicPartition, OffsetAndMetadata],
        order: int,
        producer_id: int,
        producer_epoch: int,
    ) -> dict[TopicPartition, ErrorCode]:
        error = ErrorCode.none
        try:
            await self.store.append(
                partition, records, producer_id=producer_id, producer_epoch=producer_epoch
            )
        except BaseException as exc:
            for tp in valid:
                group.fail_pending_txn_offset_commit(producer_id, tp)
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
            code = storage_error_code(exc)
            log.warning(
                "transactional offset commit of group %s (producer %d) failed: %s (%r)",
                group.group_id,
                producer_id,
                code.name,
                exc,
            )
            error = offset_commit_error(code)
        else:
            for tp, o in valid.items():
                group.on_txn_offset_commit_append(
                    producer_id, tp, CommitRecordMetadataAndOffset(order, o)
                )
        return {
            tp: (error if tp in valid else ErrorCode.offset_metadata_too_large) for tp in offsets
        }

    def complete_txn(self, partition: int, producer_id: int, committed: bool) -> int:
        """A producer's transaction marker reached this __consumer_offsets partition
        (Kafka's handleTxnCompletion). Returns how many groups it touched."""
        touched = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) != partition:
                continue
            if group.has_pending_offset_commits_from(producer_id):
                group.complete_pending_txn_offset_commit(producer_id, committed)
                touched += 1
        return touched

    async def cleanup_group_metadata(
        self,
        groups: Iterable[GroupMetadata],
        selector: Callable[[GroupMetadata], Mapping[TopicPartition, OffsetAndMetadata]],
    ) -> int:
        """Remove offsets chosen by ``selector``, drop groups left empty with no offsets, and
        write their tombstones. Each group's tombstones are a separate write so one failure
        cannot touch another group. As in Kafka, a lost tombstone is not an error to the
        caller: the next cleanup (or the next expiry after a reload) writes it again.
        """
        writes: list[tuple[GroupMetadata, int, list[Record], int]] = []
        for group in groups:
            removed = selector(group)
            if group.is_(GroupState.EMPTY) and not group.has_offsets():
                group.transition_to(GroupState.DEAD)
            partition = self.partition_for(group.group_id)
            if partition not in self.owned_partitions:
                continue
            tombstones = [offset_commit_tombstone(group.group_id, tp) for tp in removed]
            cached = self.groups.get(group.group_id)
            if group.is_(GroupState.DEAD) and cached is not None and cached is group:
                del self.groups[group.group_id]
                # Generation 0 groups only ever stored offsets: there is no metadata to delete.
                if group.generation_id > 0:
                    tombstones.append(group_metadata_tombstone(group.group_id))
            if tombstones:
                writes.append((group, partition, tombstones, len(removed)))
        removed_total = 0
        for group, partition, tombstones, n_offsets in writes:
            try:
                await self.store.append(partition, tombstones)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning(
                    "writing %d tombstones for group %s failed: %r",
                    len(tombstones),
                    group.group_id,
                    exc,
                )
                continue
            removed_total += n_offsets
        return removed_total

    # ------------------------------------------------------------------ reads

    def get_offsets(
        self,
        group_id: str,
        require_stable: bool,
        partitions: Sequence[TopicPartition] | None,
    ) -> list[OffsetFetchPartition]:
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return [OffsetFetchPartition(tp[0], tp[1]) for tp in partitions or ()]
        wanted = (
            [TopicPartition(*tp) for tp in partitions]
            if partitions is not None
            else list(group.offsets)
        )
        out = []
        for tp in wanted:
            if require_stable and group.has_pending_offset_commits_for(tp):
                out.append(
                    OffsetFetchPartition(
                        tp.topic, tp.partition, error=ErrorCode.unstable_offset_commit
                    )
                )
                continue
            oam = group.offset(tp)
            if oam is None:
                out.append(OffsetFetchPartition(tp.topic, tp.partition))
            else:
                out.append(
                    OffsetFetchPartition(
                        tp.topic,
                        tp.partition,
                        oam.offset,
                        -1 if oam.leader_epoch is None else oam.leader_epoch,
                        oam.metadata,
                    )
                )
        return out

    # ------------------------------------------------------------------ load / unload

    async def load_partition(
        self, partition: int, records: ReplayRecords
    ) -> list[GroupMetadata] | None:
        """Replay a partition into groups and offsets; None if it was already owned or loading,
        or was unloaded before the replay finished. On a replay error the partition is left
        neither owned nor loading and the error propagates, so the broker can retry.
        """
        if partition in self.owned_partitions or partition in self.loading_partitions:
            return None
        token = object()
        self.loading_partitions[partition] = token
        try:
            offsets, group_values = await self._replay(partition, records, token)
        except BaseException:
            if self.loading_partitions.get(partition) is token:
                del self.loading_partitions[partition]
            raise
        if self.loading_partitions.get(partition) is not token:
            return None

        pending_txn = self._pending_txn_replay.pop(partition, {})
        by_group: dict[str, dict[TopicPartition, CommitRecordMetadataAndOffset]] = {}
        for (group_id, tp), committed in offsets.items():
            by_group.setdefault(group_id, {})[tp] = committed
        txn_by_group: dict[str, dict[int, dict[TopicPartition, CommitRecordMetadataAndOffset]]]
        txn_by_group = {}
        for producer_id, txn in pending_txn.items():
            for (group_id, tp), c in txn.items():
                txn_by_group.setdefault(group_id, {}).setdefault(producer_id, {})[tp] = c
        loaded: list[GroupMetadata] = []
        for group_id, value in group_values.items():
            group = group_from_value(group_id, value, self.now_ms)
            group.initialize_offsets(by_group.pop(group_id, {}))
            if self.add_group(group) is group:
                loaded.append(group)
        # Groups that only store offsets in Kafka and have no group metadata record.
        for group_id in set(by_group) | set(txn_by_group):
            if group_id in group_values:
                continue
            group = GroupMetadata(group_id, self.now_ms)
            group.initialize_offsets(by_group.get(group_id, {}))
            if self.add_group(group) is group:
                loaded.append(group)
        # Transactions still open in the log: their offsets wait for their markers.
        for group_id, per_producer in txn_by_group.items():
            group = self.groups[group_id]
            for producer_id, tps in per_producer.items():
                group.pending_transactional_offset_commits.setdefault(producer_id, {}).update(tps)
        del self.loading_partitions[partition]
        self.owned_partitions.add(partition)
        return loaded

    async def _replay(
        self, partition: int, records: ReplayRecords, token: object
    ) -> tuple[
        dict[tuple[str, TopicPartition], CommitRecordMetadataAndOffset],
        dict[str, GroupMetadataValue],
    ]:
        offsets: dict[tuple[str, TopicPartition], CommitRecordMetadataAndOffset] = {}
        groups: dict[str, GroupMetadataValue] = {}
        # Offsets of open transactions, per producer id, until their marker.
        pending_txn = self._pending_txn_replay[partition] = {}
        count = 0

        def apply_item(item: Any) -> None:
            if isinstance(item, TxnMarker):
                txn = pending_txn.pop(item.producer_id, {})
                if item.committed:
                    for gtp, c in txn.items():
                        current = offsets.get(gtp)
                        if current is None or current.older_than(c):
                            offsets[gtp] = c
            elif isinstance(item, TxnRecord):
                try:
                    commit = read_txn_offset_commit(item.key, item.value)
                except RecordFormatError as exc:
                    log.warning(
                        "__consumer_offsets-%d: skipping an unreadable record: %s", partition, exc
                    )
                    return
                if commit is not None:
                    group_id, tp, oam = commit
                    pending_txn.setdefault(item.producer_id, {})[(group_id, tp)] = (
                        CommitRecordMetadataAndOffset(next(self._append_order), oam)
                    )
            else:
                apply(*item)

        def apply(key: bytes, value: bytes | None) -> None:
            try:
                record = read_record(key, value)
            except RecordFormatError as exc:
                log.warning(
                    "__consumer_offsets-%d: skipping an unreadable record: %s", partition, exc
                )
                return
            if isinstance(record, OffsetCommitRecord):
                gtp = (record.group, record.tp)
                if record.offset is None:
                    offsets.pop(gtp, None)
                else:
                    offsets[gtp] = CommitRecordMetadataAndOffset(
                        next(self._append_order), record.offset
                    )
            elif isinstance(record, GroupMetadataRecord):
                if record.value is None:
                    groups.pop(record.group, None)
                else:
                    groups[record.group] = record.value
            else:
                log.warning(
                    "__consumer_offsets-%d: skipping a record with unknown key version %d",
                    partition,
                    record.version,
                )

        if isinstance(records, AsyncIterable):
            async for item in records:
                apply_item(item)
                count += 1
                if self.loading_partitions.get(partition) is not token:
                    break
        else:
            for item in records:
                apply_item(item)
                count += 1
                if count % _LOAD_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                    if self.loading_partitions.get(partition) is not token:
                        break
        return offsets, groups

    def unload_partition(
        self, partition: int, on_group_unloaded: Callable[[GroupMetadata], None]
    ) -> int:
        """Stop coordinating a partition's groups (this broker became a follower)."""
        self.owned_partitions.discard(partition)
        self.loading_partitions.pop(partition, None)
        removed = 0
        for group_id, group in list(self.groups.items()):
            if self.partition_for(group_id) == partition:
                on_group_unloaded(group)
                del self.groups[group_id]
                removed += 1
        return removed
