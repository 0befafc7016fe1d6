"""ControllerEventHandlers: what the active controller does on each event.

Kafka's KafkaController.process* methods: brokers registering, leaving or being fenced
(BrokerChange), topics created, grown and deleted (TopicChange, PartitionModifications,
TopicDeletion), leaders' ISR changes (AlterPartition), controlled shutdowns, leader elections
asked for or due to imbalance (ReplicaLeaderElection, AutoPreferredReplicaLeaderElection)
and reassignments (ApiPartitionReassignment).  Each handler runs as one event, only on the
active controller; the decisions and ZooKeeper writes are the state machines', and
KafkaController (samsa.controller.kafka_controller) owns the election, the session and the
watches that bring the events.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kazoo.recipe.watchers import DataWatch

from samsa.controller.broker_liveness import BrokerProber, registration_changes
from samsa.controller.channel import ControllerChannelManager
from samsa.controller.context import ControllerContext
from samsa.controller.election import leader_imbalance
from samsa.controller.event_manager import ControllerEventManager, Event, NotController
from samsa.controller.partition_state_machine import PREFERRED, PartitionStateMachine
from samsa.controller.reassignment import ReassignmentManager
from samsa.controller.replica_state_machine import IsrProposal, IsrResults, ReplicaStateMachine
from samsa.controller.topic_deletion import TopicDeletionManager
from samsa.metadata.model import TopicPartition
from samsa.metadata.zk_client import KafkaZkClient
from samsa.metadata.zk_data import RegisteredBroker, topic_path
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class ControllerEventHandlers:
    """The events of the active controller, over the state KafkaController keeps."""

    # Set by KafkaController: its ZooKeeper client, channel, events and probes, and for each
    # term as controller the context and the state machines over it.
    zk: KafkaZkClient
    broker_id: int
    channel: ControllerChannelManager
    config: Callable[[], Any]
    events: ControllerEventManager
    active: bool
    liveness: BrokerProber | None
    ctx: ControllerContext
    partitions: PartitionStateMachine
    replicas: ReplicaStateMachine
    reassignments: ReassignmentManager
    deletions: TopicDeletionManager
    _watches: list[Any]

    # ------------------------------------------------------------------ fencing

    async def _broker_died(self, broker_id: int) -> None:
        """A broker found dead while still registered: fenced now, as if its session expired
        (new leader epochs for what it led, out of every ISR), until it registers anew."""
        self._require_active()
        registered = self.ctx.live_brokers.get(broker_id)
        if registered is None:
            return
        self.ctx.fenced[broker_id] = registered
        log.warning(
            "broker %d is fenced: nothing listens at %s:%d (its registration remains)",
            broker_id,
            registered.info.host,
            registered.info.port,
        )
        await self._apply_broker_changes({broker_id}, set(), {}, fencing=True)

    async def _broker_back(self, broker_id: int) -> None:
        """A fenced broker answers again under the same registration (it was cut off, not
        dead): it is taken back as a broker that registered anew would be."""
        self._require_active()
        fenced = self.ctx.fenced.get(broker_id)
        current = await self.zk.brokers()
        registered = current.get(broker_id)
        if fenced is None or registered is None or registered.epoch != fenced.epoch:
            return  # gone or registered anew: the registration watch sees to it
        del self.ctx.fenced[broker_id]
        log.warning("broker %d answers again: no longer fenced", broker_id)
        await self._apply_broker_changes(set(), {broker_id}, current)

    def _require_active(self) -> None:
        if not self.active:
            raise NotController()

    # ------------------------------------------------------------------ brokers

    def _on_brokers_changed(self, children: list[str]) -> None:
        self.events.put(self._brokers_changed)

    def _watch(self, broker_id: int) -> None:
        if self.liveness is not None and broker_id != self.broker_id:
            self.liveness.watch(broker_id)

    async def _brokers_changed(self) -> None:
        self._require_active()
        ctx = self.ctx
        current = await self.zk.brokers()
        for b, fenced in list(ctx.fenced.items()):
            if b not in current or current[b].epoch != fenced.epoch:
                # That registration is gone: its broker may come back, registered anew.
                del ctx.fenced[b]
                if self.liveness is not None:
                    self.liveness.unwatch(b)
        dead, new = registration_changes(
            ctx.live_brokers, current, {b: r.epoch for b, r in ctx.fenced.items()}
        )
        if not dead and not new:
            return
        log.info("brokers: new %s, gone %s", sorted(new), sorted(dead - new))
        await self._apply_broker_changes(dead, new, current)

    async def _apply_broker_changes(
        self,
        dead: set[int],
        new: set[int],
        current: dict[int, RegisteredBroker],
        fencing: bool = False,
    ) -> None:
        """Brokers gone (or fenced: still probed, in case they answer again) and brokers come."""
        ctx = self.ctx
        for b in dead:
            ctx.live_brokers.pop(b, None)
            ctx.shutting_down.discard(b)
            self.channel.remove_broker(b)
            if self.liveness is not None and not fencing:
                self.liveness.unwatch(b)
        batch = self.partitions.batch()
        if dead:
            await self.replicas.on_brokers_failed(dead, batch)
        for b in new:
            ctx.live_brokers[b] = current[b]
            self.channel.add_broker(b)
            self._watch(b)
        if new:
            await self.partitions.elect_offline(batch)
            for b in new:
                for tp in ctx.partitions_on(b):
                    self.partitions.add_leader_and_isr(batch, [b], tp)
        self.partitions.add_update_metadata(batch, ctx.live_ids, ctx.partitions())
        self.partitions.send(batch)
        for tp in list(ctx.reassigning):
            self._schedule_reassignment_step(tp)

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        """Move leadership off a broker that is about to stop; returns the partitions it still
        leads (those with no other in-sync replica)."""
        if not self.active:
            return ErrorCode.not_controller, []

        async def run() -> tuple[ErrorCode, list[TopicPartition]]:
            self._require_active()
            return await self.replicas.controlled_shutdown(broker_id, broker_epoch)

        result: tuple[ErrorCode, list[TopicPartition]] = await self.events.call(
            run, (ErrorCode.not_controller, [])
        )
        return result

    # ------------------------------------------------------------------ topics

    def _on_topics_changed(self, children: list[str]) -> None:
        self.events.put(self._topics_changed)

    async def _topics_changed(self) -> None:
        self._require_active()
        names = set(await self.zk.topic_names())
        known = set(self.ctx.topics)
        for gone in known - names:
            self._forget_topic(gone)
        batch = self.partitions.batch()
        new_tps: list[TopicPartition] = []
        for name in sorted(names - known):
            topic = await self.zk.topic(name)
            if topic is None:
                continue
            self.ctx.topics[name] = topic
            self._watch_topic(name)
            new_tps.extend(self.ctx.partitions(name))
        if new_tps:
            await self.partitions.init_partitions(new_tps, batch)
            self.partitions.send(batch)

    def _watch_topic(self, name: str) -> None:
        def changed(data: bytes | None, stat: Any, *_: Any) -> Any:
            if data is None:
                return False  # the topic is gone: stop watching it
            self.events.put(self._partitions_changed_event(name))
            return None

        async def register() -> None:
            self._watches.append(
                await asyncio.to_thread(
                    DataWatch, self.zk.zk, topic_path(name), self.zk.on_loop(changed)
                )
            )

        asyncio.get_running_loop().create_task(register())

    def _partitions_changed_event(self, name: str) -> Event:
        async def event() -> None:
            self._require_active()
            topic = await self.zk.topic(name)
            if topic is None or name not in self.ctx.topics:
                return
            old = self.ctx.topics[name]
            if topic.version == old.version:
                return
            self.ctx.topics[name] = topic
            added = [TopicPartition(name, p) for p in topic.assignment if p not in old.assignment]
            if added:
                log.info("topic %s grew to %d partitions", name, len(topic.assignment))
                batch = self.partitions.batch()
                await self.partitions.init_partitions(added, batch)
                self.partitions.send(batch)

        return event

    def _forget_topic(self, name: str) -> None:
        self.ctx.topics.pop(name, None)
        for tp in [tp for tp in self.ctx.states if tp.topic == name]:
            del self.ctx.states[tp]
            self.ctx.reassigning.pop(tp, None)

    def _on_deletions_changed(self, children: list[str]) -> None:
        self.events.put(self._process_deletions)

    async def _process_deletions(self) -> None:
        self._require_active()
        await self.deletions.process()

    # ------------------------------------------------------------------ ISR changes

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, items: list[IsrProposal]
    ) -> tuple[ErrorCode, IsrResults]:
        """A leader's ISR changes: (tp, leader_epoch, partition_epoch, new_isr) each."""
        if not self.active:
            return ErrorCode.not_controller, {}

        async def run() -> tuple[ErrorCode, IsrResults]:
            self._require_active()
            error, results, written = await self.replicas.alter_partition(
                broker_id, broker_epoch, items
            )
            for tp in written:
                if tp in self.ctx.reassigning:
                    self._schedule_reassignment_step(tp)
            return error, results

        result: tuple[ErrorCode, IsrResults] = await self.events.call(
            run, (ErrorCode.not_controller, {})
        )
        return result

    # ------------------------------------------------------------------ elections

    async def elect_leaders(
        self, election_type: int, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        if not self.active:
            raise NotController()

        async def run() -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
            self._require_active()
            return await self.partitions.elect_leaders(election_type, tps)

        result: dict[TopicPartition, tuple[ErrorCode, str | None]] = await self.events.call(run)
        return result

    async def _auto_rebalance(self) -> None:
        self._require_active()
        ctx = self.ctx
        threshold = self.config()["leader.imbalance.per.broker.percentage"] / 100
        assignments = {
            tp: ctx.replicas(tp)
            for tp in ctx.states
            if tp.topic not in ctx.topics_to_delete and tp not in ctx.reassigning
        }
        leaders = {tp: s.leader for tp, s in ctx.states.items()}
        imbalance = leader_imbalance(assignments, leaders)
        over = {b for b, ratio in imbalance.items() if ratio > threshold and b in ctx.live_serving}
        if not over:
            return
        tps = [
            tp
            for tp, rs in assignments.items()
            if rs and rs[0] in over and leaders.get(tp) != rs[0]
        ]
        log.info("auto leader rebalance: brokers %s are over the imbalance threshold", sorted(over))
        await self.partitions.elect_leaders(PREFERRED, tps)

    # ------------------------------------------------------------------ reassignment

    async def alter_reassignments(
        self, targets: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        if not self.active:
            raise NotController()

        async def run() -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
            self._require_active()
            return await self.reassignments.alter(targets)

        result: dict[TopicPartition, tuple[ErrorCode, str | None]] = await self.events.call(run)
        return result

    def _schedule_reassignment_step(self, tp: TopicPartition) -> None:
        async def event() -> None:
            self._require_active()
            await self.reassignments.step(tp)

        self.events.put(event)

    def list_reassignments(
        self, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """Ongoing reassignments: (replicas, adding, removing)."""
        if not self.active:
            raise NotController()
        return self.reassignments.list(tps)
