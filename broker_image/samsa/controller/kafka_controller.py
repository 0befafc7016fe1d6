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

This module owns the election, the event queue and the ZooKeeper watches; the decisions and
writes are the PartitionStateMachine's, the ReplicaStateMachine's, the ReassignmentManager's
and the TopicDeletionManager's, and broker_liveness says which brokers count as live.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kazoo.client import KazooState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from samsa.controller.broker_liveness import BrokerProber, LivenessPolicy, registration_changes
from samsa.controller.channel import ControllerChannelManager
from samsa.controller.context import ControllerContext
from samsa.controller.election import leader_imbalance
from samsa.controller.partition_state_machine import PREFERRED, UNCLEAN, PartitionStateMachine
from samsa.controller.reassignment import ReassignmentManager
from samsa.controller.replica_state_machine import IsrProposal, IsrResults, ReplicaStateMachine
from samsa.controller.topic_deletion import TopicDeletionManager
from samsa.metadata.model import TopicPartition
from samsa.metadata.zk_client import ControllerMovedError, KafkaZkClient
from samsa.metadata.zk_data import (
    BROKER_IDS,
    CONTROLLER,
    DELETE_TOPICS,
    TOPICS,
    RegisteredBroker,
    topic_path,
)
from samsa.metadata.zookeeper_client import ZOOKEEPER_LOST
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

Event = Callable[[], Awaitable[None]]
__all__ = ["PREFERRED", "UNCLEAN", "KafkaController", "NotController"]
_RAISE = object()


class NotController(Exception):
    pass


class KafkaController:
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
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._timers: list[asyncio.Task[None]] = []
        self._watches: list[Any] = []
        self._closed = False
        # Probes for brokers that died before their session expires: the other brokers while
        # active, the active controller while not.
        self.liveness: BrokerProber | None = None
        self._watched_controller: tuple[int, tuple[str, int]] | None = None
        # Observers (tests, metrics): called with the epoch when this broker becomes active.
        self.on_elected: Callable[[int], None] = lambda epoch: None

    # ------------------------------------------------------------------ lifecycle

    async def startup(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller")
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
        self.enqueue(self._elect)

    async def shutdown(self) -> None:
        self._closed = True
        await self._resign()
        if self.liveness is not None:
            await self.liveness.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def enqueue(self, event: Event) -> None:
        if not self._closed:
            self._events.put_nowait(event)

    async def _run(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await event()
            except ControllerMovedError:
                log.warning("broker %d: another controller took over; resigning", self.broker_id)
                await self._resign()
            except NotController:
                pass
            except ZOOKEEPER_LOST as exc:
                # The session listener resigns this controller; nothing else is to be done.
                log.warning(
                    "broker %d: ZooKeeper lost during controller event %s: %r",
                    self.broker_id,
                    getattr(event, "__name__", event),
                    exc,
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller event %s failed", getattr(event, "__name__", event))

    def _on_session_state(self, state: KazooState) -> None:
        if state in (KazooState.SUSPENDED, KazooState.LOST) and self.active:
            # Without ZooKeeper this broker can no longer know it is the controller: stop now.
            log.warning(
                "broker %d: ZooKeeper session %s; resigning as controller", self.broker_id, state
            )
            self.active = False
            self.enqueue(self._resign)
        elif state == KazooState.CONNECTED:
            self.enqueue(self._elect)

    def _on_controller_znode(self, data: bytes | None, stat: Any, *_: Any) -> None:
        if data is None:
            self.enqueue(self._elect)
        else:
            self.enqueue(self._watch_controller)

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

        self.enqueue(broker_died if self.active else controller_died)

    def _on_probe_back(self, broker_id: int) -> None:
        async def broker_back() -> None:
            await self._broker_back(broker_id)

        if self.active:
            self.enqueue(broker_back)

    def _unwatch_all(self) -> None:
        if self.liveness is not None:
            for b in self.liveness.watching():
                self.liveness.unwatch(b)
        self._watched_controller = None

    async def _watch_controller(self) -> None:
        """Not the controller: probe the one that is, wherever it registered."""
        if self.liveness is None or self.active or self._closed:
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
        if self.active or self._closed or watched is None or watched[0] != broker_id:
            return
        self._watched_controller = None
        if await self.zk.remove_dead_controller(broker_id):
            log.warning(
                "broker %d: the controller, broker %d, no longer listens; electing anew",
                self.broker_id,
                broker_id,
            )

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

    # ------------------------------------------------------------------ election

    async def _elect(self) -> None:
        if self._closed:
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
            self.enqueue(self._watch_controller)

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

    def _require_active(self) -> None:
        if not self.active:
            raise NotController()

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
            self.enqueue(self._process_deletions)
        self._start_timers()

    def _start_timers(self) -> None:
        config = self.config()
        if config["auto.leader.rebalance.enable"]:
            interval = config["leader.imbalance.check.interval.seconds"]
            self._timers.append(
                asyncio.get_running_loop().create_task(self._every(interval, self._auto_rebalance))
            )

    async def _every(self, seconds: float, event: Event) -> None:
        while True:
            await asyncio.sleep(seconds)
            self.enqueue(event)

    def _call_event(
        self, fn: Callable[[], Awaitable[Any]], not_controller: Any = _RAISE
    ) -> Awaitable[Any]:
        """Run ``fn`` as a controller event and return its result; a NotController answers
        ``not_controller`` if given, else raises."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def refuse() -> None:
            if not_controller is _RAISE:
                future.set_exception(NotController())
            else:
                future.set_result(not_controller)

        async def event() -> None:
            try:
                future.set_result(await fn())
            except NotController:
                refuse()
            except ZOOKEEPER_LOST:
                # Its writes may or may not have been made, and this broker is resigning: the
                # caller asks again, of whichever broker is elected.
                refuse()
                raise
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                raise

        self.enqueue(event)
        return future

    # ------------------------------------------------------------------ brokers

    def _on_brokers_changed(self, children: list[str]) -> None:
        self.enqueue(self._brokers_changed)

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

        result: tuple[ErrorCode, list[TopicPartition]] = await self._call_event(
            run, (ErrorCode.not_controller, [])
        )
        return result

    # ------------------------------------------------------------------ topics

    def _on_topics_changed(self, children: list[str]) -> None:
        self.enqueue(self._topics_changed)

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
            self.enqueue(self._partitions_changed_event(name))
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
        self.enqueue(self._process_deletions)

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

        result: tuple[ErrorCode, IsrResults] = await self._call_event(
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

        result: dict[TopicPartition, tuple[ErrorCode, str | None]] = await self._call_event(run)
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

        result: dict[TopicPartition, tuple[ErrorCode, str | None]] = await self._call_event(run)
        return result

    def _schedule_reassignment_step(self, tp: TopicPartition) -> None:
        async def event() -> None:
            self._require_active()
            await self.reassignments.step(tp)

        self.enqueue(event)

    def list_reassignments(
        self, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """Ongoing reassignments: (replicas, adding, removing)."""
        if not self.active:
            raise NotController()
        return self.reassignments.list(tps)
