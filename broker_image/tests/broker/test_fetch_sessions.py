"""Fetch sessions (KIP-227) on the wire: a follower's session is answered with only the
partitions that have news for it, and a session unknown or out of step is refused with
Kafka's errors; consumers get no session."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from kafka_support import Wire, create_topic, fetch_request, raw_produce

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import encode_request
from samsa.protocol.record_batch import build_batch
from samsa.protocol.replica_fetch import VERSION, encode_replica_fetch
from samsa.testing import InProcessBroker

TOPIC = "sessions"
PARTITIONS = 8
FOLLOWER = 1
_correlation = itertools.count(1)


@pytest.fixture
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    with InProcessBroker(tmp_path_factory.mktemp("samsa")) as b:
        create_topic(b.bootstrap_servers, TOPIC, PARTITIONS)
        yield b


def follower_fetch(
    wire: Wire,
    session_id: int,
    epoch: int,
    offsets: Mapping[int, int],
    forgotten: Sequence[int] = (),
) -> Any:
    """A follower's Fetch v12 of `offsets` (partition -> fetch offset), answered at once."""
    topics = [(TOPIC, [(p, -1, o, -1, -1, 1 << 20) for p, o in offsets.items()])]
    body = encode_replica_fetch(
        FOLLOWER,
        0,
        0,
        1 << 20,
        topics if offsets else [],
        session_id,
        epoch,
        [(TOPIC, list(forgotten))] if forgotten else [],
    )
    correlation_id = next(_correlation)
    wire.send(encode_request(1, VERSION, correlation_id, "broker-1-fetcher", body))
    return wire.read_response(1, VERSION, correlation_id)


def answered(response: Any) -> list[tuple[int, int, bool]]:
    """(partition, high watermark, records or not) of each partition in an answer."""
    return sorted(
        (p.partition_index, p.high_watermark, bool(p.records))
        for topic in response.responses
        for p in topic.partitions
    )


def append(wire: Wire, *partitions: int) -> None:
    raw_produce(wire, TOPIC, {p: build_batch([(None, b"v", [])]) for p in partitions})


def test_a_session_answers_only_the_partitions_with_news(broker: InProcessBroker) -> None:
    with Wire(broker.port) as wire:
        first = follower_fetch(wire, 0, 0, {p: 0 for p in range(PARTITIONS)})
        assert first.error_code.value == 0 and first.session_id != 0
        assert answered(first) == [(p, 0, False) for p in range(PARTITIONS)]
        session = first.session_id
        # Nothing new: an incremental fetch that names nothing gets nothing.
        assert answered(follower_fetch(wire, session, 1, {})) == []
        append(wire, 3)
        news = follower_fetch(wire, session, 2, {})
        assert news.session_id == session
        assert answered(news) == [(3, 1, True)]
        # The follower has it: its new fetch offset brings nothing back.
        assert answered(follower_fetch(wire, session, 3, {3: 1})) == []
        # A partition forgotten is read no more; the others still are.
        assert answered(follower_fetch(wire, session, 4, {}, forgotten=[3])) == []
        append(wire, 3, 5)
        assert answered(follower_fetch(wire, session, 5, {})) == [(5, 1, True)]
        # Named again, it is told everything, as in a full fetch (5 moves on meanwhile).
        assert answered(follower_fetch(wire, session, 6, {3: 1, 5: 1})) == [(3, 2, True)]


def test_a_session_unknown_or_out_of_step_is_refused(broker: InProcessBroker) -> None:
    with Wire(broker.port) as wire:
        session = follower_fetch(wire, 0, 0, {0: 0}).session_id
        assert follower_fetch(wire, session, 1, {}).error_code.value == 0
        stale = follower_fetch(wire, session, 1, {})
        assert stale.error_code.value == ErrorCode.invalid_fetch_session_epoch.value
        assert answered(stale) == []
        unknown = follower_fetch(wire, session + 1, 1, {})
        assert unknown.error_code.value == ErrorCode.fetch_session_id_not_found.value
        # Closed by the final epoch, then gone.
        closed = follower_fetch(wire, session, -1, {0: 0})
        assert (closed.error_code.value, closed.session_id) == (0, 0)
        gone = follower_fetch(wire, session, 2, {})
        assert gone.error_code.value == ErrorCode.fetch_session_id_not_found.value


def test_a_consumer_gets_no_session(broker: InProcessBroker) -> None:
    with Wire(broker.port) as wire:
        ask = dataclasses.replace(fetch_request(TOPIC, [0], 1 << 20), session_epoch=0)
        response = wire.request(1, 11, ask)
        assert (response.error_code.value, response.session_id) == (0, 0)
        assert len(response.responses[0].partitions) == 1
