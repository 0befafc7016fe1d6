"""ReassignmentManager: moving a partition's replicas (AlterPartitionReassignments, KIP-455).

The steps are Kafka's: write the union of old and new replicas with the adding and removing
sets, bump the leader epoch so every replica takes the new set, wait until every target
replica is in the ISR, then move leadership into the target set if needed, shrink the replicas
to it and delete the replicas left out.  Each step's decision is a pure function.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from samsa.controller.election import reassignment_leader
from samsa.controller.partition_state_machine import PartitionStateMachine
from samsa.metadata.model import TopicPartition
from samsa.metadata.zk_client import KafkaZkClient
from samsa.metadata.zk_data import LeaderIsrAndEpoch, topic_json, topic_path
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

Results = dict[TopicPartition, tuple[ErrorCode, str | None]]


# ---------------------------------------------------------------------- decisions


@dataclass(frozen=True)
class ReassignmentStart:
    original: tuple[int, ...]
    replicas: tuple[int, ...]  # target first, then the original replicas left out of it
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def reassignment_start(
    assignment: Sequence[int],
    adding_now: Sequence[int],
    in_progress: bool,
    target: Sequence[int],
) -> ReassignmentStart | None:
    """The replica set a reassignment to ``target`` writes first, or None when the partition
    already has exactly those replicas.  A reassignment replacing one in progress starts from
    the original replicas (the current ones minus those being added)."""
    if in_progress:
        original = tuple(r for r in assignment if r not in adding_now)
    else:
        original = tuple(assignment)
    target = tuple(target)
    if target == original and not in_progress:
        return None
    return ReassignmentStart(
        original,
        target + tuple(r for r in original if r not in target),
        tuple(r for r in target if r not in original),
        tuple(r for r in original if r not in target),
    )


@dataclass(frozen=True)
class ReassignmentFinish:
    leader: int
    isr: tuple[int, ...]
    removed: tuple[int, ...]


def reassignment_finish(
    target: Sequence[int],
    assignment: Sequence[int],
    state: LeaderIsrAndEpoch,
    live: Collection[int],
) -> ReassignmentFinish | None:
    """How a reassignment completes, or None while it must wait: until every target replica is
    in the ISR, and until a live target replica can lead."""
    if not all(r in state.isr for r in target):
        return None
    isr = tuple(r for r in state.isr if r in target)
    leader = state.leader
    if leader not in target or leader not in live:
        elected = reassignment_leader(target, isr, live)
        if elected is None:
            return None
        leader = elected[0]
    return ReassignmentFinish(leader, isr, tuple(r for r in assignment if r not in target))


def target_error(
    tp: TopicPartition, target: Sequence[int], registered: Collection[int]
) -> tuple[ErrorCode, str] | None:
    """Why a reassignment target is refused, if it is."""
    if not target or len(set(target)) != len(target):
        return (
            ErrorCode.invalid_replica_assignment,
            f"The target replicas of {tp} must be distinct and non-empty",
        )
    unknown = [r for r in target if r not in registered]
    if unknown:
        return (
            ErrorCode.invalid_replica_assignment,
            f"Unknown brokers {unknown} in the target replicas of {tp}",
        )
    return None


# ---------------------------------------------------------------------- the manager


class ReassignmentManager:
    def __init__(
        self,
        zk: KafkaZkClient,
        partitions: PartitionStateMachine,
        schedule_step: Callable[[TopicPartition], None],
    ) -> None:
        self.zk = zk
        self.partitions = partitions
        self.ctx = partitions.ctx
        self.schedule_step = schedule_step

    def load(self) -> None:
        """Reassignments in progress, from the topics' adding and removing sets."""
        for name, topic in self.ctx.topics.items():
            for p, target in topic.adding.items():
                if target or topic.removing.get(p):
                    removing = topic.removing.get(p, [])
                    self.ctx.reassigning[TopicPartition(name, p)] = tuple(
                        r for r in topic.assignment[p] if r not in removing
                    )

    async def alter(self, targets: dict[TopicPartition, tuple[int, ...] | None]) -> Results:
        ctx = self.ctx
        results: Results = {}
        registered = set(await self.zk.brokers())
        for tp, target in targets.items():
            topic = ctx.topics.get(tp.topic)
            if (
                topic is None
                or tp.partition not in topic.assignment
                or tp.topic in ctx.topics_to_delete
            ):
                results[tp] = (ErrorCode.unknown_topic_or_partition, None)
            elif target is None:
                if tp not in ctx.reassigning:
                    results[tp] = (
                        ErrorCode.no_reassignment_in_progress,
                        f"No reassignment of {tp} is in progress",
                    )
                    continue
                await self.cancel(tp)
                results[tp] = (ErrorCode.none, None)
            elif (refused := target_error(tp, target, registered)) is not None:
                results[tp] = refused
            else:
                await self.start(tp, tuple(target))
                results[tp] = (ErrorCode.none, None)
        return results

    async def start(self, tp: TopicPartition, target: tuple[int, ...]) -> None:
        ctx = self.ctx
        topic = ctx.topics[tp.topic]
        plan = reassignment_start(
            topic.assignment[tp.partition],
            topic.adding.get(tp.partition, []),
            tp in ctx.reassigning,
            target,
        )
        if plan is None:
            return
        await self.write_topic(tp, plan.replicas, list(plan.adding), list(plan.removing))
        ctx.reassigning[tp] = target
        log.info("reassigning %s from %s to %s", tp, list(plan.original), list(target))
        # Bump the leader epoch so every replica takes the new replica set.
        s = ctx.states[tp]
        batch = self.partitions.batch()
        if await self.partitions.write_states({tp: (s.leader, s.leader_epoch + 1, s.isr)}):
            self.partitions.add_leader_and_isr(batch, plan.replicas, tp, is_new=True)
            self.partitions.add_update_metadata(batch, ctx.live_ids, [tp])
            self.partitions.send(batch)
        self.schedule_step(tp)

    async def write_topic(
        self, tp: TopicPartition, replicas: tuple[int, ...], adding: list[int], removing: list[int]
    ) -> None:
        ctx = self.ctx
        topic = ctx.topics[tp.topic]
        assignment = {**topic.assignment, tp.partition: list(replicas)}
        adds = {p: r for p, r in topic.adding.items() if p != tp.partition}
        rems = {p: r for p, r in topic.removing.items() if p != tp.partition}
        if adding or removing:
            adds[tp.partition] = list(adding)
            rems[tp.partition] = list(removing)
        results = await self.zk.controller_write(
            ctx.epoch_zk_version,
            [
                (
                    "set",
                    topic_path(tp.topic),
                    topic_json(topic.topic_id, assignment, adds, rems),
                    topic.version,
                )
            ],
        )
        ctx.topics[tp.topic] = type(topic)(
            topic.name, topic.topic_id, assignment, adds, rems, results[0].version
        )

    async def step(self, tp: TopicPartition) -> None:
        """Finish a reassignment once every target replica is in the ISR."""
        ctx = self.ctx
        target = ctx.reassigning.get(tp)
        s = ctx.states.get(tp)
        if target is None or s is None:
            return
        topic = ctx.topics[tp.topic]
        finish = reassignment_finish(target, topic.assignment[tp.partition], s, ctx.live_serving)
        if finish is None:
            if all(r in s.isr for r in target):
                log.info("reassignment of %s waits for a live target replica to lead", tp)
            return
        await self.write_topic(tp, target, [], [])
        batch = self.partitions.batch()
        if await self.partitions.write_states(
            {tp: (finish.leader, s.leader_epoch + 1, finish.isr)}
        ):
            self.partitions.add_leader_and_isr(batch, target, tp)
            for r in finish.removed:
                batch.add_stop_replica([r] if r in ctx.live_brokers else [], tp, -1, True)
            self.partitions.add_update_metadata(batch, ctx.live_ids, [tp])
            self.partitions.send(batch)
        del ctx.reassigning[tp]
        log.info("reassignment of %s done: replicas %s, leader %d", tp, list(target), finish.leader)

    async def cancel(self, tp: TopicPartition) -> None:
        ctx = self.ctx
        topic = ctx.topics[tp.topic]
        adding = topic.adding.get(tp.partition, [])
        ctx.reassigning[tp] = tuple(r for r in topic.assignment[tp.partition] if r not in adding)
        await self.step(tp)
        batch = self.partitions.batch()
        for r in adding:
            batch.add_stop_replica([r] if r in ctx.live_brokers else [], tp, -1, True)
        self.partitions.send(batch)

    def list(
        self, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """Ongoing reassignments: (replicas, adding, removing)."""
        out = {}
        for tp in self.ctx.reassigning:
            if tps is not None and tp not in tps:
                continue
            topic = self.ctx.topics[tp.topic]
            out[tp] = (
                list(topic.assignment[tp.partition]),
                list(topic.adding.get(tp.partition, [])),
                list(topic.removing.get(tp.partition, [])),
            )
        return out
