"""ReplicaStateMachine: replicas going offline or out of sync, and the ISR changes leaders ask for.

A replica whose broker died or is shutting down leaves every ISR (so acks=all stops waiting
for it) and gives up the leaderships it held; a leader's AlterPartition proposals are checked
against what the controller knows.  The decisions are pure functions; the writes go through the
PartitionStateMachine.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from samsa.controller.channel import RequestBatch
from samsa.controller.election import controlled_shutdown_leader
from samsa.controller.partition_state_machine import Change, PartitionStateMachine
from samsa.metadata.model import TopicPartition
from samsa.metadata.zk_data import LeaderIsrAndEpoch
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# An AlterPartition item: (partition, leader_epoch, partition_epoch, proposed ISR).
IsrProposal = tuple[TopicPartition, int, int, tuple[int, ...]]
IsrResults = dict[TopicPartition, tuple[ErrorCode, LeaderIsrAndEpoch | None]]


# ---------------------------------------------------------------------- decisions


def isr_removals(
    states: Mapping[TopicPartition, LeaderIsrAndEpoch],
    live_leaders: Collection[int],
    gone: Collection[int],
) -> dict[TopicPartition, Change]:
    """Replicas on brokers that are gone leave the ISR of partitions whose leader lives (the
    partitions they led are elected anew, not shrunk)."""
    changes = {}
    for tp, s in states.items():
        if s.leader in live_leaders and any(r in gone for r in s.isr):
            changes[tp] = (s.leader, s.leader_epoch + 1, tuple(r for r in s.isr if r not in gone))
    return changes


def controlled_shutdown_changes(
    states: Mapping[TopicPartition, LeaderIsrAndEpoch],
    replicas: Mapping[TopicPartition, Sequence[int]],
    broker_id: int,
    live: Collection[int],
    shutting_down: Collection[int],
) -> dict[TopicPartition, Change]:
    """A broker about to stop: its leaderships move to another in-sync replica where one is
    live, and it leaves the ISR of the partitions it follows (never an ISR of one)."""
    changes = {}
    for tp, s in states.items():
        rs = replicas.get(tp, ())
        if broker_id not in rs or len(rs) <= 1:
            continue
        if s.leader == broker_id:
            elected = controlled_shutdown_leader(rs, s.isr, live, shutting_down)
            if elected is not None:
                changes[tp] = (elected[0], s.leader_epoch + 1, elected[1])
        elif broker_id in s.isr and len(s.isr) > 1:
            changes[tp] = (s.leader, s.leader_epoch + 1, tuple(r for r in s.isr if r != broker_id))
    return changes


def isr_proposal_decision(
    proposer: int,
    proposal: IsrProposal,
    state: LeaderIsrAndEpoch | None,
    replicas: Sequence[int],
    live: Collection[int],
    deleting: bool,
) -> ErrorCode | Change:
    """A leader's proposed ISR: the change to write, ErrorCode.none when it is the ISR already,
    or the error that refuses it (Kafka's AlterPartition rules)."""
    _, leader_epoch, partition_epoch, isr = proposal
    if state is None or deleting:
        return ErrorCode.unknown_topic_or_partition
    if state.leader != proposer:
        return ErrorCode.not_leader_or_follower
    if leader_epoch != state.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if partition_epoch != state.zk_version:
        return ErrorCode.invalid_update_version
    if proposer not in isr or any(r not in replicas for r in isr):
        return ErrorCode.invalid_request
    # A replica may join only while its broker is live (not fenced, not shutting down).
    if any(r not in state.isr and r not in live for r in isr):
        return ErrorCode.ineligible_replica
    if tuple(sorted(isr)) == tuple(sorted(state.isr)):
        return ErrorCode.none
    return state.leader, state.leader_epoch, tuple(isr)


# ---------------------------------------------------------------------- the machine


class ReplicaStateMachine:
    def __init__(self, partitions: PartitionStateMachine) -> None:
        self.partitions = partitions
        self.ctx = partitions.ctx

    async def on_brokers_failed(self, dead: set[int], batch: RequestBatch) -> None:
        """Brokers gone (already out of the live set): their leaderships are elected anew and
        their replicas leave every ISR."""
        led = [tp for tp, s in self.ctx.states.items() if s.leader in dead]
        await self.partitions.elect_offline(batch, led)
        # Followers that died leave the ISR now, so acks=all does not wait for them.
        await self.partitions.apply(
            isr_removals(self.ctx.states, self.ctx.live_brokers, dead), batch
        )

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        ctx = self.ctx
        registered = ctx.live_brokers.get(broker_id)
        if registered is None:
            return ErrorCode.broker_not_available, []
        if broker_epoch >= 0 and broker_epoch != registered.epoch:
            return ErrorCode.stale_broker_epoch, []
        ctx.shutting_down.add(broker_id)
        changes = controlled_shutdown_changes(
            ctx.states,
            {tp: ctx.replicas(tp) for tp in ctx.states},
            broker_id,
            ctx.live_serving,
            ctx.shutting_down,
        )
        batch = self.partitions.batch()
        written = await self.partitions.apply(changes, batch)
        self.partitions.send(batch)
        remaining = [
            tp
            for tp, s in ctx.states.items()
            if s.leader == broker_id and len(ctx.replicas(tp)) > 1
        ]
        log.info(
            "controlled shutdown of broker %d: %d leaderships moved, %d remain",
            broker_id,
            len(written),
            len(remaining),
        )
        return ErrorCode.none, remaining

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, items: list[IsrProposal]
    ) -> tuple[ErrorCode, IsrResults, list[TopicPartition]]:
        """A leader's ISR changes; returns the top error, the per-partition answers, and the
        partitions written."""
        ctx = self.ctx
        registered = ctx.live_brokers.get(broker_id)
        if registered is None or (broker_epoch >= 0 and registered.epoch != broker_epoch):
            return ErrorCode.stale_broker_epoch, {}, []
        results: IsrResults = {}
        changes: dict[TopicPartition, Change] = {}
        for item in items:
            tp = item[0]
            decided = isr_proposal_decision(
                broker_id,
                item,
                ctx.states.get(tp),
                ctx.replicas(tp),
                ctx.live_serving,
                tp.topic in ctx.topics_to_delete,
            )
            if isinstance(decided, tuple):
                changes[tp] = decided
            else:
                results[tp] = (decided, ctx.states[tp] if decided == ErrorCode.none else None)
        written = await self.partitions.write_states(changes)
        for tp in changes:
            if tp in written:
                results[tp] = (ErrorCode.none, ctx.states[tp])
                log.info("%s: ISR now %s", tp, list(ctx.states[tp].isr))
            else:
                results[tp] = (ErrorCode.invalid_update_version, None)
        if written:
            batch = self.partitions.batch()
            self.partitions.add_update_metadata(batch, ctx.live_ids, written)
            self.partitions.send(batch)
        return ErrorCode.none, results, written
