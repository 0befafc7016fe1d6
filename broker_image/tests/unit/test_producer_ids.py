"""Producer ids: unique across restarts (blocks recorded in the data directory), and
KIP-360 epoch bumps for a producer that gives its current id and epoch."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from samsa.coordinator.producer_id_manager import MAX_BUMPABLE_EPOCH, ProducerIdManager
from samsa.metadata.producer_ids import (
    LATEST_PRODUCER_ID_BLOCK_FILE,
    CorruptProducerIdBlockError,
    LocalProducerIdBlockStore,
    ProducerIdsBlock,
    ProducerIdsExhaustedError,
)


async def test_ids_are_unique_across_restarts(tmp_path: Path) -> None:
    first = ProducerIdManager(0, LocalProducerIdBlockStore(tmp_path), block_size=10)
    ids = [await first.generate_producer_id() for _ in range(13)]
    assert ids == list(range(13))
    # A restart skips what is left of the block in use: those ids may have been handed out.
    again = ProducerIdManager(0, LocalProducerIdBlockStore(tmp_path), block_size=10)
    assert await again.generate_producer_id() == 20
    recorded = json.loads((tmp_path / LATEST_PRODUCER_ID_BLOCK_FILE).read_text())
    assert recorded == {"version": 1, "broker": 0, "block_start": "20", "block_end": "29"}


async def test_concurrent_requests_get_distinct_ids(tmp_path: Path) -> None:
    manager = ProducerIdManager(3, LocalProducerIdBlockStore(tmp_path), block_size=7)
    ids = await asyncio.gather(*(manager.generate_producer_id() for _ in range(50)))
    assert sorted(ids) == list(range(50))


async def test_a_producer_giving_its_id_and_epoch_gets_the_next_epoch(tmp_path: Path) -> None:
    manager = ProducerIdManager(0, LocalProducerIdBlockStore(tmp_path))
    assert await manager.init_producer_id() == (0, 0)
    assert await manager.init_producer_id() == (1, 0)
    assert await manager.init_producer_id(1, 0) == (1, 1)
    assert await manager.init_producer_id(1, 1) == (1, 2)
    # An epoch about to run out: a new id instead.
    assert await manager.init_producer_id(1, MAX_BUMPABLE_EPOCH) == (2, 0)
    # An id never handed out is not bumped: it may belong to someone else later.
    assert await manager.init_producer_id(500, 3) == (3, 0)
    # After a restart, ids from the earlier blocks are still bumped.
    again = ProducerIdManager(0, LocalProducerIdBlockStore(tmp_path))
    assert await again.init_producer_id(2, 0) == (2, 1)
    assert await again.generate_producer_id() == 1000


def test_block_record_is_kafkas_znode_json() -> None:
    block = ProducerIdsBlock(2, 1000, 1000)
    assert json.loads(block.to_json()) == {
        "version": 1,
        "broker": 2,
        "block_start": "1000",
        "block_end": "1999",
    }
    assert ProducerIdsBlock.from_json(block.to_json()) == block
    assert block.following(5, 1000) == ProducerIdsBlock(5, 2000, 1000)
    with pytest.raises(ProducerIdsExhaustedError):
        ProducerIdsBlock(0, 2**63 - 1000, 1000).following(0, 1000)


async def test_a_damaged_block_record_is_an_error_not_a_reuse(tmp_path: Path) -> None:
    (tmp_path / LATEST_PRODUCER_ID_BLOCK_FILE).write_text('{"version": 1, "broker": 0}')
    manager = ProducerIdManager(0, LocalProducerIdBlockStore(tmp_path))
    with pytest.raises(CorruptProducerIdBlockError, match=LATEST_PRODUCER_ID_BLOCK_FILE):
        await manager.generate_producer_id()
