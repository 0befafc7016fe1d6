"""AlterPartitionManager: a leader's ISR changes, sent to the controller (AlterPartition, 56).

Proposals are batched while one request is in flight. The controller commits each change to
ZooKeeper (or refuses it, e.g. after a newer leader epoch) and answers with the partition's
committed state, which goes back to the Partition.  A proposal that cannot be delivered is
dropped from the Partition, which proposes again at its next check.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import build, request_type
from samsa.replica.partition import Partition

log = logging.getLogger(__name__)

API_KEY = 56
VERSION = 2

# Sends a request to the current controller and returns its response; raises on trouble.
SendToController = Callable[[Any], Awaitable[Any]]


class AlterPartitionManager:
    def __init__(
        self, broker_id: int, broker_epoch: Callable[[], int], send: SendToController
    ) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self._send = send
        self._queued: dict[Any, tuple[Partition, tuple[int, ...]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def submit(self, partition: Partition, isr: tuple[int, ...]) -> None:
        if self._closed:
            partition.on_isr_failed()
            return
        self._queued[partition.tp] = (partition, isr)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._queued and not self._closed:
            batch, self._queued = self._queued, {}
            try:
                response = await self._send(self._request(batch))
            except Exception as exc:
                log.info("AlterPartition to the controller failed: %s", exc)
                for partition, _ in batch.values():
                    partition.on_isr_failed()
                await asyncio.sleep(0.1)
                continue
            self._apply(batch, response)

    def _request(self, batch: dict[Any, tuple[Partition, tuple[int, ...]]]) -> Any:
        by_topic: dict[Any, list[dict[str, Any]]] = {}
        for partition, isr in batch.values():
            by_topic.setdefault(partition.topic_id, []).append(_partition_data(partition, isr))
        return build(
            request_type(API_KEY, VERSION),
            {
                "broker_id": self.broker_id,
                "broker_epoch": self.broker_epoch(),
                "topics": [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
            },
        )

    def _apply(self, batch: dict[Any, tuple[Partition, tuple[int, ...]]], response: Any) -> None:
        by_id = {(p.topic_id, p.tp.partition): p for p, _ in batch.values()}
        answered = set()
        if response.error_code != ErrorCode.none:
            log.info("the controller refused AlterPartition: %s", response.error_code.name)
        for topic in response.topics:
            for item in topic.partitions:
                partition = by_id.get((topic.topic_id, item.partition_index))
                if partition is None:
                    continue
                answered.add(partition.tp)
                if item.error_code == ErrorCode.none:
                    partition.on_isr_committed(
                        tuple(item.isr), item.leader_epoch, item.partition_epoch
                    )
                else:
                    log.info("ISR change of %s refused: %s", partition.tp, item.error_code.name)
                    partition.on_isr_failed()
        for partition, _ in batch.values():
            if partition.tp not in answered:
                partition.on_isr_failed()

    def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()


def _partition_data(partition: Partition, isr: tuple[int, ...]) -> dict[str, Any]:
    return {
        "partition_index": partition.tp.partition,
        "leader_epoch": partition.leader_epoch,
        "new_isr": isr,
        "leader_recovery_state": 0,
        "partition_epoch": partition.partition_epoch,
    }
