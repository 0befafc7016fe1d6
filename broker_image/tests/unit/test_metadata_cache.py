"""MetadataCache.wait_for: a handler waits until the cache knows something, and no longer."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from samsa.metadata import MetadataCache
from samsa.metadata.model import PartitionState, TopicMetadata


def led(cache: MetadataCache, topic: str) -> bool:
    state = cache.partition_state(topic, 0)
    return state is not None and state.leader >= 0


def state(topic: str, leader: int) -> PartitionState:
    return PartitionState(topic, 0, leader, 0, (1, 2), (1, 2))


async def test_wait_for_returns_at_once_when_it_already_holds() -> None:
    cache = MetadataCache(1, "c")
    cache.apply_partition_states("t", uuid.uuid4(), [state("t", 1)], {}, False)
    async with asyncio.timeout(1):
        await cache.wait_for(lambda: led(cache, "t"))


async def test_wait_for_wakes_on_the_update_that_makes_it_hold() -> None:
    cache = MetadataCache(1, "c")
    topic_id = uuid.uuid4()
    waiting = asyncio.create_task(cache.wait_for(lambda: led(cache, "t")))
    await asyncio.sleep(0)
    cache.apply_partition_states("t", topic_id, [state("t", -1)], {}, False)
    await asyncio.sleep(0)
    assert not waiting.done(), "no leader yet"
    cache.apply_partition_states("t", topic_id, [state("t", 2)], {}, False)
    async with asyncio.timeout(1):
        await waiting


async def test_wait_for_is_bounded_by_the_caller() -> None:
    cache = MetadataCache(1, "c")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await cache.wait_for(lambda: led(cache, "t"))
    # The abandoned wait leaves nothing behind that a later change trips over.
    cache.apply_partition_states("t", uuid.uuid4(), [state("t", 1)], {}, False)
    assert led(cache, "t")


def test_replication_factor_of_a_topic_known_without_partition_0() -> None:
    """Found by the network fuzzer: an UpdateMetadata naming partitions of a topic other than
    0 made the next CreatePartitions of that topic fail with a KeyError (an unexpected error,
    its connection dropped without an answer)."""
    topic = TopicMetadata("t", uuid.uuid4(), {3: [0, 1], 5: [1, 0]})
    assert topic.replication_factor == 2
    assert TopicMetadata("empty", uuid.uuid4(), {}).replication_factor == 0
