"""PartitionStateMachine: each partition's leader, leader epoch and ISR, decided and written.

The decisions are pure functions over the controller's context (which replica leads a new
partition, which one takes over an offline one, what an admin election does); the class writes
them to ZooKeeper, fenced by the controller epoch, and queues the LeaderAndIsr and
UpdateMetadata requests that tell the brokers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from samsa.controller.channel import ControllerChannelManager, RequestBatch
from samsa.controller.context import ControllerContext
from samsa.controller.election import offline_partition_leader, preferred_leader
from samsa.metadata.model import TopicPartition
from samsa.metadata.zk_client import ControllerMovedError, KafkaZkClient
from samsa.metadata.zk_data import NO_LEADER, LeaderIsrAndEpoch, partition_state_path, topic_path
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# (leader, leader_epoch, isr): what a decision writes to a partition's state znode.
Change = tuple[int, int, tuple[int, ...]]
# Kafka's ElectionType.
PREFERRED = 0
UNCLEAN = 1
_ZK_OPS_PER_TRANSACTION = 500


# ---------------------------------------------------------------------- decisions


def new_partition_state(replicas: Sequence[int], live: Collection[int]) -> Change:
    """A new partition: its first live replica leads, its live replicas are the ISR; with no
    live replica it starts offline, every replica in its ISR."""
    live_replicas = tuple(r for r in replicas if r in live)
    if not live_replicas:
        return NO_LEADER, 0, tuple(replicas)
    return live_replicas[0], 0, live_replicas


def offline_partition_change(
    state: LeaderIsrAndEpoch, replicas: Sequence[int], live: Collection[int], unclean: bool
) -> Change | None:
    """A partition whose leader is gone: a new leader (epoch bumped), or offline (NO_LEADER,
    epoch bumped, ISR kept) if no replica may lead; None when there is nothing to write."""
    if state.leader in live:
        return None
    elected = offline_partition_leader(replicas, state.isr, live, unclean)
    if elected is None:
        if state.leader == NO_LEADER:
            return None
        return NO_LEADER, state.leader_epoch + 1, state.isr
    return elected[0], state.leader_epoch + 1, elected[1]


@dataclass(frozen=True)
class Refused:
    """An election not made, as ElectLeaders answers it."""

    error: ErrorCode
    message: str | None = None


def admin_election(
    election_type: int,
    tp: TopicPartition,
    state: LeaderIsrAndEpoch,
    replicas: Sequence[int],
    live: Collection[int],
) -> Change | Refused:
    """ElectLeaders for one partition: the change to write, or why none is made."""
    if election_type == PREFERRED:
        if replicas and state.leader == replicas[0]:
            return Refused(ErrorCode.election_not_needed)
        elected = preferred_leader(replicas, state.isr, live)
        if elected is None:
            return Refused(
                ErrorCode.preferred_leader_not_available,
                f"The preferred leader of {tp} is not live and in sync",
            )
    elif election_type == UNCLEAN:
        if state.leader in live:
            return Refused(ErrorCode.election_not_needed)
        elected = offline_partition_leader(replicas, state.isr, live, True)
        if elected is None:
            return Refused(ErrorCode.eligible_leaders_not_available, f"No live replica of {tp}")
    else:
        return Refused(ErrorCode.invalid_request, f"Unknown election type {election_type}")
    return elected[0], state.leader_epoch + 1, elected[1]


# ---------------------------------------------------------------------- the machine


class PartitionStateMachine:
    def __init__(
        self,
        zk: KafkaZkClient,
        ctx: ControllerContext,
        broker_id: int,
        channel: ControllerChannelManager,
        unclean_default: Callable[[], bool],
    ) -> None:
        self.zk = zk
        self.ctx = ctx
        self.broker_id = broker_id
        self.channel = channel
        self.unclean_default = unclean_default

    # ------------------------------------------------------------------ requests

    def batch(self) -> RequestBatch:
        return RequestBatch(self.broker_id, self.ctx.epoch)

    def send(self, batch: RequestBatch) -> None:
        live = self.ctx.broker_infos()
        batch.send(self.channel, live, {b.id: b for b in live})

    def add_leader_and_isr(
        self, batch: RequestBatch, brokers: Iterable[int], tp: TopicPartition, is_new: bool = False
    ) -> None:
        state = self.ctx.partition_state(tp)
        if state is None:
            return
        live = [b for b in brokers if b in self.ctx.live_brokers]
        batch.add_leader_and_isr(live, state, self.ctx.topics[tp.topic].topic_id, is_new)

    def add_update_metadata(
        self, batch: RequestBatch, brokers: Iterable[int], tps: Iterable[TopicPartition]
    ) -> None:
        states = []
        for tp in tps:
            state = self.ctx.partition_state(tp)
            if state is not None:
                states.append((state, self.ctx.topics[tp.topic].topic_id))
        batch.add_update_metadata([b for b in brokers if b in self.ctx.live_brokers], states)

    async def apply(
        self,
        changes: dict[TopicPartition, Change],
        batch: RequestBatch,
        create: bool = False,
    ) -> list[TopicPartition]:
        """Write the changes, and tell every replica of each written partition (LeaderAndIsr)
        and every live broker (UpdateMetadata)."""
        written = await self.write_states(changes, create)
        for tp in written:
            self.add_leader_and_isr(batch, self.ctx.replicas(tp), tp, is_new=create)
        self.add_update_metadata(batch, self.ctx.live_ids, written)
        return written

    # ------------------------------------------------------------------ ZooKeeper

    async def write_states(
        self, changes: dict[TopicPartition, Change], create: bool = False
    ) -> list[TopicPartition]:
        """Write (leader, leader_epoch, isr) of partitions, conditionally on their znode
        versions; returns those written (a partition changed by someone else is skipped and
        re-read)."""
        written: list[TopicPartition] = []
        items = list(changes.items())
        for start in range(0, len(items), _ZK_OPS_PER_TRANSACTION):
            chunk = items[start : start + _ZK_OPS_PER_TRANSACTION]
            ops = [self._op(tp, change, create) for tp, change in chunk]
            try:
                if create:
                    for tp, _ in chunk:
                        await self.zk.ensure_path(
                            f"{topic_path(tp.topic)}/partitions/{tp.partition}"
                        )
                results = await self.zk.controller_write(self.ctx.epoch_zk_version, ops)
            except ControllerMovedError:
                raise
            except Exception as exc:
                # One stale partition fails the whole transaction: fall back to one by one.
                log.info("batched partition state write failed (%s); writing one by one", exc)
                for tp, change in chunk:
                    written.extend(await self._write_one(tp, change, create))
                continue
            for (tp, change), result in zip(chunk, results, strict=True):
                self._written(tp, change, create, result)
                written.append(tp)
        return written

    def _op(self, tp: TopicPartition, change: Change, create: bool) -> tuple[str, str, bytes, int]:
        leader, leader_epoch, isr = change
        state = LeaderIsrAndEpoch(leader, leader_epoch, isr, self.ctx.epoch, -1)
        old = self.ctx.states.get(tp)
        if create or old is None:
            return "create", partition_state_path(*tp), state.to_json(), -1
        return "set", partition_state_path(*tp), state.to_json(), old.zk_version

    def _written(self, tp: TopicPartition, change: Change, create: bool, result: object) -> None:
        version = (
            0 if create or self.ctx.states.get(tp) is None else result.version  # type: ignore[attr-defined]
        )
        leader, leader_epoch, isr = change
        self.ctx.states[tp] = LeaderIsrAndEpoch(leader, leader_epoch, isr, self.ctx.epoch, version)

    async def _write_one(
        self, tp: TopicPartition, change: Change, create: bool
    ) -> list[TopicPartition]:
        try:
            results = await self.zk.controller_write(
                self.ctx.epoch_zk_version, [self._op(tp, change, create)]
            )
        except ControllerMovedError:
            raise
        except Exception as exc:
            log.warning("writing the state of %s failed: %s; re-reading it", tp, exc)
            fresh = await self.zk.partition_state(*tp)
            if fresh is not None:
                self.ctx.states[tp] = fresh
            return []
        self._written(tp, change, create, results[0])
        return [tp]

    async def unclean_allowed(self, topic: str) -> bool:
        configs = await self.zk.topic_config(topic)
        value = configs.get("unclean.leader.election.enable")
        if value is None:
            return self.unclean_default()
        return value.lower() == "true"

    # ------------------------------------------------------------------ transitions

    async def init_partitions(self, tps: list[TopicPartition], batch: RequestBatch) -> None:
        """New partitions: the first live replica leads, the live replicas are the ISR."""
        live = self.ctx.live_serving
        changes = {}
        for tp in tps:
            changes[tp] = new_partition_state(self.ctx.replicas(tp), live)
            if changes[tp][0] == NO_LEADER:
                log.warning("new partition %s has no live replica; it stays offline", tp)
        await self.apply(changes, batch, create=True)

    async def elect_offline(
        self, batch: RequestBatch, among: Iterable[TopicPartition] | None = None
    ) -> None:
        """Partitions without a live leader get one from their ISR (or, if the topic allows
        it, from any live replica)."""
        ctx = self.ctx
        live = ctx.live_serving
        changes = {}
        for tp in list(among if among is not None else ctx.states):
            state = ctx.states.get(tp)
            if state is None or tp.topic in ctx.topics_to_delete:
                continue
            if state.leader in live:
                continue
            replicas = ctx.replicas(tp)
            change = offline_partition_change(state, replicas, live, unclean=False)
            if change is None or change[0] == NO_LEADER:
                unclean = offline_partition_change(state, replicas, live, unclean=True)
                if (
                    unclean is not None
                    and unclean[0] != NO_LEADER
                    and await self.unclean_allowed(tp.topic)
                ):
                    log.warning("%s: unclean leader election of broker %d", tp, unclean[0])
                    change = unclean
                elif change is not None:
                    log.warning("%s has no live in-sync replica: offline", tp)
            if change is not None:
                changes[tp] = change
        await self.apply(changes, batch)

    async def elect_leaders(
        self, election_type: int, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """ElectLeaders: preferred or unclean elections of the given partitions (None: all)."""
        ctx = self.ctx
        targets = (
            tps
            if tps is not None
            else [tp for tp in ctx.states if tp.topic not in ctx.topics_to_delete]
        )
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        changes: dict[TopicPartition, Change] = {}
        live = ctx.live_serving
        for tp in targets:
            s = ctx.states.get(tp)
            if s is None or tp.topic in ctx.topics_to_delete:
                results[tp] = (ErrorCode.unknown_topic_or_partition, None)
                continue
            decided = admin_election(election_type, tp, s, ctx.replicas(tp), live)
            if isinstance(decided, Refused):
                results[tp] = (decided.error, decided.message)
            else:
                changes[tp] = decided
        batch = self.batch()
        written = await self.apply(changes, batch)
        for tp in changes:
            results[tp] = (
                (ErrorCode.none, None)
                if tp in written
                else (ErrorCode.unknown_server_error, "the partition changed meanwhile; retry")
            )
        self.send(batch)
        return results
