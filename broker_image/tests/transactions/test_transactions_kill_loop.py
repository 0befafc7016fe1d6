"""A transactional consume-process-produce application (confluent-kafka, its own process)
across 6 partitions, killed with -9 at random points 20 times and started again: the output
read with read_committed holds every input exactly once; read_uncommitted readers also see
the records of the transactions the kills aborted."""

from __future__ import annotations

import random
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_support import wait_until

from samsa.testing import InProcessBroker

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

APP = Path(__file__).resolve().parent / "eos_app.py"
PARTITIONS = 6
INPUTS = 3000
KILLS = 20


def read(broker: InProcessBroker, topic: str, isolation: str) -> list[str]:
    """Every value of the topic, to the end of each partition (the LSO for read_committed)."""
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    c.subscribe([topic])
    out: list[str] = []
    at_end: set[int] = set()

    def done() -> bool:
        msg = c.poll(0.5)
        if msg is None:
            return False
        err = msg.error()
        if err is not None:
            assert err.code() == KafkaError._PARTITION_EOF, err
            at_end.add(msg.partition() or 0)
        else:
            at_end.discard(msg.partition() or 0)
            out.append((msg.value() or b"").decode())
        return len(at_end) == PARTITIONS

    try:
        wait_until(done, 60, 0, f"the end of {topic}")
    finally:
        c.close()
    return out


def test_killed_20_times_every_input_once(broker: InProcessBroker, tmp_path: Path) -> None:
    name = uuid.uuid4().hex[:6]
    source, sink, group, txn_id = f"in-{name}", f"out-{name}", f"app-{name}", f"app-tx-{name}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in (source, sink)]).values():
        f.result(30)
    feeder = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i in range(INPUTS):
        feeder.produce(source, str(i).encode(), partition=i % PARTITIONS)
    feeder.flush(30)

    rng = random.Random(2026)
    log = (tmp_path / "app.log").open("w")
    args = [sys.executable, str(APP), broker.bootstrap_servers, source, sink, group, txn_id]

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)

    for _ in range(KILLS):
        app = start()
        assert app.stdout is not None
        assert app.stdout.readline().strip() == "ready"
        # A random point in its work: somewhere between joining the group and committing.
        time.sleep(rng.uniform(0.2, 2.5))
        app.kill()
        app.wait(30)
    final = start()
    try:
        wait_until(
            lambda: len(read(broker, sink, "read_committed")) >= INPUTS,
            240,
            1,
            "every input processed",
        )
    finally:
        final.kill()
        final.wait(30)
        log.close()
    committed = Counter(read(broker, sink, "read_committed"))
    assert committed == Counter(f"out-{i}" for i in range(INPUTS))
    everything = Counter(read(broker, sink, "read_uncommitted"))
    assert set(everything) == set(committed)
    # What the kills interrupted was written and aborted: only read_uncommitted shows it.
    duplicated = sum(n - 1 for n in everything.values())
    assert duplicated > 0, "no kill landed inside a transaction"
