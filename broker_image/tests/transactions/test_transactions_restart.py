"""A standalone broker restarted: transactional ids come back from __transaction_state, so
the producer that was current before the restart is still fenced by the next one, and an
open transaction is still aborted by it."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_support import wait_until

from samsa.testing import InProcessBroker

pytestmark = pytest.mark.timeout(120)


def test_ids_and_open_transactions_survive_a_restart(tmp_path: Path) -> None:
    with InProcessBroker(tmp_path, {"transaction.state.log.num.partitions": "2"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
        conf = {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "keep"}
        old = Producer(conf)
        old.init_transactions(30)
        old.begin_transaction()
        old.produce("t", b"committed", partition=0)
        old.commit_transaction(30)
        old.begin_transaction()
        old.produce("t", b"left-open", partition=0)
        old.flush(30)

        broker.restart()

        new = Producer({**conf, "bootstrap.servers": broker.bootstrap_servers})
        new.init_transactions(60)  # aborts the open transaction, then fences
        new.begin_transaction()
        new.produce("t", b"after-restart", partition=0)
        new.commit_transaction(30)
        with pytest.raises(KafkaException) as info:
            old.commit_transaction(30)
        assert info.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)

        reader = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "r",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        reader.subscribe(["t"])
        got: list[bytes] = []

        def both() -> bool:
            msg = reader.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value() or b"")
            return len(got) >= 2

        wait_until(both, 30)
        reader.close()
        assert got == [b"committed", b"after-restart"]
