"""ProducerIdManager: the producer ids and epochs InitProducerId hands to idempotent
producers (Kafka's ProducerIdManager, and the non-transactional part of its
TransactionCoordinator.handleInitProducerId).

Ids come from blocks claimed through a ProducerIdBlockStore (the data directory standalone,
ZooKeeper in a cluster).  A producer that sends its current id and epoch (InitProducerId v3+,
KIP-360) gets the same id at the next epoch: the partitions then accept its batches from
sequence 0 and fence whatever it still had in flight under the old epoch as
INVALID_PRODUCER_EPOCH.  Kafka itself answers an idempotent producer's bump with a fresh id,
which leaves the old id's in-flight batches unfenced; the bump is what KIP-360 describes.
An id this broker cannot have handed out, or an exhausted epoch, gets a fresh id at epoch 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from samsa.metadata.producer_ids import (
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdBlockStore,
    ProducerIdsBlock,
)

log = logging.getLogger(__name__)

# Kafka bumps to a new producer id once the epoch reaches Short.MAX_VALUE - 1.
MAX_BUMPABLE_EPOCH = 2**15 - 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class ProducerIdManager:
    """Hands out producer ids from the current block, claiming the next when it runs out."""

    def __init__(
        self, broker_id: int, store: ProducerIdBlockStore, block_size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> None:
        self.broker_id = broker_id
        self._store = store
        self._block_size = block_size
        self._block: ProducerIdsBlock | None = None
        self._next_id = 0
        self._lock = asyncio.Lock()
        self._warmup: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Claim the first block in the background, so that the first InitProducerId does
        not wait for its durable write (Kafka claims one when it starts, too)."""
        self._warmup = asyncio.create_task(self._claim_first_block())

    async def _claim_first_block(self) -> None:
        try:
            async with self._lock:
                await self._ensure_block()
        except Exception as exc:  # the first InitProducerId tries again, and answers
            log.warning("cannot claim a block of producer ids yet: %s", exc)

    async def close(self) -> None:
        if self._warmup is not None:
            self._warmup.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._warmup

    async def _ensure_block(self) -> None:
        if self._block is None or self._next_id > self._block.last_producer_id:
            self._block = await self._store.claim_next_block(self.broker_id, self._block_size)
            self._next_id = self._block.first_producer_id

    async def generate_producer_id(self) -> int:
        async with self._lock:
            await self._ensure_block()
            producer_id = self._next_id
            self._next_id += 1
            return producer_id

    async def init_producer_id(
        self, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH
    ) -> tuple[int, int]:
        """(producer id, epoch) for an idempotent producer: a bump of the given id and epoch
        where that is possible, else a new id at epoch 0."""
        if producer_id >= 0 and 0 <= producer_epoch < MAX_BUMPABLE_EPOCH:
            async with self._lock:
                await self._ensure_block()
                # Below the next id to hand out: issued already, from this block or an earlier one.
                if producer_id < self._next_id:
                    return producer_id, producer_epoch + 1
        return await self.generate_producer_id(), 0
