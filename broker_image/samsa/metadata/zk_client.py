"""KafkaZkClient: Kafka's znodes (samsa.metadata.zk_data) read and written over one session.

The operations of a broker and of its controller: the cluster id, broker registration, the
controller election and its fenced writes (every one a transaction checking that
/controller_epoch is still at the version the controller set), topics with their
assignments, configs and partition states.  The session itself and the async bridge to
kazoo are ZooKeeperClient's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from samsa.metadata.model import BrokerInfo
from samsa.metadata.zk_data import (
    BROKER_IDS,
    CLUSTER_ID,
    CONFIG_BROKERS,
    CONFIG_TOPICS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    DELETE_TOPICS,
    PERSISTENT_PATHS,
    TOPICS,
    LeaderIsrAndEpoch,
    RegisteredBroker,
    TopicZnode,
    broker_json,
    cluster_id_json,
    config_json,
    controller_json,
    parse_broker,
    parse_cluster_id,
    parse_config,
    parse_controller_id,
    parse_topic,
    partition_state_path,
    topic_json,
    topic_path,
)
from samsa.metadata.zookeeper_client import ZooKeeperClient

log = logging.getLogger(__name__)


class ControllerMovedError(Exception):
    """A controller write was fenced: another controller (a newer epoch) has taken over."""


class KafkaZkClient(ZooKeeperClient):
    """One ZooKeeper session for a broker, and Kafka's znodes over it."""

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
        inter_broker_listener: str | None = None,
    ) -> None:
        super().__init__(connect, session_timeout_ms, connection_timeout_ms)
        self.inter_broker_listener = inter_broker_listener

    async def start(self) -> None:
        """Connect (see ZooKeeperClient.start), then create Kafka's top-level znodes."""
        await super().start()
        for path in PERSISTENT_PATHS:
            await self.ensure_path(path)

    # ---------------------------------------------------------------- cluster and brokers

    async def get_or_create_cluster_id(self, proposed: str) -> str:
        found = await self.get(CLUSTER_ID)
        if found is None:
            try:
                await self.create(CLUSTER_ID, cluster_id_json(proposed), makepath=True)
                return proposed
            except NodeExistsError:
                found = await self.get(CLUSTER_ID)
        assert found is not None
        return parse_cluster_id(found[0])

    async def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral registration; returns the broker epoch (its czxid).

        A registration left by this broker's previous session is waited out (it goes when
        that session expires), as Kafka does, rather than stolen."""
        path = f"{BROKER_IDS}/{info.id}"
        deadline = time.monotonic() + self.session_timeout_ms / 1000 * 2 + 5
        while True:
            try:
                await self.create(path, broker_json(info), ephemeral=True)
                break
            except NodeExistsError:
                found = await self.get(path)
                if found is not None and found[1].ephemeralOwner == self.session_id:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"broker id {info.id} is registered by another live broker"
                    ) from None
                log.info("waiting for the old registration of broker %d to expire", info.id)
                await asyncio.sleep(1.0)
        stat = await self.exists(path)
        assert stat is not None
        return int(stat.czxid)

    async def brokers(self) -> dict[int, RegisteredBroker]:
        out: dict[int, RegisteredBroker] = {}
        for child in await self.children(BROKER_IDS):
            if not child.isdigit():
                continue
            found = await self.get(f"{BROKER_IDS}/{child}")
            if found is None:
                continue
            data, stat = found
            out[int(child)] = RegisteredBroker(
                parse_broker(int(child), data, self.inter_broker_listener), int(stat.czxid)
            )
        return out

    # ---------------------------------------------------------------- controller

    async def controller_id(self) -> int:
        found = await self.get(CONTROLLER)
        if found is None:
            return -1
        return parse_controller_id(found[0])

    async def controller_epoch(self) -> tuple[int, int]:
        """(epoch, znode version); (0, -1) before the first election."""
        found = await self.get(CONTROLLER_EPOCH)
        if found is None:
            return 0, -1
        return int(found[0] or b"0"), found[1].version

    async def try_elect(self, broker_id: int) -> tuple[int, int] | None:
        """Become controller: create /controller and bump /controller_epoch in one transaction.

        Returns (epoch, epoch znode version), or None if another broker is controller."""
        while True:
            epoch, version = await self.controller_epoch()
            if version < 0:
                with contextlib.suppress(NodeExistsError):
                    await self.create(CONTROLLER_EPOCH, b"0")
                continue
            tx = self.zk.transaction()
            tx.create(CONTROLLER, controller_json(broker_id), ephemeral=True)
            tx.set_data(CONTROLLER_EPOCH, str(epoch + 1).encode(), version)
            results = await self._wait(tx.commit_async())
            if isinstance(results[0], NodeExistsError):
                return None
            if isinstance(results[1], BadVersionError):
                continue  # another election bumped the epoch meanwhile: read it again
            for r in results:
                if isinstance(r, Exception):
                    raise r
            return epoch + 1, results[1].version

    async def remove_dead_controller(self, broker_id: int) -> bool:
        """Delete /controller if ``broker_id`` still holds it, so that a live broker is elected
        without waiting for the dead one's session to expire.  Conditional on /controller_epoch:
        a controller elected meanwhile is never removed.  True if it was removed."""
        _, version = await self.controller_epoch()
        if version < 0 or await self.controller_id() != broker_id:
            return False
        tx = self.zk.transaction()
        tx.check(CONTROLLER_EPOCH, version)
        tx.delete(CONTROLLER)
        results = await self._wait(tx.commit_async())
        return not any(isinstance(r, Exception) for r in results)

    async def controller_write(
        self, epoch_zk_version: int, ops: list[tuple[str, str, bytes, int]]
    ) -> list[Any]:
        """A controller's writes, fenced: they apply only while /controller_epoch is still at
        the version this controller set. ops are ("set"|"create"|"delete", path, data, version).
        Raises ControllerMovedError when fenced, or the first operation's error."""
        tx = self.zk.transaction()
        tx.check(CONTROLLER_EPOCH, epoch_zk_version)
        for op, path, data, version in ops:
            if op == "set":
                tx.set_data(path, data, version)
            elif op == "create":
                tx.create(path, data)
            elif op == "delete":
                tx.delete(path, version)
            else:
                raise ValueError(op)
        results = await self._wait(tx.commit_async())
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise ControllerMovedError("the controller epoch moved on")
        for r in results[1:]:
            if isinstance(r, Exception) and not _rolled_back(r):
                raise r
        return list(results[1:])

    # ---------------------------------------------------------------- topics

    async def topic_names(self) -> list[str]:
        return sorted(await self.children(TOPICS))

    async def topic(self, name: str) -> TopicZnode | None:
        found = await self.get(topic_path(name))
        if found is None or not found[0]:
            return None
        return parse_topic(name, found[0], found[1])

    async def create_topic(
        self,
        name: str,
        topic_id: uuid.UUID,
        assignment: dict[int, list[int]],
        configs: dict[str, str],
    ) -> None:
        """Config first, then the assignment that makes the topic exist, as Kafka's
        AdminZkClient does: a broker that sees the topic also sees its config."""
        await self.set_or_create(f"{CONFIG_TOPICS}/{name}", config_json(configs))
        await self.create(topic_path(name), topic_json(topic_id, assignment), makepath=True)

    async def set_topic_assignment(
        self,
        topic: TopicZnode,
        assignment: dict[int, list[int]],
        adding: dict[int, list[int]] | None = None,
        removing: dict[int, list[int]] | None = None,
    ) -> None:
        await self.set(
            topic_path(topic.name),
            topic_json(topic.topic_id, assignment, adding, removing),
            topic.version,
        )

    async def topic_config(self, name: str) -> dict[str, str]:
        found = await self.get(f"{CONFIG_TOPICS}/{name}")
        return parse_config(found[0] if found else None)

    async def set_topic_config(self, name: str, configs: dict[str, str]) -> None:
        await self.set_or_create(f"{CONFIG_TOPICS}/{name}", config_json(configs))

    async def broker_config(self, entity: str) -> dict[str, str]:
        found = await self.get(f"{CONFIG_BROKERS}/{entity}")
        return parse_config(found[0] if found else None)

    async def set_broker_config(self, entity: str, configs: dict[str, str]) -> None:
        await self.set_or_create(f"{CONFIG_BROKERS}/{entity}", config_json(configs))

    async def mark_topic_for_deletion(self, name: str) -> None:
        with contextlib.suppress(NodeExistsError):
            await self.create(f"{DELETE_TOPICS}/{name}", b"", makepath=True)

    async def topics_to_delete(self) -> list[str]:
        return sorted(await self.children(DELETE_TOPICS))

    async def partition_state(self, topic: str, partition: int) -> LeaderIsrAndEpoch | None:
        found = await self.get(partition_state_path(topic, partition))
        if found is None or not found[0]:
            return None
        return LeaderIsrAndEpoch.from_json(found[0], found[1])

    async def partition_states(self, topic: str) -> dict[int, LeaderIsrAndEpoch]:
        out = {}
        for child in await self.children(f"{TOPICS}/{topic}/partitions"):
            if child.isdigit():
                state = await self.partition_state(topic, int(child))
                if state is not None:
                    out[int(child)] = state
        return out


def _rolled_back(error: Exception) -> bool:
    """In a failed transaction, the operations other than the failing one report that they
    were rolled back (before it) or not run (after it)."""
    return type(error).__name__ in ("RolledBackError", "RuntimeInconsistency")
