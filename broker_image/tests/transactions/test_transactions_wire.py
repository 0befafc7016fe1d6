"""The transaction APIs on the wire against a standalone broker: Kafka's error codes for bad
input (EndTxn without a transaction, an old epoch, another producer id, an unknown topic, a
timeout above transaction.max.timeout.ms), the PRODUCER_FENCED downgrade of old versions,
FindCoordinator for a transactional id, and DescribeTransactions/ListTransactions."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_support import Wire, wait_until

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import build, request_type
from samsa.testing import InProcessBroker

pytestmark = pytest.mark.timeout(60)
E = ErrorCode


def call(wire: Wire, key: int, version: int, body: dict[str, Any]) -> Any:
    return wire.request(key, version, build(request_type(key, version), body))


def init(wire: Wire, txn_id: str, timeout_ms: int = 10_000, version: int = 4) -> Any:
    return call(
        wire,
        22,
        version,
        {
            "transactional_id": txn_id,
            "transaction_timeout": timeout_ms,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    )


def init_ok(wire: Wire, txn_id: str) -> tuple[int, int]:
    # The first InitProducerId may find the coordinator still loading its new partition.
    def attempt() -> Any:
        r = init(wire, txn_id)
        return r if r.error_code == E.none else None

    r = wait_until(attempt, timeout=20)
    return r.producer_id, r.producer_epoch


def add_partitions(
    wire: Wire, txn_id: str, pid: int, epoch: int, topic: str, parts: list[int], version: int = 3
) -> dict[int, ErrorCode]:
    r = call(
        wire,
        24,
        version,
        {
            "v3_and_below_transactional_id": txn_id,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": parts}],
        },
    )
    return {
        p.partition_index: E(p.partition_error_code)
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def end_txn(
    wire: Wire, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3
) -> ErrorCode:
    r = call(
        wire,
        26,
        version,
        {
            "transactional_id": txn_id,
            "producer_id": pid,
            "producer_epoch": epoch,
            "committed": commit,
        },
    )
    return E(r.error_code)


@pytest.fixture
def topic(broker: InProcessBroker) -> str:
    name = f"wire-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    return name


def test_find_coordinator_for_a_transactional_id(broker: InProcessBroker, wire: Wire) -> None:
    r = call(wire, 10, 3, {"key": "some-txn", "key_type": 1})
    assert (E(r.error_code), r.node_id, r.port) == (E.none, 0, broker.port)


def test_bad_input_gets_kafkas_error_codes(wire: Wire, topic: str) -> None:
    txn = f"bad-{uuid.uuid4().hex[:6]}"
    assert E(init(wire, txn, timeout_ms=900_001).error_code) is E.invalid_transaction_timeout
    assert E(init(wire, "").error_code) is E.invalid_request
    pid, epoch = init_ok(wire, txn)
    # EndTxn without a transaction.
    assert end_txn(wire, txn, pid, epoch, commit=True) is E.invalid_txn_state
    # Another producer id; an unknown transactional id.
    assert end_txn(wire, txn, pid + 1, epoch, commit=True) is E.invalid_producer_id_mapping
    assert end_txn(wire, "never-seen", pid, epoch, commit=False) is E.invalid_producer_id_mapping
    # An unknown topic fails the whole request; the rest is OPERATION_NOT_ATTEMPTED.
    r = call(
        wire,
        24,
        3,
        {
            "v3_and_below_transactional_id": txn,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [
                {"name": topic, "partitions": [0]},
                {"name": "no-such-topic", "partitions": [0]},
            ],
        },
    )
    codes = {
        t.name: E(p.partition_error_code)
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }
    assert codes == {
        topic: E.operation_not_attempted,
        "no-such-topic": E.unknown_topic_or_partition,
    }
    assert add_partitions(wire, txn, pid, epoch, topic, [0, 1]) == {0: E.none, 1: E.none}
    # A second producer fences this one: its open transaction is aborted first.
    assert E(init(wire, txn).error_code) is E.concurrent_transactions
    pid2, epoch2 = init_ok(wire, txn)
    assert (pid2, epoch2) == (pid, epoch + 2)
    # The old epoch: PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for versions before KIP-588's.
    assert add_partitions(wire, txn, pid, epoch, topic, [0]) == {0: E.producer_fenced}
    assert add_partitions(wire, txn, pid, epoch, topic, [0], version=1) == {
        0: E.invalid_producer_epoch
    }
    assert end_txn(wire, txn, pid, epoch, commit=True) is E.producer_fenced
    assert end_txn(wire, txn, pid, epoch, commit=True, version=1) is E.invalid_producer_epoch
    # The new producer's transaction commits; a retried commit is answered OK, an abort not.
    assert add_partitions(wire, txn, pid2, epoch2, topic, [1]) == {1: E.none}
    assert end_txn(wire, txn, pid2, epoch2, commit=True) is E.none

    def completed() -> bool:
        return end_txn(wire, txn, pid2, epoch2, commit=True) is E.none

    wait_until(completed, timeout=10)
    assert end_txn(wire, txn, pid2, epoch2, commit=False) is E.invalid_txn_state


def test_describe_and_list_transactions(wire: Wire, topic: str) -> None:
    txn = f"desc-{uuid.uuid4().hex[:6]}"
    pid, epoch = init_ok(wire, txn)
    add_partitions(wire, txn, pid, epoch, topic, [1, 0])
    r = call(wire, 65, 0, {"transactional_ids": [txn, "nope"]})
    mine, nope = r.transaction_states
    assert (E(mine.error_code), mine.transaction_state, mine.producer_id) == (
        E.none,
        "Ongoing",
        pid,
    )
    assert [(t.topic, sorted(t.partitions)) for t in mine.topics] == [(topic, [0, 1])]
    assert E(nope.error_code) is E.transactional_id_not_found
    listed = call(wire, 66, 1, {"state_filters": ["Ongoing"], "producer_id_filters": [pid]})
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
        (txn, "Ongoing")
    ]
    bogus = call(wire, 66, 0, {"state_filters": ["Sleeping"], "producer_id_filters": []})
    assert list(bogus.unknown_state_filters) == ["Sleeping"]
    assert end_txn(wire, txn, pid, epoch, commit=False) is E.none
