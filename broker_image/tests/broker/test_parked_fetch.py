"""A parked fetch is woken by the records that arrive while it is being parked: a Produce read
in the same turn of the broker's loop as the Fetch, just after it, answers that Fetch at once,
not when its wait (fetch.max.wait.ms, or a follower's replica.fetch.wait.max.ms) runs out."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka_support import NONE, Wire, create_topic, fetch_request, produce_request

from samsa.protocol.record_batch import build_batch
from samsa.testing import InProcessBroker

# Far longer than the test waits for the answer: answered only at the end of it is a failure.
MAX_WAIT_MS = 120_000


@pytest.fixture
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    with InProcessBroker(tmp_path_factory.mktemp("samsa")) as b:
        yield b


def test_a_produce_read_right_after_a_fetch_wakes_it(broker: InProcessBroker) -> None:
    create_topic(broker.bootstrap_servers, "parked")
    request = fetch_request("parked", [0], 1 << 20, max_wait_ms=MAX_WAIT_MS, min_bytes=1)
    with Wire(broker.port, timeout=30) as fetcher, Wire(broker.port, timeout=30) as producer:
        # A round trip each first, so both connections are set up before the loop is held.
        assert fetcher.request(1, 11, fetch_request("parked", [0], 1 << 20)).error_code == 0
        with broker.loop_held():
            fetched = fetcher.send_request(1, 11, request)
            produced = producer.send_request(
                0, 9, produce_request("parked", {0: build_batch([(b"k", b"v", [])])})
            )
        answer = producer.read_response(0, 9, produced)
        (part,) = answer.responses[0].partition_responses
        assert (part.error_code.value, part.base_offset) == (NONE, 0)
        # Within the socket's 30 s timeout, a quarter of the fetch's wait.
        response = fetcher.read_response(1, 11, fetched)
    (partition,) = response.responses[0].partitions
    assert partition.error_code.value == NONE
    assert partition.high_watermark == 1
    assert b"v" in bytes(partition.records)
