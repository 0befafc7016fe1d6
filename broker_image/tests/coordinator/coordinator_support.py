"""Test helpers for the group coordinator: an in-memory GroupStore, consumer protocol bytes,
and a harness that runs a coordinator on a manual clock."""

from __future__ import annotations

import asyncio
import struct
from collections import defaultdict
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from manual_clock import ManualClock

from samsa.coordinator import (
    GroupCoordinator,
    GroupCoordinatorConfig,
    JoinResult,
)
from samsa.coordinator.group_records import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)

T = TypeVar("T")

SESSION_MS = 10_000
REBALANCE_MS = 30_000


class MemoryGroupStore:
    """A GroupStore that keeps each partition's records in a list, in append order.

    ``fail_with`` makes appends raise; ``gate`` (an Event) holds appends until set.
    """

    def __init__(self) -> None:
        self.logs: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        self.fail_with: BaseException | None = None
        self.gate: asyncio.Event | None = None
        self.appends = 0

    async def append(
        self,
        partition: int,
        records: list[tuple[bytes, bytes | None]],
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        self.appends += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        self.logs[partition].extend(records)

    def records(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        return list(self.logs[partition])

    def decoded(self, partition: int) -> list[tuple[object, object]]:
        """(key, value) decoded, for assertions; tombstones have value None."""
        out: list[tuple[object, object]] = []
        for key, value in self.logs[partition]:
            k = decode_key(key)
            if value is None:
                out.append((k, None))
            elif isinstance(k, OffsetCommitKey):
                out.append((k, decode_offset_commit_value(value)))
            elif isinstance(k, GroupMetadataKey):
                out.append((k, decode_group_metadata_value(value)))
        return out


# ---------------------------------------------------------------- consumer protocol bytes


def _str(s: str) -> bytes:
    data = s.encode()
    return struct.pack(">h", len(data)) + data


def subscription(*topics: str, user_data: bytes | None = None) -> bytes:
    """ConsumerProtocolSubscription v0."""
    out = struct.pack(">hi", 0, len(topics)) + b"".join(_str(t) for t in topics)
    if user_data is None:
        return out + struct.pack(">i", -1)
    return out + struct.pack(">i", len(user_data)) + user_data


def assignment(parts: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    out = struct.pack(">hi", 0, len(parts))
    for topic, partitions in sorted(parts.items()):
        out += _str(topic) + struct.pack(">i", len(partitions))
        out += b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    if not data:
        return {}
    pos = 2
    (n,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: dict[str, list[int]] = {}
    for _ in range(n):
        (length,) = struct.unpack_from(">h", data, pos)
        pos += 2
        topic = data[pos : pos + length].decode()
        pos += length
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out[topic] = list(struct.unpack_from(f">{count}i", data, pos))
        pos += 4 * count
    return out


def decode_subscription_topics(data: bytes) -> list[str]:
    (n,) = struct.unpack_from(">i", data, 2)
    pos = 6
    topics = []
    for _ in range(n):
        (length,) = struct.unpack_from(">h", data, pos)
        pos += 2
        topics.append(data[pos : pos + length].decode())
        pos += length
    return topics


def range_assign(join: JoinResult, partitions_per_topic: int) -> dict[str, bytes]:
    """What a consumer leader's RangeAssignor does with the members of its JoinGroup answer."""
    member_ids = sorted(m.member_id for m in join.members)
    topics: dict[str, list[str]] = defaultdict(list)
    for m in join.members:
        for t in decode_subscription_topics(m.metadata):
            topics[t].append(m.member_id)
    result: dict[str, dict[str, list[int]]] = {mid: {} for mid in member_ids}
    for topic, subscribers in sorted(topics.items()):
        subscribers.sort()
        per, extra = divmod(partitions_per_topic, len(subscribers))
        start = 0
        for i, mid in enumerate(subscribers):
            n = per + (1 if i < extra else 0)
            if n:
                result[mid][topic] = list(range(start, start + n))
            start += n
    return {mid: assignment(parts) for mid, parts in result.items()}


# ---------------------------------------------------------------- harness


@dataclass
class Harness:
    coordinator: GroupCoordinator
    store: MemoryGroupStore
    clock: ManualClock
    config: GroupCoordinatorConfig
    topics: dict[str, int] = field(default_factory=dict)

    def partition_of(self, group_id: str) -> int:
        return self.coordinator.partition_for(group_id)

    async def settle(self) -> None:
        """Let parked requests and background writes run (a yield, never a sleep)."""
        for _ in range(3):
            for _ in range(5):
                await asyncio.sleep(0)
            await self.coordinator.wait_idle()

    def start(self, aw: Awaitable[T]) -> asyncio.Task[T]:
        return asyncio.ensure_future(aw)

    async def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        await self.settle()

    async def join(
        self,
        group_id: str,
        member_id: str = "",
        *,
        topics: tuple[str, ...] = ("t1",),
        protocols: list[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        client_id: str = "client",
        instance_id: str | None = None,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        require_known_member_id: bool | None = None,
        supports_skip_assignment: bool = True,
    ) -> asyncio.Task[JoinResult]:
        """Send a JoinGroup and let it run until it answers or parks."""
        if protocols is None:
            protocols = [("range", subscription(*topics))]
        if require_known_member_id is None:
            require_known_member_id = instance_id is None
        task = self.start(
            self.coordinator.join_group(
                group_id,
                member_id,
                client_id,
                "/127.0.0.1",
                rebalance_ms,
                session_ms,
                protocol_type,
                protocols,
                group_instance_id=instance_id,
                require_known_member_id=require_known_member_id,
                supports_skip_assignment=supports_skip_assignment,
            )
        )
        await self.settle()
        return task

    async def new_member_id(self, group_id: str, client_id: str = "client", **kw: object) -> str:
        """KIP-394's first round trip: an empty member id earns MEMBER_ID_REQUIRED and an id."""
        task = await self.join(group_id, client_id=client_id, **kw)  # type: ignore[arg-type]
        result = task.result()
        assert result.error.name == "member_id_required", result
        assert result.member_id.startswith(client_id + "-")
        return result.member_id


async def make_harness(
    *,
    initial_delay_ms: int = 0,
    owned: range | list[int] | None = None,
    topics: dict[str, int] | None = None,
    **config: int,
) -> Harness:
    cfg = GroupCoordinatorConfig(
        offsets_topic_num_partitions=config.pop("offsets_topic_num_partitions", 4),
        group_initial_rebalance_delay_ms=initial_delay_ms,
        **config,
    )
    clock = ManualClock()
    store = MemoryGroupStore()
    known = dict(topics if topics is not None else {"t1": 4, "t2": 4, "t3": 2})
    coordinator = GroupCoordinator(
        cfg,
        store,
        clock=clock,
        partition_exists=lambda t, p: 0 <= p < known.get(t, 0),
    )
    coordinator.start(enable_offset_expiration=False)
    for p in owned if owned is not None else range(cfg.offsets_topic_num_partitions):
        await coordinator.load_partition(p, [])
    return Harness(coordinator, store, clock, cfg, known)
