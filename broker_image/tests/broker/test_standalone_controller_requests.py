"""A standalone broker is its own controller: the controller-to-broker requests (LeaderAndIsr,
UpdateMetadata, StopReplica) from the network are refused with STALE_CONTROLLER_EPOCH and
change nothing, whatever epoch they claim. Before, an UpdateMetadata naming no live broker,
from any client, left the broker's metadata without itself, and new clients could not find
any partition (found by the mutated-frame test)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka_support import Wire, create_topic, produce

from samsa.protocol import controller_apis as apis
from samsa.protocol.messages import build, decode_response, encode_request, request_type
from samsa.testing import InProcessBroker

STALE_CONTROLLER_EPOCH = 11
EPOCH = 1_000_000  # newer than any real controller's


@pytest.fixture
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    with InProcessBroker(tmp_path_factory.mktemp("samsa")) as b:
        yield b


REQUESTS = {
    "UpdateMetadata": (
        apis.UPDATE_METADATA,
        apis.UPDATE_METADATA_VERSION,
        {"controller_id": 7, "controller_epoch": EPOCH, "topic_states": [], "live_brokers": []},
    ),
    "LeaderAndIsr": (
        apis.LEADER_AND_ISR,
        apis.LEADER_AND_ISR_VERSION,
        {
            "controller_id": 7,
            "controller_epoch": EPOCH,
            "type": 0,
            "topic_states": [],
            "live_leaders": [],
        },
    ),
    "StopReplica": (
        apis.STOP_REPLICA,
        apis.STOP_REPLICA_VERSION,
        {"controller_id": 7, "controller_epoch": EPOCH, "topic_states": []},
    ),
}


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_a_standalone_broker_takes_no_controller_request(
    broker: InProcessBroker, name: str
) -> None:
    topic = f"kept-{name.lower()}"
    create_topic(broker.bootstrap_servers, topic)
    key, version, body = REQUESTS[name]
    with Wire(broker.port) as wire:
        wire.send(
            encode_request(key, version, 1, "intruder", build(request_type(key, version), body))
        )
        _, answer = decode_response(key, version, wire.read_frame())
    assert int(answer.error_code.value) == STALE_CONTROLLER_EPOCH
    # A new client still finds the broker and the partition, and writes to it.
    assert [d.offset for d in produce(broker.bootstrap_servers, topic, [b"after"])] == [0]
