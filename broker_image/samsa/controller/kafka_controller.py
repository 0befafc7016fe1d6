"""KafkaController: the one broker that decides leadership, elected through ZooKeeper.

Every broker runs one; the one that creates the ephemeral /controller znode (and bumps
/controller_epoch in the same transaction) is active.  The active controller reacts to broker
registrations coming and going, topics created, grown and deleted, ISR changes proposed by
leaders (AlterPartition), controlled shutdowns, leader elections and reassignments.  Events
are handled one at a time on one task.  Every ZooKeeper write it makes is a transaction that
checks /controller_epoch is still at the version it set, and every request it sends brokers
carries its epoch, which brokers compare with the newest they have seen: a controller that
was replaced (its session expired while it was paused, say) can change nothing.  It stops
acting as soon as its ZooKeeper session is suspended or lost.

This module owns the election and the failover to a new controller, the reactions to the
ZooKeeper session, the ZooKeeper watches, and the probes of brokers (and, while not active,
of the controller) that stop answering.  The events are run by the ControllerEventManager
and handled by ControllerEventHandlers, which this class extends; the decisions and writes
are the PartitionStateMachine's, the ReplicaStateMachine's, the ReassignmentManager's and
the TopicDeletionManager's, and broker_liveness says which brokers count as live.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from samsa.controller.broker_liveness import BrokerProber, LivenessPolicy
from samsa.controller.channel import ControllerChannelManager
from samsa.controller.context import ControllerContext
from samsa.controller.event_handlers import ControllerEventHandlers
from samsa.controller.event_manager import ControllerEventManager
from samsa.controller.partition_state_machine import PartitionStateMachine
from samsa.controller.reassignment import ReassignmentManager
from samsa.controller.replica_state_machine import ReplicaStateMachine
from samsa.controller.topic_deletion import TopicDeletionManager
from samsa.metadata.model import TopicPartition
from samsa.metadata.zk_client import ControllerMovedError, KafkaZkClient
from samsa.metadata.zk_data import BROKER_IDS, CONTROLLER, DELETE_TOPICS, TOPICS

log = logging.getLogger(__name__)


class KafkaController(ControllerEventHandlers):
    """One broker's controller: elected through ZooKeeper, active while it holds /controller."""

    def __init__(
        self,
        zk: KafkaZkClient,
        broker_id: int,
        channel: ControllerChannelManager,
        config: Callable[[], Any],
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.channel = channel
        self.config = config  # the broker's effective KafkaConfig
        self._use_context(ControllerContext())
        self.active = False
        self.events = ControllerEventManager(broker_id, self._resign)
        self._timers: list[asyncio.Task[None]] = []
        self._watches: list[Any] = []
        # Probes for brokers that died before their session expires: the other brokers while
        # active, the active controller while not.
        self.liveness: BrokerProber | None = None
        self._watched_controller: tuple[int, tuple[str, int]] | None = None
        # Observers (tests, metrics): called with the epoch when this broker becomes active.
        self.on_elected: Callable[[int], None] = lambda epoch: None

    # ------------------------------------------------------------------ lifecycle

    async def startup(self) -> None:
        self.events.start()
        config = self.config()
        interval = config["broker.liveness.probe.interval.ms"] / 1000
        if interval > 0:
            self.liveness = BrokerProber(
                self._probe_address,
                self._on_probe_dead,
                self._on_probe_back,
                LivenessPolicy(confirm_probes=config["broker.liveness.probe.failures"]),
                interval,
                timeout_s=max(1.0, 4 * interval),
                client_id=f"liveness-{self.broker_id}",
                security=self.channel.pool.security,
            )
        self.zk.add_state_listener(self._on_session_state)
        self._watches.append(
            await asyncio.to_thread(
                DataWatch, self.zk.zk, CONTROLLER, self.zk.on_loop(self._on_controller_znode)
            )
        )
        self._watches.append(
            await asyncio.to_thread(
                ChildrenWatch, self.zk.zk, BROKER_IDS, self.zk.on_loop(self._on_brokers_changed)
            )
        )
        self._watches.append(
            await asyncio.to_thread(
                ChildrenWatch, self.zk.zk, TOPICS, self.zk.on_loop(self._on_topics_changed)
            )
        )
        self._watches.append(
            await asyncio.to_thread(
                ChildrenWatch,
                self.zk.zk,
                DELETE_TOPICS,
                self.zk.on_loop(self._on_deletions_changed),
            )
        )
        self.events.put(self._elect)

    async def shutdown(self) -> None:
        self.events.close()
        await self._resign()
        if self.liveness is not None:
            await self.liveness.close()
        await self.events.stop()

    def _on_session_state(self, state: KazooState) -> None:
        if state in (KazooState.SUSPENDED, KazooState.LOST) and self.active:
            # Without ZooKeeper this broker can no longer know it is the controller: stop now.
            log.warning(
                "broker %d: ZooKeeper session %s; resigning as controller", self.broker_id, state
            )
            self.active = False
            self.events.put(self._resign)
        elif state == KazooState.CONNECTED:
            self.events.put(self._elect)

    def _on_controller_znode(self, data: bytes | None, stat: Any, *_: Any) -> None:
        if data is None:
            self.events.put(self._elect)
        else:
            self.events.put(self._watch_controller)

    # ------------------------------------------------------------------ liveness

    def _probe_address(self, broker_id: int) -> tuple[str, int] | None:
        if self.active:
            registered = self.ctx.live_brokers.get(broker_id) or self.ctx.fenced.get(broker_id)
            return None if registered is None else (registered.info.host, registered.info.port)
        watched = self._watched_controller
        return watched[1] if watched is not None and watched[0] == broker_id else None

    def _on_probe_dead(self, broker_id: int) -> None:
        async def broker_died() -> None:
            await self._broker_died(broker_id)

        async def controller_died() -> None:
            await self._controller_died(broker_id)

        self.events.put(broker_died if self.active else controller_died)

    def _on_probe_back(self, broker_id: int) -> None:
        async def broker_back() -> None:
            await self._broker_back(broker_id)

        if self.active:
            self.events.put(broker_back)

    def _unwatch_all(self) -> None:
        if self.liveness is not None:
            for b in self.liveness.watching():
                self.liveness.unwatch(b)
        self._watched_controller = None

    async def _watch_controller(self) -> None:
        """Not the controller: probe the one that is, wherever it registered."""
        if self.liveness is None or self.active or self.events.closed:
            return
        controller = await self.zk.controller_id()
        watched = self._watched_controller
        if watched is not None and watched[0] == controller:
            return
        self._unwatch_all()
        if controller < 0 or controller == self.broker_id:
            return
        registered = (await self.zk.brokers()).get(controller)
        if registered is None or self.active:
            return
        self._watched_controller = (controller, (registered.info.host, registered.info.port))
        self.liveness.watch(controller)

    async def _controller_died(self, broker_id: int) -> None:
        watched = self._watched_controller
        if self.active or self.events.closed or watched is None or watched[0] != broker_id:
            return
        self._watched_controller = None
        if await self.zk.remove_dead_controller(broker_id):
            log.warning(
                "broker %d: the controller, broker %d, no longer listens; electing anew",
                self.broker_id,
                broker_id,
            )

    # ------------------------------------------------------------------ election

    async def _elect(self) -> None:
        if self.events.closed:
            return
        if self.active:
            if await self.zk.controller_id() == self.broker_id:
                return
            await self._resign()
        try:
            won = await self.zk.try_elect(self.broker_id)
        except Exception as exc:
            log.info("controller election failed: %s", exc)
            return
        if won is None:
            # Resigned on a disconnection that its ZooKeeper session outlived, this broker
            # still holds /controller, and nobody else can be elected: give it up, and the
            # election starts anew (Kafka resigns only on expiry; this broker resigns earlier,
            # since a disconnected controller cannot know whether it still is one).
            if await self.zk.controller_id() == self.broker_id and (
                await self.zk.remove_dead_controller(self.broker_id)
            ):
                log.warning(
                    "broker %d: /controller still named this broker after it resigned; "
                    "electing anew",
                    self.broker_id,
                )
            return
        epoch, version = won
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        self._unwatch_all()
        self._use_context(ControllerContext(epoch=epoch, epoch_zk_version=version))
        self.active = True
        try:
            await self._on_failover()
        except ControllerMovedError:
            raise
        except Exception:
            log.exception("controller failover failed; resigning")
            await self._resign()
            with contextlib.suppress(Exception):
                await self.zk.delete(CONTROLLER)
            return
        self.on_elected(epoch)

    async def _resign(self) -> None:
        was = self.active
        self.active = False
        for timer in self._timers:
            timer.cancel()
        self._timers = []
        await self.channel.shutdown()
        self._unwatch_all()
        if was:
            log.info("broker %d resigned as controller", self.broker_id)
            self.events.put(self._watch_controller)

    def _use_context(self, ctx: ControllerContext) -> None:
        """A new term as controller: fresh context, and the state machines over it."""
        self.ctx = ctx
        self.partitions = PartitionStateMachine(
            self.zk,
            ctx,
            self.broker_id,
            self.channel,
            lambda: bool(self.config()["unclean.leader.election.enable"]),
        )
        self.replicas = ReplicaStateMachine(self.partitions)
        self.reassignments = ReassignmentManager(
            self.zk, self.partitions, self._schedule_reassignment_step
        )
        self.deletions = TopicDeletionManager(self.zk, self.partitions, self._forget_topic)

    @property
    def epoch(self) -> int:
        return self.ctx.epoch

    # ------------------------------------------------------------------ failover

    async def _on_failover(self) -> None:
        ctx = self.ctx
        ctx.live_brokers = await self.zk.brokers()
        for broker_id in ctx.live_brokers:
            self.channel.add_broker(broker_id)
            self._watch(broker_id)
        for name in await self.zk.topic_names():
            topic = await self.zk.topic(name)
            if topic is None:
                continue
            ctx.topics[name] = topic
            for p, state in (await self.zk.partition_states(name)).items():
                ctx.states[TopicPartition(name, p)] = state
        ctx.topics_to_delete = set(await self.zk.topics_to_delete())
        self.reassignments.load()
        batch = self.partitions.batch()
        new = [tp for tp in ctx.partitions() if tp not in ctx.states]
        await self.partitions.init_partitions(new, batch)
        await self.partitions.elect_offline(batch)
        # Every broker learns everything from the new controller (and its epoch).
        for broker_id in ctx.live_brokers:
            for tp in ctx.partitions_on(broker_id):
                if tp in ctx.states:
                    self.partitions.add_leader_and_isr(batch, [broker_id], tp)
        self.partitions.add_update_metadata(batch, ctx.live_ids, ctx.partitions())
        self.partitions.send(batch)
        for tp in list(ctx.reassigning):
            self._schedule_reassignment_step(tp)
        if ctx.topics_to_delete:
            self.events.put(self._process_deletions)
        self._start_timers()

    def _start_timers(self) -> None:
        config = self.config()
        if config["auto.leader.rebalance.enable"]:
            interval = config["leader.imbalance.check.interval.seconds"]
            self._timers.append(
                asyncio.get_running_loop().create_task(
                    self.events.every(interval, self._auto_rebalance)
                )
            )
