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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kazoo.client import KazooState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from samsa.controller.channel import ControllerChannelManager, RequestBatch
from samsa.controller.context import ControllerContext
from samsa.controller.election import (
    controlled_shutdown_leader,
    leader_imbalance,
    offline_partition_leader,
    preferred_leader,
    reassignment_leader,
)
from samsa.metadata.model import PartitionState, TopicPartition
from samsa.metadata.zk_client import (
    BROKER_IDS,
    CONTROLLER,
    DELETE_TOPICS,
    LEADER_DURING_DELETE,
    NO_LEADER,
    TOPICS,
    ControllerMovedError,
    KafkaZkClient,
    LeaderIsrAndEpoch,
    partition_state_path,
    topic_json,
    topic_path,
)
from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

Event = Callable[[], Awaitable[None]]
# Kafka's ElectionType.
PREFERRED = 0
UNCLEAN = 1
_ZK_OPS_PER_TRANSACTION = 500


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
        self.ctx = ControllerContext()
        self.active = False
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._timers: list[asyncio.Task[None]] = []
        self._watches: list[Any] = []
        self._closed = False
        # Observers (tests, metrics): called with the epoch when this broker becomes active.
        self.on_elected: Callable[[int], None] = lambda epoch: None

    # ------------------------------------------------------------------ lifecycle

    async def startup(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="controller")
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
            return
        epoch, version = won
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        self.ctx = ControllerContext(epoch=epoch, epoch_zk_version=version)
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
        if was:
            log.info("broker %d resigned as controller", self.broker_id)

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
        for name in await self.zk.topic_names():
            topic = await self.zk.topic(name)
            if topic is None:
                continue
            ctx.topics[name] = topic
            for p, state in (await self.zk.partition_states(name)).items():
                ctx.states[TopicPartition(name, p)] = state
        ctx.topics_to_delete = set(await self.zk.topics_to_delete())
        for name, topic in ctx.topics.items():
            for p, target in topic.adding.items():
                if target or topic.removing.get(p):
                    tp = TopicPartition(name, p)
                    ctx.reassigning[tp] = tuple(
                        r for r in topic.assignment[p] if r not in topic.removing.get(p, [])
                    )
        batch = self._batch()
        new = [tp for tp in ctx.partitions() if tp not in ctx.states]
        await self._init_partitions(new, batch)
        await self._elect_offline(batch)
        # Every broker learns everything from the new controller (and its epoch).
        for broker_id in ctx.live_brokers:
            for tp in ctx.partitions_on(broker_id):
                if tp in ctx.states:
                    self._add_leader_and_isr(batch, [broker_id], tp)
        self._add_update_metadata(batch, ctx.live_ids, ctx.partitions())
        self._send(batch)
        for tp in list(ctx.reassigning):
            self.enqueue(self._reassignment_step_event(tp))
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

    # ------------------------------------------------------------------ helpers

    def _batch(self) -> RequestBatch:
        return RequestBatch(self.broker_id, self.ctx.epoch)

    def _send(self, batch: RequestBatch) -> None:
        live = self.ctx.broker_infos()
        batch.send(self.channel, live, {b.id: b for b in live})

    def _add_leader_and_isr(
        self, batch: RequestBatch, brokers: Iterable[int], tp: TopicPartition, is_new: bool = False
    ) -> None:
        state = self.ctx.partition_state(tp)
        if state is None:
            return
        live = [b for b in brokers if b in self.ctx.live_brokers]
        batch.add_leader_and_isr(live, state, self.ctx.topics[tp.topic].topic_id, is_new)

    def _add_update_metadata(
        self, batch: RequestBatch, brokers: Iterable[int], tps: Iterable[TopicPartition]
    ) -> None:
        states = []
        for tp in tps:
            state = self.ctx.partition_state(tp)
            if state is not None:
                states.append((state, self.ctx.topics[tp.topic].topic_id))
        batch.add_update_metadata([b for b in brokers if b in self.ctx.live_brokers], states)

    async def _write_states(
        self, changes: dict[TopicPartition, tuple[int, int, tuple[int, ...]]], create: bool = False
    ) -> list[TopicPartition]:
        """Write (leader, leader_epoch, isr) of partitions, conditionally on their znode
        versions; returns those written (a partition changed by someone else is skipped and
        re-read)."""
        written: list[TopicPartition] = []
        items = list(changes.items())
        for start in range(0, len(items), _ZK_OPS_PER_TRANSACTION):
            chunk = items[start : start + _ZK_OPS_PER_TRANSACTION]
            ops = []
            for tp, (leader, leader_epoch, isr) in chunk:
                state = LeaderIsrAndEpoch(leader, leader_epoch, isr, self.ctx.epoch, -1)
                old = self.ctx.states.get(tp)
                if create or old is None:
                    ops.append(("create", partition_state_path(*tp), state.to_json(), -1))
                else:
                    ops.append(("set", partition_state_path(*tp), state.to_json(), old.zk_version))
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
            for (tp, (leader, leader_epoch, isr)), result in zip(chunk, results, strict=True):
                version = 0 if create or self.ctx.states.get(tp) is None else result.version
                self.ctx.states[tp] = LeaderIsrAndEpoch(
                    leader, leader_epoch, isr, self.ctx.epoch, version
                )
                written.append(tp)
        return written

    async def _write_one(
        self, tp: TopicPartition, change: tuple[int, int, tuple[int, ...]], create: bool
    ) -> list[TopicPartition]:
        leader, leader_epoch, isr = change
        state = LeaderIsrAndEpoch(leader, leader_epoch, isr, self.ctx.epoch, -1)
        old = self.ctx.states.get(tp)
        try:
            if create or old is None:
                results = await self.zk.controller_write(
                    self.ctx.epoch_zk_version,
                    [("create", partition_state_path(*tp), state.to_json(), -1)],
                )
                version = 0
            else:
                results = await self.zk.controller_write(
                    self.ctx.epoch_zk_version,
                    [("set", partition_state_path(*tp), state.to_json(), old.zk_version)],
                )
                version = results[0].version
        except ControllerMovedError:
            raise
        except Exception as exc:
            log.warning("writing the state of %s failed: %s; re-reading it", tp, exc)
            fresh = await self.zk.partition_state(*tp)
            if fresh is not None:
                self.ctx.states[tp] = fresh
            return []
        self.ctx.states[tp] = LeaderIsrAndEpoch(leader, leader_epoch, isr, self.ctx.epoch, version)
        return [tp]

    async def _unclean_allowed(self, topic: str) -> bool:
        configs = await self.zk.topic_config(topic)
        value = configs.get("unclean.leader.election.enable")
        if value is None:
            return bool(self.config()["unclean.leader.election.enable"])
        return value.lower() == "true"

    # ------------------------------------------------------------------ partitions

    async def _init_partitions(self, tps: list[TopicPartition], batch: RequestBatch) -> None:
        """New partitions: the first live replica leads, the live replicas are the ISR."""
        live = self.ctx.live_serving
        changes = {}
        for tp in tps:
            replicas = self.ctx.replicas(tp)
            live_replicas = tuple(r for r in replicas if r in live)
            if not live_replicas:
                log.warning("new partition %s has no live replica; it stays offline", tp)
                changes[tp] = (NO_LEADER, 0, tuple(replicas))
                continue
            changes[tp] = (live_replicas[0], 0, live_replicas)
        written = await self._write_states(changes, create=True)
        for tp in written:
            self._add_leader_and_isr(batch, self.ctx.replicas(tp), tp, is_new=True)
        self._add_update_metadata(batch, self.ctx.live_ids, written)

    async def _elect_offline(
        self, batch: RequestBatch, among: Iterable[TopicPartition] | None = None
    ) -> None:
        """Partitions without a live leader get one from their ISR (or, if the topic allows
        it, from any live replica)."""
        live = self.ctx.live_serving
        changes = {}
        candidates = among if among is not None else list(self.ctx.states)
        for tp in candidates:
            state = self.ctx.states.get(tp)
            if state is None or state.leader in live or tp.topic in self.ctx.topics_to_delete:
                continue
            replicas = self.ctx.replicas(tp)
            elected = offline_partition_leader(replicas, state.isr, live, False)
            if elected is None and await self._unclean_allowed(tp.topic):
                elected = offline_partition_leader(replicas, state.isr, live, True)
                if elected is not None:
                    log.warning("%s: unclean leader election of broker %d", tp, elected[0])
            if elected is None:
                if state.leader != NO_LEADER:
                    changes[tp] = (NO_LEADER, state.leader_epoch + 1, state.isr)
                    log.warning("%s has no live in-sync replica: offline", tp)
                continue
            changes[tp] = (elected[0], state.leader_epoch + 1, elected[1])
        written = await self._write_states(changes)
        for tp in written:
            self._add_leader_and_isr(batch, self.ctx.replicas(tp), tp)
        self._add_update_metadata(batch, self.ctx.live_ids, written)

    # ------------------------------------------------------------------ brokers

    def _on_brokers_changed(self, children: list[str]) -> None:
        self.enqueue(self._brokers_changed)

    async def _brokers_changed(self) -> None:
        self._require_active()
        ctx = self.ctx
        current = await self.zk.brokers()
        dead = {
            b
            for b, reg in ctx.live_brokers.items()
            if b not in current or current[b].epoch != reg.epoch
        }
        new = {b for b, reg in current.items() if b not in ctx.live_brokers or b in dead}
        if not dead and not new:
            return
        log.info("brokers: new %s, gone %s", sorted(new), sorted(dead - new))
        for b in dead:
            ctx.live_brokers.pop(b, None)
            ctx.shutting_down.discard(b)
            self.channel.remove_broker(b)
        batch = self._batch()
        if dead:
            await self._on_brokers_failed(dead, batch)
        for b in new:
            ctx.live_brokers[b] = current[b]
            self.channel.add_broker(b)
        if new:
            await self._elect_offline(batch)
            for b in new:
                for tp in ctx.partitions_on(b):
                    self._add_leader_and_isr(batch, [b], tp)
        self._add_update_metadata(batch, ctx.live_ids, ctx.partitions())
        self._send(batch)
        for tp in list(ctx.reassigning):
            self.enqueue(self._reassignment_step_event(tp))

    async def _on_brokers_failed(self, dead: set[int], batch: RequestBatch) -> None:
        led = [tp for tp, s in self.ctx.states.items() if s.leader in dead]
        await self._elect_offline(batch, led)
        # Followers that died leave the ISR now, so acks=all does not wait for them.
        changes = {}
        for tp, s in self.ctx.states.items():
            if s.leader in self.ctx.live_brokers and any(r in dead for r in s.isr):
                changes[tp] = (
                    s.leader,
                    s.leader_epoch + 1,
                    tuple(r for r in s.isr if r not in dead),
                )
        written = await self._write_states(changes)
        for tp in written:
            self._add_leader_and_isr(batch, self.ctx.replicas(tp), tp)
        self._add_update_metadata(batch, self.ctx.live_ids, written)

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        """Move leadership off a broker that is about to stop; returns the partitions it still
        leads (those with no other in-sync replica)."""
        future: asyncio.Future[tuple[ErrorCode, list[TopicPartition]]] = (
            asyncio.get_running_loop().create_future()
        )

        async def event() -> None:
            try:
                future.set_result(await self._controlled_shutdown(broker_id, broker_epoch))
            except NotController:
                future.set_result((ErrorCode.not_controller, []))
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                raise

        self.enqueue(event)
        if not self.active:
            return ErrorCode.not_controller, []
        return await future

    async def _controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        self._require_active()
        ctx = self.ctx
        registered = ctx.live_brokers.get(broker_id)
        if registered is None:
            return ErrorCode.broker_not_available, []
        if broker_epoch >= 0 and broker_epoch != registered.epoch:
            return ErrorCode.stale_broker_epoch, []
        ctx.shutting_down.add(broker_id)
        live = ctx.live_serving
        changes = {}
        for tp, s in ctx.states.items():
            replicas = ctx.replicas(tp)
            if broker_id not in replicas or len(replicas) <= 1:
                continue
            if s.leader == broker_id:
                elected = controlled_shutdown_leader(replicas, s.isr, live, ctx.shutting_down)
                if elected is not None:
                    changes[tp] = (elected[0], s.leader_epoch + 1, elected[1])
            elif broker_id in s.isr and len(s.isr) > 1:
                changes[tp] = (
                    s.leader,
                    s.leader_epoch + 1,
                    tuple(r for r in s.isr if r != broker_id),
                )
        batch = self._batch()
        written = await self._write_states(changes)
        for tp in written:
            self._add_leader_and_isr(batch, self.ctx.replicas(tp), tp)
        self._add_update_metadata(batch, ctx.live_ids, written)
        self._send(batch)
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

    # ------------------------------------------------------------------ topics

    def _on_topics_changed(self, children: list[str]) -> None:
        self.enqueue(self._topics_changed)

    async def _topics_changed(self) -> None:
        self._require_active()
        names = set(await self.zk.topic_names())
        known = set(self.ctx.topics)
        for gone in known - names:
            self._forget_topic(gone)
        batch = self._batch()
        new_tps: list[TopicPartition] = []
        for name in sorted(names - known):
            topic = await self.zk.topic(name)
            if topic is None:
                continue
            self.ctx.topics[name] = topic
            self._watch_topic(name)
            new_tps.extend(self.ctx.partitions(name))
        if new_tps:
            await self._init_partitions(new_tps, batch)
            self._send(batch)

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
                batch = self._batch()
                await self._init_partitions(added, batch)
                self._send(batch)

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
        ctx = self.ctx
        for name in await self.zk.topics_to_delete():
            topic = ctx.topics.get(name)
            if topic is None:
                topic = await self.zk.topic(name)
            if topic is None:
                await self.zk.delete(f"{DELETE_TOPICS}/{name}")
                continue
            ctx.topics_to_delete.add(name)
            batch = self._batch()
            replicas = {r for rs in topic.assignment.values() for r in rs}
            deleted_states = []
            for p in topic.assignment:
                tp = TopicPartition(name, p)
                s = ctx.states.get(tp)
                batch.add_stop_replica(
                    [r for r in replicas if r in ctx.live_brokers],
                    tp,
                    s.leader_epoch if s else -1,
                    True,
                )
                deleted_states.append(
                    (
                        PartitionState(
                            name,
                            p,
                            LEADER_DURING_DELETE,
                            s.leader_epoch if s else 0,
                            tuple(topic.assignment[p]),
                            s.isr if s else (),
                        ),
                        topic.topic_id,
                    )
                )
            batch.add_update_metadata(ctx.live_ids, deleted_states)
            self._send(batch)
            await self.zk.delete(topic_path(name), recursive=True)
            await self.zk.delete(f"/config/topics/{name}")
            await self.zk.delete(f"{DELETE_TOPICS}/{name}")
            self._forget_topic(name)
            ctx.topics_to_delete.discard(name)
            log.info("deleted topic %s", name)

    # ------------------------------------------------------------------ ISR changes

    async def alter_partition(
        self,
        broker_id: int,
        broker_epoch: int,
        items: list[tuple[TopicPartition, int, int, tuple[int, ...]]],
    ) -> tuple[ErrorCode, dict[TopicPartition, tuple[ErrorCode, LeaderIsrAndEpoch | None]]]:
        """A leader's ISR changes: (tp, leader_epoch, partition_epoch, new_isr) each."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def event() -> None:
            try:
                future.set_result(await self._alter_partition(broker_id, broker_epoch, items))
            except NotController:
                future.set_result((ErrorCode.not_controller, {}))
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                raise

        if not self.active:
            return ErrorCode.not_controller, {}
        self.enqueue(event)
        result: tuple[
            ErrorCode, dict[TopicPartition, tuple[ErrorCode, LeaderIsrAndEpoch | None]]
        ] = await future
        return result

    async def _alter_partition(
        self,
        broker_id: int,
        broker_epoch: int,
        items: list[tuple[TopicPartition, int, int, tuple[int, ...]]],
    ) -> tuple[ErrorCode, dict[TopicPartition, tuple[ErrorCode, LeaderIsrAndEpoch | None]]]:
        self._require_active()
        ctx = self.ctx
        registered = ctx.live_brokers.get(broker_id)
        if registered is None or (broker_epoch >= 0 and registered.epoch != broker_epoch):
            return ErrorCode.stale_broker_epoch, {}
        results: dict[TopicPartition, tuple[ErrorCode, LeaderIsrAndEpoch | None]] = {}
        changes = {}
        for tp, leader_epoch, partition_epoch, isr in items:
            s = ctx.states.get(tp)
            if s is None or tp.topic in ctx.topics_to_delete:
                results[tp] = (ErrorCode.unknown_topic_or_partition, None)
            elif s.leader != broker_id:
                results[tp] = (ErrorCode.not_leader_or_follower, None)
            elif leader_epoch != s.leader_epoch:
                results[tp] = (ErrorCode.fenced_leader_epoch, None)
            elif partition_epoch != s.zk_version:
                results[tp] = (ErrorCode.invalid_update_version, None)
            elif broker_id not in isr or any(r not in ctx.replicas(tp) for r in isr):
                results[tp] = (ErrorCode.invalid_request, None)
            elif any(r not in s.isr and r not in ctx.live_serving for r in isr):
                results[tp] = (ErrorCode.ineligible_replica, None)
            elif tuple(sorted(isr)) == tuple(sorted(s.isr)):
                results[tp] = (ErrorCode.none, s)
            else:
                changes[tp] = (s.leader, s.leader_epoch, tuple(isr))
        written = await self._write_states(changes)
        for tp in changes:
            if tp in written:
                results[tp] = (ErrorCode.none, ctx.states[tp])
                log.info("%s: ISR now %s", tp, list(ctx.states[tp].isr))
            else:
                results[tp] = (ErrorCode.invalid_update_version, None)
        if written:
            batch = self._batch()
            self._add_update_metadata(batch, ctx.live_ids, written)
            self._send(batch)
            for tp in written:
                if tp in ctx.reassigning:
                    self.enqueue(self._reassignment_step_event(tp))
        return ErrorCode.none, results

    # ------------------------------------------------------------------ elections

    async def elect_leaders(
        self, election_type: int, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        return await self._call(lambda: self._elect_leaders(election_type, tps))

    async def _call(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        if not self.active:
            raise NotController()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def event() -> None:
            try:
                future.set_result(await fn())
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                if not isinstance(exc, NotController):
                    raise

        self.enqueue(event)
        return await future

    async def _elect_leaders(
        self, election_type: int, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        self._require_active()
        ctx = self.ctx
        targets = (
            tps
            if tps is not None
            else [tp for tp in ctx.states if tp.topic not in ctx.topics_to_delete]
        )
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        changes = {}
        live = ctx.live_serving
        for tp in targets:
            s = ctx.states.get(tp)
            if s is None or tp.topic in ctx.topics_to_delete:
                results[tp] = (ErrorCode.unknown_topic_or_partition, None)
                continue
            replicas = ctx.replicas(tp)
            if election_type == PREFERRED:
                if replicas and s.leader == replicas[0]:
                    results[tp] = (ErrorCode.election_not_needed, None)
                    continue
                elected = preferred_leader(replicas, s.isr, live)
                if elected is None:
                    results[tp] = (
                        ErrorCode.preferred_leader_not_available,
                        f"The preferred leader of {tp} is not live and in sync",
                    )
                    continue
            elif election_type == UNCLEAN:
                if s.leader in live:
                    results[tp] = (ErrorCode.election_not_needed, None)
                    continue
                elected = offline_partition_leader(replicas, s.isr, live, True)
                if elected is None:
                    results[tp] = (
                        ErrorCode.eligible_leaders_not_available,
                        f"No live replica of {tp}",
                    )
                    continue
            else:
                results[tp] = (ErrorCode.invalid_request, f"Unknown election type {election_type}")
                continue
            changes[tp] = (elected[0], s.leader_epoch + 1, elected[1])
        written = await self._write_states(changes)
        batch = self._batch()
        for tp in changes:
            if tp in written:
                results[tp] = (ErrorCode.none, None)
                self._add_leader_and_isr(batch, ctx.replicas(tp), tp)
            else:
                results[tp] = (
                    ErrorCode.unknown_server_error,
                    "the partition changed meanwhile; retry",
                )
        self._add_update_metadata(batch, ctx.live_ids, written)
        self._send(batch)
        return results

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
        await self._elect_leaders(PREFERRED, tps)

    # ------------------------------------------------------------------ reassignment

    async def alter_reassignments(
        self, targets: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        return await self._call(lambda: self._alter_reassignments(targets))

    async def _alter_reassignments(
        self, targets: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        self._require_active()
        ctx = self.ctx
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        registered = set(await self.zk.brokers())
        for tp, target in targets.items():
            topic = ctx.topics.get(tp.topic)
            if (
                topic is None
                or tp.partition not in topic.assignment
                or tp.topic in ctx.topics_to_delete
            ):
                results[tp] = (ErrorCode.unknown_topic_or_partition, None)
                continue
            if target is None:
                if tp not in ctx.reassigning:
                    results[tp] = (
                        ErrorCode.no_reassignment_in_progress,
                        f"No reassignment of {tp} is in progress",
                    )
                    continue
                await self._cancel_reassignment(tp)
                results[tp] = (ErrorCode.none, None)
                continue
            if not target or len(set(target)) != len(target):
                results[tp] = (
                    ErrorCode.invalid_replica_assignment,
                    f"The target replicas of {tp} must be distinct and non-empty",
                )
                continue
            unknown = [r for r in target if r not in registered]
            if unknown:
                results[tp] = (
                    ErrorCode.invalid_replica_assignment,
                    f"Unknown brokers {unknown} in the target replicas of {tp}",
                )
                continue
            await self._start_reassignment(tp, tuple(target))
            results[tp] = (ErrorCode.none, None)
        return results

    async def _start_reassignment(self, tp: TopicPartition, target: tuple[int, ...]) -> None:
        ctx = self.ctx
        topic = ctx.topics[tp.topic]
        if tp in ctx.reassigning:
            original = tuple(
                r
                for r in topic.assignment[tp.partition]
                if r not in topic.adding.get(tp.partition, [])
            )
        else:
            original = tuple(topic.assignment[tp.partition])
        if tuple(target) == original and tp not in ctx.reassigning:
            return
        full = tuple(target) + tuple(r for r in original if r not in target)
        adding = [r for r in target if r not in original]
        removing = [r for r in original if r not in target]
        await self._write_topic(tp, full, adding, removing)
        ctx.reassigning[tp] = target
        log.info("reassigning %s from %s to %s", tp, list(original), list(target))
        # Bump the leader epoch so every replica takes the new replica set.
        s = ctx.states[tp]
        batch = self._batch()
        if await self._write_states({tp: (s.leader, s.leader_epoch + 1, s.isr)}):
            self._add_leader_and_isr(batch, full, tp, is_new=True)
            self._add_update_metadata(batch, ctx.live_ids, [tp])
            self._send(batch)
        self.enqueue(self._reassignment_step_event(tp))

    async def _write_topic(
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

    def _reassignment_step_event(self, tp: TopicPartition) -> Event:
        async def event() -> None:
            self._require_active()
            await self._reassignment_step(tp)

        return event

    async def _reassignment_step(self, tp: TopicPartition) -> None:
        """Finish a reassignment once every target replica is in the ISR: move leadership
        into the target set if needed, shrink the replicas to it, and delete the old ones."""
        ctx = self.ctx
        target = ctx.reassigning.get(tp)
        s = ctx.states.get(tp)
        if target is None or s is None:
            return
        if not all(r in s.isr for r in target):
            return
        topic = ctx.topics[tp.topic]
        removed = [r for r in topic.assignment[tp.partition] if r not in target]
        leader = s.leader
        isr = tuple(r for r in s.isr if r in target)
        if leader not in target or leader not in ctx.live_serving:
            elected = reassignment_leader(target, isr, ctx.live_serving)
            if elected is None:
                log.info("reassignment of %s waits for a live target replica to lead", tp)
                return
            leader = elected[0]
        await self._write_topic(tp, target, [], [])
        batch = self._batch()
        if await self._write_states({tp: (leader, s.leader_epoch + 1, isr)}):
            self._add_leader_and_isr(batch, target, tp)
            for r in removed:
                batch.add_stop_replica([r] if r in ctx.live_brokers else [], tp, -1, True)
            self._add_update_metadata(batch, ctx.live_ids, [tp])
            self._send(batch)
        del ctx.reassigning[tp]
        log.info("reassignment of %s done: replicas %s, leader %d", tp, list(target), leader)

    async def _cancel_reassignment(self, tp: TopicPartition) -> None:
        ctx = self.ctx
        topic = ctx.topics[tp.topic]
        adding = topic.adding.get(tp.partition, [])
        original = tuple(r for r in topic.assignment[tp.partition] if r not in adding)
        ctx.reassigning[tp] = original
        await self._reassignment_step(tp)
        batch = self._batch()
        for r in adding:
            batch.add_stop_replica([r] if r in ctx.live_brokers else [], tp, -1, True)
        self._send(batch)

    def list_reassignments(
        self, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """Ongoing reassignments: (replicas, adding, removing)."""
        if not self.active:
            raise NotController()
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


def _now_ms() -> int:
    return int(time.time() * 1000)
