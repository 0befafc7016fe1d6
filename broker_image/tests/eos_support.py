"""The kill loop of the exactly-once tests: a transactional consume-process-produce
application (eos_app.py, confluent-kafka, its own process) killed with -9 at random points and
started again, then the output read back with both isolation levels."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_support import wait_until

APP = Path(__file__).resolve().parent / "eos_app.py"


def read(bootstrap: str, topic: str, isolation: str, partitions: int, expect: int = 0) -> list[str]:
    """Every value of the topic, to the end of each partition (the LSO for read_committed),
    once at least ``expect`` have come."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
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
        return len(out) >= expect and len(at_end) == partitions

    try:
        wait_until(done, 90, 0, f"the end of {topic}")
    finally:
        c.close()
    return out


def _ready(proc: subprocess.Popen[str], timeout_s: float) -> bool:
    """Whether the application printed "ready" within the timeout (it is killed if not)."""
    line: list[str] = []
    out = proc.stdout
    assert out is not None
    reader = threading.Thread(target=lambda: line.append(out.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not line or line[0].strip() != "ready":
        proc.kill()
        proc.wait(30)
        return False
    return True


def kill_loop(
    bootstrap: str,
    log: Path,
    *,
    inputs: int,
    kills: int,
    partitions: int = 6,
    replication: int = 1,
    seed: int = 2026,
    feed_pause_s: float = 0.3,
    app: list[str] | None = None,
    ready_timeout_s: float = 120.0,
) -> tuple[Counter[str], Counter[str]]:
    """Feed ``inputs`` records (25 at a time, ``feed_pause_s`` apart) while the application
    runs ``kills`` times, killed with -9 at a random point each time, then once to the end.
    ``app``: the application's command, given BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID
    after it (eos_app.py by default); it prints "ready" once it can work.
    (read_committed, read_uncommitted) output."""
    name = uuid.uuid4().hex[:6]
    source, sink, group, txn_id = f"in-{name}", f"out-{name}", f"app-{name}", f"app-tx-{name}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(t, partitions, replication) for t in (source, sink)]
    for f in admin.create_topics(topics).values():
        f.result(30)
    feeder = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})

    def feed() -> None:
        # Paced over the kills, so that each instance has records to process when it dies.
        for i in range(inputs):
            feeder.produce(source, str(i).encode(), partition=i % partitions)
            if i % 25 == 24:
                feeder.flush(30)
                time.sleep(feed_pause_s)
        feeder.flush(30)

    feeding = threading.Thread(target=feed, daemon=True)
    feeding.start()

    rng = random.Random(seed)
    command = app if app is not None else [sys.executable, str(APP)]
    args = [*command, bootstrap, source, sink, group, txn_id]
    with log.open("w") as err:

        def start() -> subprocess.Popen[str]:
            return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True)

        for _ in range(kills):
            proc = start()
            assert proc.stdout is not None
            assert _ready(proc, ready_timeout_s), f"the application did not start: see {log}"
            # A random point in its work: joining the group, mid-transaction, committing.
            time.sleep(rng.uniform(0.3, 4.0))
            proc.kill()
            proc.wait(30)
        final = start()
        feeding.join(300)
        try:
            wait_until(
                lambda: len(read(bootstrap, sink, "read_committed", partitions)) >= inputs,
                300,
                1,
                "every input processed",
            )
        finally:
            final.kill()
            final.wait(30)
    committed = Counter(read(bootstrap, sink, "read_committed", partitions))
    everything = Counter(read(bootstrap, sink, "read_uncommitted", partitions))
    return committed, everything
