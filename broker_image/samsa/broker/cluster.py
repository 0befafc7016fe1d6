"""ClusterMembership: what a broker does as a member of a ZooKeeper cluster.

Its ZooKeeper session, its registration (/brokers/ids/<id>, re-created after a session is
lost), its controller (active when elected), the channel through which it proposes ISR changes
to the controller, the fetchers of the partitions it follows, and the controlled shutdown that
moves its leaderships away before it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooState
from kio.static.primitive import i32, i64

from samsa.client import ClientSecurity, ConnectionPool
from samsa.config import KafkaConfig
from samsa.controller import KafkaController
from samsa.controller.channel import ControllerChannelManager
from samsa.metadata import BrokerInfo, MetadataCache
from samsa.metadata.zk_client import KafkaZkClient
from samsa.protocol import controller_apis as apis
from samsa.protocol.errors import ErrorCode
from samsa.replica import Partition, ReplicaManager
from samsa.replica.alter_partition import API_KEY as ALTER_PARTITION
from samsa.replica.alter_partition import VERSION as ALTER_PARTITION_VERSION
from samsa.replica.alter_partition import AlterPartitionManager
from samsa.replica.fetcher import FetcherConfig, ReplicaFetcherManager

log = logging.getLogger(__name__)

CONTROLLER_MOVE_CHECK_S = 0.1


class ClusterMembership:
    def __init__(
        self,
        config: KafkaConfig,
        broker: BrokerInfo,
        inter_broker: str,
        security: ClientSecurity | None = None,
    ) -> None:
        self.config = config
        # How this broker reaches the others' inter-broker listener (TLS, SASL).
        self.security = security
        self.broker = broker
        self.inter_broker = inter_broker
        timeout = config["zookeeper.connection.timeout.ms"]
        self.zk = KafkaZkClient(
            config["zookeeper.connect"],
            config["zookeeper.session.timeout.ms"],
            timeout,
            inter_broker_listener=inter_broker,
        )
        self.broker_epoch = -1
        self.registered = False
        self.registered_at = 0.0
        self.controller: KafkaController | None = None
        self.cache: MetadataCache | None = None
        self.replica_manager: ReplicaManager | None = None
        self.pool: ConnectionPool | None = None
        # AlterPartition has its own connections: on the fetchers' it would queue behind a
        # parked fetch (one request at a time per connection) for up to replica.fetch.wait.max.ms.
        self.controller_pool: ConnectionPool | None = None
        self.alter_partition: AlterPartitionManager | None = None
        self._session_lost = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.dynamic_config: Callable[[], KafkaConfig] = lambda: config

    async def connect(self) -> None:
        await self.zk.start()
        self.zk.add_state_listener(self._on_session_state)

    def address_of(self, broker_id: int) -> tuple[str, int] | None:
        assert self.cache is not None and self.replica_manager is not None
        broker = self.cache.broker(broker_id, self.inter_broker)
        if broker is not None:
            return broker.host, broker.port
        return self.replica_manager.known_brokers.get(broker_id)

    def attach(
        self,
        cache: MetadataCache,
        replica_manager: ReplicaManager,
        dynamic_config: Callable[[], KafkaConfig],
    ) -> None:
        """Give the replica manager its fetchers and its channel to the controller."""
        config = self.config
        self.dynamic_config = dynamic_config
        self.cache = cache
        self.replica_manager = replica_manager
        self.pool = ConnectionPool(
            self.address_of, client_id=f"broker-{self.broker.id}-fetcher", security=self.security
        )
        self.controller_pool = ConnectionPool(
            self.address_of,
            client_id=f"broker-{self.broker.id}-alter-partition",
            security=self.security,
        )
        replica_manager.fetcher_manager = ReplicaFetcherManager(
            FetcherConfig(
                broker_id=self.broker.id,
                max_wait_ms=config["replica.fetch.wait.max.ms"],
                min_bytes=config["replica.fetch.min.bytes"],
                max_bytes=config["replica.fetch.response.max.bytes"],
                partition_max_bytes=config["replica.fetch.max.bytes"],
                backoff_ms=config["replica.fetch.backoff.ms"],
                request_timeout_ms=config["replica.socket.timeout.ms"],
            ),
            self.pool,
            replica_manager.on_follower_appended,
            lambda: int(dynamic_config()["follower.replication.throttled.rate"]),
        )
        self.alter_partition = AlterPartitionManager(
            self.broker.id, lambda: self.broker_epoch, self._send_to_controller
        )
        submit = self.alter_partition.submit

        def alter_isr(partition: Partition, isr: tuple[int, ...]) -> None:
            replica_manager.on_isr_change(shrink=len(isr) < len(partition.isr))
            submit(partition, isr)

        replica_manager.alter_isr = alter_isr

    async def _send_to_controller(self, request: Any) -> Any:
        assert self.cache is not None and self.controller_pool is not None
        controller_id = self.cache.controller_id
        if controller_id < 0:
            raise ConnectionError("no controller is known yet")
        in_flight = asyncio.ensure_future(
            self.controller_pool.request(
                controller_id,
                ALTER_PARTITION,
                ALTER_PARTITION_VERSION,
                request,
                self.config["controller.socket.timeout.ms"] / 1000,
            )
        )
        # A controller that stops answering (paused, partitioned) would hold the ISR change
        # for the whole socket timeout, 30 s; as Kafka's broker-to-controller channel does, the
        # request is given up as soon as the metadata names another controller, and resent.
        while not in_flight.done():
            await asyncio.wait({in_flight}, timeout=CONTROLLER_MOVE_CHECK_S)
            if not in_flight.done() and self.cache.controller_id != controller_id:
                in_flight.cancel()
                self.controller_pool.drop(controller_id)
                raise ConnectionError(
                    f"the controller moved from broker {controller_id} to "
                    f"{self.cache.controller_id} while AlterPartition was in flight"
                )
        response = in_flight.result()
        if response.error_code == ErrorCode.not_controller:
            raise ConnectionError(f"broker {controller_id} is no longer the controller")
        return response

    async def register(self) -> None:
        # Taken before the znode exists: the controller may answer it before the call returns.
        started = time.monotonic()
        self.broker_epoch = await self.zk.register_broker(self.broker)
        self.registered = True
        self.registered_at = started
        log.info("broker %d registered (broker epoch %d)", self.broker.id, self.broker_epoch)

    async def start_controller(self) -> KafkaController:
        channel = ControllerChannelManager(
            ConnectionPool(
                self._registered_address,
                client_id=f"controller-{self.broker.id}",
                security=self.security,
            ),
            self.config["controller.socket.timeout.ms"] / 1000,
        )
        self.controller = KafkaController(self.zk, self.broker.id, channel, self.dynamic_config)
        await self.controller.startup()
        return self.controller

    def _registered_address(self, broker_id: int) -> tuple[str, int] | None:
        controller = self.controller
        if controller is not None:
            registered = controller.ctx.live_brokers.get(broker_id)
            if registered is not None:
                return registered.info.host, registered.info.port
        return None

    def _on_session_state(self, state: KazooState) -> None:
        if state == KazooState.LOST:
            self._session_lost = True
            self.registered = False
            log.warning("broker %d: ZooKeeper session lost", self.broker.id)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            task = asyncio.get_running_loop().create_task(self._reregister())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _reregister(self) -> None:
        try:
            await self.register()
        except Exception:
            log.exception("re-registering broker %d failed", self.broker.id)

    # ------------------------------------------------------------------ shutdown

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move this broker's leaderships; True once none remain."""
        if not self.config["controlled.shutdown.enable"] or self.cache is None:
            return False
        retries = self.config["controlled.shutdown.max.retries"]
        backoff = self.config["controlled.shutdown.retry.backoff.ms"] / 1000
        pool = ConnectionPool(
            self.address_of, client_id=f"broker-{self.broker.id}-shutdown", security=self.security
        )
        try:
            for attempt in range(retries + 1):
                controller_id = self.cache.controller_id
                try:
                    if controller_id < 0:
                        raise ConnectionError("no controller known")
                    response = await pool.request(
                        controller_id,
                        apis.CONTROLLED_SHUTDOWN,
                        apis.CONTROLLED_SHUTDOWN_VERSION,
                        apis.ControlledShutdownRequest(
                            broker_id=i32(self.broker.id), broker_epoch=i64(self.broker_epoch)
                        ),
                        self.config["controller.socket.timeout.ms"] / 1000,
                    )
                except Exception as exc:
                    log.info("controlled shutdown attempt %d failed: %s", attempt + 1, exc)
                    pool.drop(controller_id)
                    await asyncio.sleep(min(backoff, 1.0))
                    continue
                if response.error_code == ErrorCode.none and not response.remaining_partitions:
                    log.info("controlled shutdown of broker %d complete", self.broker.id)
                    return True
                log.info(
                    "controlled shutdown: %s, %d partitions still led here",
                    response.error_code.name,
                    len(response.remaining_partitions),
                )
                await asyncio.sleep(backoff if response.error_code == ErrorCode.none else 0.5)
            return False
        finally:
            await pool.close()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.controller is not None:
            await self.controller.shutdown()
        if self.alter_partition is not None:
            self.alter_partition.close()
        if self.replica_manager is not None and self.replica_manager.fetcher_manager is not None:
            await self.replica_manager.fetcher_manager.shutdown()
        for pool in (self.pool, self.controller_pool):
            if pool is not None:
                await pool.close()
        with contextlib.suppress(Exception):
            await self.zk.close()
