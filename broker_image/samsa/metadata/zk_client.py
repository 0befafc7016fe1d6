"""KafkaZkClient: Kafka's ZooKeeper layout, read and written through kazoo from asyncio.

The znodes and their JSON are Apache Kafka's (ZooKeeper mode), so anyone who knows Kafka can
read a Samsa cluster with zkCli:

    /cluster/id                                   {"version":"1","id":...}
    /brokers/ids/<id>                             ephemeral registration, endpoints and rack
    /brokers/topics/<t>                           replica assignment and topic id
    /brokers/topics/<t>/partitions/<p>/state      leader, leader_epoch, isr, controller_epoch
    /controller                                   ephemeral: the elected controller
    /controller_epoch                             the controller epoch
    /config/topics/<t>, /config/brokers/<entity>  config overrides
    /admin/delete_topics/<t>                      topics to delete
    /latest_producer_id_block                     producer id blocks

kazoo runs its own threads: every call here uses kazoo's async API and is bridged to an
asyncio future, and watch callbacks are handed to the event loop, so nothing blocks the loop.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.protocol.states import ZnodeStat

from samsa.metadata.model import BrokerInfo, Endpoint
from samsa.wall_clock import wall_clock_ms

log = logging.getLogger(__name__)

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
DELETE_TOPICS = "/admin/delete_topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
PERSISTENT_PATHS = (
    "/brokers/ids",
    "/brokers/topics",
    "/brokers/seqid",
    "/config/topics",
    "/config/brokers",
    "/config/changes",
    "/admin/delete_topics",
    "/isr_change_notification",
)
# Kafka's LeaderAndIsr sentinels.
NO_LEADER = -1
LEADER_DURING_DELETE = -2


# ZooKeeper out of reach: the connection lost, the session expired, or the client closed.
# An operation that fails so may or may not have been applied.
ZOOKEEPER_LOST: tuple[type[Exception], ...] = (
    ConnectionLoss,
    SessionExpiredError,
    ConnectionClosedError,
)


class ControllerMovedError(Exception):
    """A controller write was fenced: another controller (a newer epoch) has taken over."""


def topic_id_to_zk(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def topic_id_from_zk(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _now_ms() -> str:
    return str(wall_clock_ms())


@dataclass(frozen=True)
class RegisteredBroker:
    info: BrokerInfo
    epoch: int  # the czxid of its registration: a restarted broker has a larger one


@dataclass(frozen=True)
class TopicZnode:
    name: str
    topic_id: uuid.UUID
    assignment: dict[int, list[int]]
    adding: dict[int, list[int]]
    removing: dict[int, list[int]]
    version: int  # znode version, for conditional updates


@dataclass(frozen=True)
class LeaderIsrAndEpoch:
    """/brokers/topics/<t>/partitions/<p>/state with its znode version (the partition epoch)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int
    leader_recovery_state: int = 0

    def to_json(self) -> bytes:
        return _dump(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
                "leader_recovery_state": self.leader_recovery_state,
            }
        )

    @classmethod
    def from_json(cls, data: bytes, stat: ZnodeStat) -> LeaderIsrAndEpoch:
        d = json.loads(data)
        return cls(
            int(d["leader"]),
            int(d["leader_epoch"]),
            tuple(int(r) for r in d["isr"]),
            int(d["controller_epoch"]),
            stat.version,
            int(d.get("leader_recovery_state", 0)),
        )


def broker_json(info: BrokerInfo) -> bytes:
    endpoints = info.endpoints or (Endpoint("PLAINTEXT", info.host, info.port),)
    value: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {e.listener: "PLAINTEXT" for e in endpoints},
        "endpoints": [f"{e.listener}://{e.host}:{e.port}" for e in endpoints],
        "jmx_port": -1,
        "port": info.port,
        "host": info.host,
        "version": 5,
        "timestamp": _now_ms(),
    }
    if info.rack:
        value["rack"] = info.rack
    return _dump(value)


def parse_broker(broker_id: int, data: bytes, inter_broker: str | None = None) -> BrokerInfo:
    """A registration; host and port are those of the ``inter_broker`` listener (else the
    first one)."""
    d = json.loads(data)
    endpoints = []
    for text in d.get("endpoints", []):
        name, _, address = text.partition("://")
        h, _, p = address.rpartition(":")
        endpoints.append(Endpoint(name, h.strip("[]"), int(p)))
    chosen = next((e for e in endpoints if e.listener == inter_broker), None)
    chosen = chosen or (endpoints[0] if endpoints else None)
    if chosen is None:
        return BrokerInfo(broker_id, d.get("host"), int(d.get("port", -1)), d.get("rack"))
    return BrokerInfo(broker_id, chosen.host, chosen.port, d.get("rack"), tuple(endpoints))


def topic_json(
    topic_id: uuid.UUID,
    assignment: dict[int, list[int]],
    adding: dict[int, list[int]] | None = None,
    removing: dict[int, list[int]] | None = None,
) -> bytes:
    return _dump(
        {
            "partitions": {str(p): r for p, r in sorted(assignment.items())},
            "topic_id": topic_id_to_zk(topic_id),
            "adding_replicas": {str(p): r for p, r in sorted((adding or {}).items())},
            "removing_replicas": {str(p): r for p, r in sorted((removing or {}).items())},
            "version": 3,
        }
    )


def parse_topic(name: str, data: bytes, stat: ZnodeStat) -> TopicZnode:
    d = json.loads(data)

    def table(key: str) -> dict[int, list[int]]:
        return {int(p): [int(r) for r in rs] for p, rs in (d.get(key) or {}).items()}

    raw_id = d.get("topic_id")
    # A topic written by a tool that predates topic ids gets a stable id from its name.
    topic_id = topic_id_from_zk(raw_id) if raw_id else uuid.uuid5(uuid.NAMESPACE_URL, name)
    return TopicZnode(
        name,
        topic_id,
        table("partitions"),
        table("adding_replicas"),
        table("removing_replicas"),
        stat.version,
    )


def config_json(configs: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": configs})


def parse_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {str(k): str(v) for k, v in json.loads(data).get("config", {}).items()}


class KafkaZkClient:
    """One ZooKeeper session for a broker, and Kafka's znodes over it."""

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
        inter_broker_listener: str | None = None,
    ) -> None:
        chroot_at = connect.find("/")
        self.inter_broker_listener = inter_broker_listener
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.zk = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 2},
            command_retry=None,
        )
        self.chroot = connect[chroot_at:] if chroot_at >= 0 else ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state_listeners: list[Callable[[KazooState], None]] = []

    # ---------------------------------------------------------------- session

    async def start(self) -> None:
        """Connect, retrying with backoff until ZooKeeper answers (logged, never fatal)."""
        self._loop = asyncio.get_running_loop()
        self.zk.add_listener(self._on_state)
        delay = 0.5
        while True:
            try:
                await asyncio.to_thread(self.zk.start, self.connection_timeout_ms / 1000)
                break
            except Exception as exc:
                log.warning(
                    "ZooKeeper at %s is not reachable (%s); retrying in %.1f s",
                    self.connect,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
        for path in PERSISTENT_PATHS:
            await self.ensure_path(path)

    async def close(self) -> None:
        try:
            await asyncio.to_thread(self.zk.stop)
            await asyncio.to_thread(self.zk.close)
        except Exception:
            log.debug("closing the ZooKeeper client failed", exc_info=True)

    def add_state_listener(self, listener: Callable[[KazooState], None]) -> None:
        """Called on the event loop with SUSPENDED, LOST or CONNECTED."""
        self._state_listeners.append(listener)

    def _on_state(self, state: KazooState) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        for listener in self._state_listeners:
            loop.call_soon_threadsafe(listener, state)

    @property
    def session_id(self) -> int | None:
        sid = self.zk.client_id
        return sid[0] if sid else None

    @property
    def connected(self) -> bool:
        return bool(self.zk.connected)

    def on_loop(self, fn: Callable[..., None]) -> Callable[..., Any]:
        """Wrap a watch callback (run by kazoo's thread) to run on the event loop instead."""
        loop = self._loop
        assert loop is not None

        def call(*args: Any) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(fn, *args)

        return call

    # ---------------------------------------------------------------- async bridge

    async def _wait(self, async_result: Any) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(value: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

        def done(result: Any) -> None:
            try:
                value = result.get_nowait()
            except BaseException as exc:
                loop.call_soon_threadsafe(settle, None, exc)
            else:
                loop.call_soon_threadsafe(settle, value, None)

        async_result.rawlink(done)
        return await future

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            result: tuple[bytes, ZnodeStat] = await self._wait(self.zk.get_async(path))
            return result
        except NoNodeError:
            return None

    async def children(self, path: str) -> list[str]:
        try:
            return list(await self._wait(self.zk.get_children_async(path)))
        except NoNodeError:
            return []

    async def exists(self, path: str) -> ZnodeStat | None:
        stat: ZnodeStat | None = await self._wait(self.zk.exists_async(path))
        return stat

    async def create(
        self,
        path: str,
        value: bytes = b"",
        ephemeral: bool = False,
        makepath: bool = False,
        sequence: bool = False,
    ) -> str:
        created: str = await self._wait(
            self.zk.create_async(
                path, value, ephemeral=ephemeral, makepath=makepath, sequence=sequence
            )
        )
        return created

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        stat: ZnodeStat = await self._wait(self.zk.set_async(path, value, version))
        return stat

    async def delete(self, path: str, recursive: bool = False) -> None:
        try:
            if recursive:
                await asyncio.to_thread(self.zk.delete, path, -1, True)
            else:
                await self._wait(self.zk.delete_async(path))
        except NoNodeError:
            pass

    async def ensure_path(self, path: str) -> None:
        with contextlib.suppress(NodeExistsError):
            await self.create(path, b"", makepath=True)

    async def set_or_create(self, path: str, value: bytes) -> None:
        try:
            await self.set(path, value)
        except NoNodeError:
            try:
                await self.create(path, value, makepath=True)
            except NodeExistsError:
                await self.set(path, value)

    # ---------------------------------------------------------------- cluster and brokers

    async def get_or_create_cluster_id(self, proposed: str) -> str:
        found = await self.get(CLUSTER_ID)
        if found is None:
            try:
                await self.create(
                    CLUSTER_ID, _dump({"version": "1", "id": proposed}), makepath=True
                )
                return proposed
            except NodeExistsError:
                found = await self.get(CLUSTER_ID)
        assert found is not None
        return str(json.loads(found[0])["id"])

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
        return int(json.loads(found[0]).get("brokerid", -1))

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
            tx.create(
                CONTROLLER,
                _dump({"version": 2, "brokerid": broker_id, "timestamp": _now_ms()}),
                ephemeral=True,
            )
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
