"""Transaction partition verification (KIP-890 part 1, transaction.partition.verification.enable,
on by default as in Kafka 3.6+): a transactional Produce to a partition its transaction did not
add is refused with Kafka's error for the Produce version, and nothing of it is appended."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_support import Wire, encode_request, produce_request, wait_until
from test_transactions_wire import add_partitions, call, end_txn, init_ok
from txn_support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    fetch,
    list_offset,
    plain,
    read_until,
    txn_batch,
)

from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.testing import InProcessBroker

pytestmark = pytest.mark.timeout(60)
E = ErrorCode


def produce_at(
    wire: Wire, version: int, txn_id: str, topic: str, partition: int, data: bytes
) -> tuple[ErrorCode, str | None]:
    request = dataclasses.replace(
        produce_request(topic, {partition: data}, acks=-1, version=version),
        transactional_id=txn_id,
    )
    (p,) = wire.request(0, version, request).responses[0].partition_responses
    # error_message is in the response from v8.
    return E(p.error_code), getattr(p, "error_message", None)


def test_a_partition_not_added_to_the_transaction_is_refused_and_left_empty(
    broker: InProcessBroker, wire: Wire
) -> None:
    topic = f"verify-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    txn = f"verify-{uuid.uuid4().hex[:8]}"
    pid, epoch = init_ok(wire, txn)
    # Partition 1 is in the transaction; partition 0 never is.
    assert add_partitions(wire, txn, pid, epoch, topic, [1]) == {1: E.none}
    batch = txn_batch(pid, 0, [b"stray"], epoch=epoch)

    # Produce up to v10: clients that predate TRANSACTION_ABORTABLE get INVALID_TXN_STATE.
    assert produce_at(wire, 3, txn, topic, 0, batch) == (E.invalid_txn_state, None)
    for version in (9, 10):
        assert produce_at(wire, version, txn, topic, 0, batch) == (
            E.invalid_txn_state,
            "Partition was not added to the transaction",
        )
    # v11 and later: TRANSACTION_ABORTABLE, which the producer handles by aborting.
    assert produce_at(wire, 11, txn, topic, 0, batch)[0] is E.transaction_abortable
    # Another producer epoch than the coordinator's: fenced, told as INVALID_PRODUCER_EPOCH.
    fenced = txn_batch(pid, 0, [b"stray"], epoch=epoch + 1)
    assert produce_at(wire, 9, txn, topic, 0, fenced)[0] is E.invalid_producer_epoch

    # The added partition takes its batch, and the next ones without asking again.
    assert produce_at(wire, 9, txn, topic, 1, batch) == (E.none, None)
    assert produce_at(wire, 9, txn, topic, 1, txn_batch(pid, 1, [b"more"], epoch=epoch)) == (
        E.none,
        None,
    )

    # Nothing of the refused batches was appended: partition 0 is empty at either isolation.
    for isolation in (READ_UNCOMMITTED, READ_COMMITTED):
        assert list_offset(wire, topic, isolation, 0) == 0
        assert fetch(wire, topic, 0, isolation).records == b""

    # Once the transaction is over, its partitions are not in the next one until added.
    assert end_txn(wire, txn, pid, epoch, commit=True) is E.none
    later = txn_batch(pid, 2, [b"late"], epoch=epoch)

    def refused_after_commit() -> bool:
        # EndTxn answers before the markers are written; until then the state is PREPARE_COMMIT
        # (NOT_ENOUGH_REPLICAS, retriable).
        error = produce_at(wire, 9, txn, topic, 1, later)[0]
        assert error in (E.invalid_txn_state, E.not_enough_replicas), error
        return error is E.invalid_txn_state

    wait_until(refused_after_commit, timeout=20)
    # A plain batch still goes to partition 0 at offset 0: no stray transaction holds its LSO.
    wire.request(0, 9, produce_request(topic, {0: plain(b"plain")}, acks=-1))
    assert list_offset(wire, topic, READ_COMMITTED, 0) == 1


def test_a_transaction_ended_while_its_partition_is_verified_takes_no_late_batch(
    broker: InProcessBroker, wire: Wire
) -> None:
    """Kafka's VerificationGuard: the coordinator said "added", but the transaction's abort
    marker reached the partition before the batch did; the batch is refused, not appended
    after the marker as the start of a transaction no coordinator knows."""
    topic = f"verify-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    txn = f"verify-{uuid.uuid4().hex[:8]}"
    pid, epoch = init_ok(wire, txn)
    assert add_partitions(wire, txn, pid, epoch, topic, [0]) == {0: E.none}
    server = broker.server
    assert server is not None and server.services is not None
    services = server.services
    tc = services.transaction_coordinator
    real = services.verify_transaction
    assert tc is not None and real is not None
    tp = TopicPartition(topic, 0)

    async def verify_then_abort(*args: Any) -> dict[TopicPartition, ErrorCode]:
        # The answer is "added"; the transaction then ends before the append, as it may
        # while the answer crosses the network from another broker.
        answers = await real(*args)
        assert await tc.end_transaction(txn, pid, epoch, False) is E.none
        state = services.replica_manager.get_partition(tp).log.producer_state
        deadline = asyncio.get_running_loop().time() + 20
        while pid in state.verification_guards:
            assert asyncio.get_running_loop().time() < deadline, "no abort marker"
            await asyncio.sleep(0.01)
        return answers

    services.verify_transaction = verify_then_abort
    try:
        batch = txn_batch(pid, 0, [b"late"], epoch=epoch)
        assert produce_at(wire, 9, txn, topic, 0, batch) == (
            E.invalid_txn_state,
            "Partition was not added to the transaction",
        )
    finally:
        services.verify_transaction = real
    # Only the abort marker is in the partition, and no transaction holds its LSO.
    assert list_offset(wire, topic, READ_UNCOMMITTED, 0) == 1
    assert list_offset(wire, topic, READ_COMMITTED, 0) == 1


def test_a_batch_waiting_for_verification_survives_the_frames_read_behind_it(
    broker: InProcessBroker, wire: Wire
) -> None:
    """The connection decodes requests in place in its receive buffer; a larger request
    arriving behind a transaction's first batch makes it move its unread bytes to the front.
    The batch, still waiting for the coordinator's answer, is appended intact (a fast
    transactional producer got CORRUPT_MESSAGE, then INVALID_RECORD, and had to abort)."""
    topic = f"verify-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    txn = f"verify-{uuid.uuid4().hex[:8]}"
    pid, epoch = init_ok(wire, txn)
    assert add_partitions(wire, txn, pid, epoch, topic, [0]) == {0: E.none}
    value = bytes(range(256)) * 400  # 100 KB
    first = dataclasses.replace(
        produce_request(topic, {0: txn_batch(pid, 0, [value], epoch=epoch)}, version=9),
        transactional_id=txn,
    )
    # 200 KB behind it: together more than the connection's 256 KB buffer.
    behind = produce_request(topic, {1: plain(b"\xee" * 200_000)}, version=9)
    ids = (901, 902)
    wire.send(encode_request(0, 9, first, ids[0]) + encode_request(0, 9, behind, ids[1]))
    for correlation_id in ids:
        (p,) = wire.read_response(0, 9, correlation_id).responses[0].partition_responses
        assert (E(p.error_code), p.error_message) == (E.none, None), correlation_id
    assert end_txn(wire, txn, pid, epoch, commit=True) is E.none
    assert read_until(broker.bootstrap_servers, topic, "read_committed", value) == [value]


def txn_offset_commit(
    wire: Wire, txn: str, pid: int, epoch: int, group: str, topic: str, version: int = 3
) -> ErrorCode:
    r = call(
        wire,
        28,
        version,
        {
            "transactional_id": txn,
            "group_id": group,
            "producer_id": pid,
            "producer_epoch": epoch,
            "generation_id": -1,
            "member_id": "",
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}
                    ],
                }
            ],
        },
    )
    (p,) = r.topics[0].partitions
    return E(p.error_code)


def stable_offset(wire: Wire, group: str, topic: str) -> tuple[ErrorCode, int]:
    """OffsetFetch with require_stable (v7): UNSTABLE_OFFSET_COMMIT while a transaction's
    offsets for the group are pending."""
    r = call(
        wire,
        9,
        7,
        {
            "group_id": group,
            "topics": [{"name": topic, "partition_indexes": [0]}],
            "require_stable": True,
        },
    )
    (p,) = r.topics[0].partitions
    return E(p.error_code), p.committed_offset


def test_offsets_of_a_transaction_that_did_not_add_its_group_are_refused(
    broker: InProcessBroker, wire: Wire
) -> None:
    """TxnOffsetCommit is verified as Produce is (Kafka's handleTxnCommitOffsets, 3.6+): found
    by the network fuzzer, a TxnOffsetCommit without AddOffsetsToTxn (or from a producer id no
    coordinator issued) was written, a transaction no marker would ever end, and the group's
    offsets stayed UNSTABLE_OFFSET_COMMIT for good."""
    topic = f"offsets-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    group = f"group-{uuid.uuid4().hex[:8]}"
    txn = f"offsets-{uuid.uuid4().hex[:8]}"
    pid, epoch = init_ok(wire, txn)

    assert txn_offset_commit(wire, txn, pid, epoch, group, topic) is E.invalid_txn_state
    assert txn_offset_commit(wire, txn, pid + 1000, 0, group, topic) is not E.none
    assert stable_offset(wire, group, topic) == (E.none, -1)

    # The same commit after AddOffsetsToTxn is taken, pending until the transaction ends.
    added = call(
        wire,
        25,
        3,
        {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch, "group_id": group},
    )
    assert E(added.error_code) is E.none
    assert txn_offset_commit(wire, txn, pid, epoch, group, topic) is E.none
    assert stable_offset(wire, group, topic)[0] is E.unstable_offset_commit
    assert end_txn(wire, txn, pid, epoch, commit=True) is E.none
    wait_until(lambda: stable_offset(wire, group, topic) == (E.none, 5), timeout=20)
