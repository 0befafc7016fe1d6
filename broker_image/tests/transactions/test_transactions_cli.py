"""`samsa transactions list|describe|abort` against a standalone broker with a real
transactional producer (confluent-kafka) holding a transaction open."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_support import wait_until
from typer.testing import CliRunner

from samsa.cli.main import register_tools
from samsa.testing import InProcessBroker

pytestmark = pytest.mark.timeout(120)


def samsa(broker: InProcessBroker, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(register_tools(), [*args, "-b", broker.bootstrap_servers])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def test_list_describe_and_abort_a_hanging_transaction(broker: InProcessBroker) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    txn_id = f"cli-tx-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"hanging", partition=0)
    p.flush(30)

    code, out = samsa(broker, "transactions", "list", "-o", "json")
    assert code == 0, out
    rows = {r["transactional_id"]: r for r in json.loads(out)}
    assert rows[txn_id]["state"] == "Ongoing"

    code, out = samsa(broker, "transactions", "describe", txn_id, "-o", "json")
    assert code == 0, out
    info = json.loads(out)
    assert info["state"] == "Ongoing" and info["partitions"] == [f"{topic}-0"]
    assert info["producer_epoch"] == 0

    abort = ("transactions", "abort", "--topic", topic, "--partition", "0")
    code, out = samsa(broker, *abort, "--producer-id", str(info["producer_id"]))
    assert code != 0 and "--start-offset" in out
    code, out = samsa(broker, *abort, "--start-offset", "5")
    assert code != 0 and "no open transaction starts at offset 5" in out
    # As kafka-transactions.sh abort --start-offset: the producer comes from DescribeProducers.
    code, out = samsa(broker, *abort, "--start-offset", "0")
    assert code == 0, out
    assert f"producer {info['producer_id']}" in out
    # The partition's last stable offset moved past the hanging transaction: a read_committed
    # consumer reaches the end without the aborted record.
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.subscribe([topic])
    seen: list[bytes] = []

    def at_end() -> bool:
        msg = consumer.poll(0.5)
        if msg is None:
            return False
        if msg.error():
            return bool(msg.error().code() == KafkaError._PARTITION_EOF)
        seen.append(msg.value())
        return False

    wait_until(at_end, timeout=20)
    consumer.close()
    assert seen == []

    code, out = samsa(broker, "transactions", "describe", "no-such-id")
    assert code != 0 and "TRANSACTIONAL_ID_NOT_FOUND" in out


def test_find_hanging_lists_a_transaction_no_coordinator_knows(tmp_path: Path) -> None:
    # A hanging transaction is what KIP-890's verification prevents: without it, as on a
    # Kafka before 3.6, a batch of an unknown producer id opens one.
    config = {
        "transaction.partition.verification.enable": False,
        "transaction.state.log.num.partitions": 4,
    }
    with InProcessBroker(tmp_path, config) as broker:
        _find_hanging(broker)


def _find_hanging(broker: InProcessBroker) -> None:
    from kafka_support import Wire
    from txn_support import produce, txn_batch

    topic = f"hang-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    # A transactional batch of a producer id no coordinator handed out: it hangs.
    with Wire(broker.port) as wire:
        assert produce(wire, topic, txn_batch(987_654, 0, [b"stuck"]))[0] == 0

    code, out = samsa(broker, "transactions", "find-hanging", "--max-transaction-timeout", "0")
    assert code == 0, out
    code, out = samsa(
        broker, "transactions", "find-hanging", "--max-transaction-timeout", "0", "-o", "json"
    )
    hanging = [r for r in json.loads(out) if r["topic"] == topic]
    assert [(r["producer_id"], r["start_offset"]) for r in hanging] == [(987_654, 0)]
    # A producer its coordinator knows as ongoing is not hanging, however old.
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": topic})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    p.flush(30)
    code, out = samsa(
        broker, "transactions", "find-hanging", "--max-transaction-timeout", "0", "-o", "json"
    )
    assert [r["producer_id"] for r in json.loads(out) if r["topic"] == topic] == [987_654]
    p.abort_transaction(30)

    code, out = samsa(
        broker, "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "0"
    )
    assert code == 0, out
    code, out = samsa(
        broker, "transactions", "find-hanging", "--max-transaction-timeout", "0", "-o", "json"
    )
    assert [r for r in json.loads(out) if r["topic"] == topic] == []
