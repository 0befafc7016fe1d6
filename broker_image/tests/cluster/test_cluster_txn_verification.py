"""Transaction partition verification (KIP-890 part 1) across a 3-broker cluster: a partition
leader that is not the transactional id's coordinator asks it over the inter-broker connections
(AddPartitionsToTxn v4 verify-only). A partition added to the transaction takes its batch; one
not added gets Kafka's error for the Produce version, and nothing is appended to it."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest
from cluster_support import ClusterFactory, create_topic, leader, wait_until
from kafka_support import Wire, produce_request
from test_cluster_txn_coordinator import CONFIG, coordinator_of
from txn_support import READ_UNCOMMITTED, list_offset, txn_batch

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import build, request_type

pytestmark = pytest.mark.timeout(300)
E = ErrorCode


def call(wire: Wire, key: int, version: int, body: dict[str, Any]) -> Any:
    return wire.request(key, version, build(request_type(key, version), body))


def produce_at(wire: Wire, version: int, txn_id: str, topic: str, p: int, data: bytes) -> ErrorCode:
    request = dataclasses.replace(
        produce_request(topic, {p: data}, acks=-1, version=version), transactional_id=txn_id
    )
    (r,) = wire.request(0, version, request).responses[0].partition_responses
    return E(r.error_code)


def test_a_leader_asks_the_coordinator_on_another_broker(start_cluster: ClusterFactory) -> None:
    cluster = start_cluster(3, **CONFIG)
    topic = f"verify-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, partitions=6, rf=3)
    txn = f"verify-{uuid.uuid4().hex[:6]}"
    coordinator = coordinator_of(cluster, txn, [0, 1, 2])
    # Partitions led elsewhere than the coordinator: their leaders must ask over the network.
    remote = [p for p in range(6) if leader(cluster, topic, p) != coordinator]
    assert len(remote) >= 2, "every partition is led by the coordinator"
    added, stray = remote[0], remote[1]

    with Wire(cluster.broker(coordinator).port, timeout=10) as wire:

        def initialised() -> Any:
            r = call(
                wire,
                22,
                4,
                {
                    "transactional_id": txn,
                    "transaction_timeout": 60_000,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )
            return r if r.error_code == E.none else None

        r = wait_until(initialised, 60, what="InitProducerId")
        pid, epoch = r.producer_id, r.producer_epoch
        answer = call(
            wire,
            24,
            3,
            {
                "v3_and_below_transactional_id": txn,
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": [added]}],
            },
        )
        codes = [p.partition_error_code for t in answer.results_by_topic_v3_and_below
                 for p in t.results_by_partition]  # fmt: skip
        assert codes == [E.none]

    batch = txn_batch(pid, 0, [b"x"], epoch=epoch)
    with Wire(cluster.broker(leader(cluster, topic, stray)).port, timeout=10) as wire:
        assert produce_at(wire, 9, txn, topic, stray, batch) is E.invalid_txn_state
        assert produce_at(wire, 11, txn, topic, stray, batch) is E.transaction_abortable
        assert list_offset(wire, topic, READ_UNCOMMITTED, stray) == 0
    with Wire(cluster.broker(leader(cluster, topic, added)).port, timeout=10) as wire:
        assert produce_at(wire, 9, txn, topic, added, batch) is E.none
        assert list_offset(wire, topic, READ_UNCOMMITTED, added) == 1
