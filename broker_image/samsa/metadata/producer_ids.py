"""Blocks of producer ids, and where the last block claimed is recorded (Kafka's
ProducerIdsBlock and the /latest_producer_id_block znode).

A broker claims a block of ids at a time and hands them out from memory.  The block is
recorded before any of its ids is used, so an id is never handed out twice, across restarts
and (in a cluster) across brokers.  Standalone, the record is the file
`latest-producer-id-block` in the data directory; in a cluster it is kept in
/latest_producer_id_block, claiming the next block with a versioned write (a compare-and-set,
retried when another broker got there first) as Kafka's ZkProducerIdManager does.  Both
hold the znode's JSON: {"version":1,"broker":0,"block_start":"0","block_end":"999"}.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from kazoo.exceptions import BadVersionError, NodeExistsError

from samsa.metadata.standalone_metadata_store import atomic_write
from samsa.metadata.zk_data import PRODUCER_ID_BLOCK

if TYPE_CHECKING:
    from samsa.metadata.zk_client import KafkaZkClient

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000
LATEST_PRODUCER_ID_BLOCK_FILE = "latest-producer-id-block"
_ZNODE_VERSION = 1
_LONG_MAX = 2**63 - 1


class ProducerIdsExhaustedError(RuntimeError):
    """Every 64-bit producer id has been handed out."""


class CorruptProducerIdBlockError(ValueError):
    """The record of the latest block does not parse; the message names it."""


@dataclass(frozen=True)
class ProducerIdsBlock:
    """Ids [first_producer_id, first_producer_id + size) claimed by one broker."""

    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    def following(self, broker_id: int, size: int) -> ProducerIdsBlock:
        """The block after this one, claimed by `broker_id`."""
        if self.last_producer_id > _LONG_MAX - size:
            raise ProducerIdsExhaustedError(
                f"have exhausted all producer ids (the last block ends at {self.last_producer_id})"
            )
        return ProducerIdsBlock(broker_id, self.last_producer_id + 1, size)

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": _ZNODE_VERSION,
                "broker": self.assigned_broker_id,
                "block_start": str(self.first_producer_id),
                "block_end": str(self.last_producer_id),
            }
        )

    @classmethod
    def from_json(cls, text: str, where: str = "producer id block") -> ProducerIdsBlock:
        try:
            data = json.loads(text)
            start, end = int(data["block_start"]), int(data["block_end"])
            broker = int(data["broker"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptProducerIdBlockError(f"{where}: cannot parse {text!r}: {exc}") from None
        if data.get("version") != _ZNODE_VERSION or start < 0 or end < start:
            raise CorruptProducerIdBlockError(f"{where}: not a valid block: {text!r}")
        return cls(broker, start, end - start + 1)


def first_block(broker_id: int, size: int) -> ProducerIdsBlock:
    return ProducerIdsBlock(broker_id, 0, size)


class ProducerIdBlockStore(Protocol):
    """Claims the next block of producer ids for a broker, durably, before returning it."""

    async def claim_next_block(self, broker_id: int, size: int) -> ProducerIdsBlock: ...


class LocalProducerIdBlockStore:
    """A standalone broker's record of its latest block, in its data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LATEST_PRODUCER_ID_BLOCK_FILE

    def latest_block(self) -> ProducerIdsBlock | None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        return ProducerIdsBlock.from_json(text, str(self.path))

    async def claim_next_block(self, broker_id: int, size: int) -> ProducerIdsBlock:
        # The write is fsynced: off the event loop, which serves everything else meanwhile.
        return await asyncio.to_thread(self._claim, broker_id, size)

    def _claim(self, broker_id: int, size: int) -> ProducerIdsBlock:
        latest = self.latest_block()
        block = latest.following(broker_id, size) if latest else first_block(broker_id, size)
        atomic_write(self.path, block.to_json() + "\n")
        log.info("claimed producer ids %d to %d", block.first_producer_id, block.last_producer_id)
        return block


class ZkProducerIdBlockStore:
    """A cluster's record of the latest block, in /latest_producer_id_block: the next block
    is claimed with a write conditional on the znode's version, retried when another broker
    claimed one meanwhile (Kafka's ZkProducerIdManager)."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk

    async def claim_next_block(self, broker_id: int, size: int) -> ProducerIdsBlock:
        while True:
            found = await self.zk.get(PRODUCER_ID_BLOCK)
            if found is None:
                block = first_block(broker_id, size)
                try:
                    await self.zk.create(PRODUCER_ID_BLOCK, block.to_json().encode())
                except NodeExistsError:
                    continue
            else:
                data, stat = found
                block = ProducerIdsBlock.from_json(data.decode(), PRODUCER_ID_BLOCK).following(
                    broker_id, size
                )
                try:
                    await self.zk.set(PRODUCER_ID_BLOCK, block.to_json().encode(), stat.version)
                except BadVersionError:
                    continue
            log.info(
                "claimed producer ids %d to %d", block.first_producer_id, block.last_producer_id
            )
            return block
