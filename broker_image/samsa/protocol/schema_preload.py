"""The data path's request schemas, loaded ahead of their first request once the broker serves.

kio imports a request's schema the first time a version of it is read: 5 to 25 ms of dataclass
building per version, which the first Fetch and ListOffsets of a fresh broker's first consumer
used to wait for (py-spy of `python -m bench peers --quick`: most of the brokers' CPU while a
5 MB backlog is consumed). Start-up stays as lazy as before: the schemas load after the
listeners serve, one per turn of the event loop, so a request arriving meanwhile waits for one
import at most.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator

from samsa.protocol.messages import preload_request
from samsa.protocol.replica_fetch import VERSION as REPLICA_FETCH_VERSION

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3

# (API key, version): what librdkafka 2.x and Kafka 4's Java client send on the data path,
# and the followers' Fetch.
DATA_PATH = (
    (FETCH, 16),
    (LIST_OFFSETS, 7),
    (FETCH, 18),
    (LIST_OFFSETS, 11),
    (FETCH, REPLICA_FETCH_VERSION),
    (PRODUCE, 10),
    (PRODUCE, 12),
    (METADATA, 13),
)


def warm_up(
    loop: asyncio.AbstractEventLoop, requests: Iterable[tuple[int, int]] = DATA_PATH
) -> None:
    """Load each (API key, version)'s request schema, one per loop turn, in the background."""
    pending: Iterator[tuple[int, int]] = iter(requests)

    def step() -> None:
        request = next(pending, None)
        if request is not None:
            preload_request(*request)
            loop.call_soon(step)

    loop.call_soon(step)
