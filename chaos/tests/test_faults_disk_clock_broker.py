"""The disk-full and clock-step kinds as the campaign uses them, against a real broker: an
in-process Samsa broker whose data directory is a tmpfs of the test's own and whose clock
reads the offset file the kind writes."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.faults.clock import ClockStepKind
from chaos.faults.disk import DiskFullKind
from chaos.tests.fault_support import fake, small_tmpfs
from samsa import faults, wall_clock
from samsa.testing import InProcessBroker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    with small_tmpfs(tmp_path, "8m") as point:
        b = InProcessBroker(
            point / "data",
            {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"},
        ).start()
        try:
            yield b
        finally:
            b.stop()


def _produce_one(bootstrap: str) -> int:
    """One record, no retries: the error code the broker answers (0: written)."""
    p = Producer({"bootstrap.servers": bootstrap, "retries": 0, "message.timeout.ms": 10_000})
    codes: list[int] = []

    def report(err: Any, msg: Any) -> None:
        codes.append(err.code() if err is not None else 0)

    p.produce("t", value=b"x" * 5000, partition=0, on_delivery=report)
    p.flush(15)
    return codes[0] if codes else -1


def test_disk_full_makes_the_broker_refuse_writes_until_healed(
    broker: InProcessBroker, tmp_path: Path
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(20)
    assert _produce_one(broker.bootstrap_servers) == 0
    env = fake({0: broker.data_dir}, tmp_path)
    fault = DiskFullKind().inject(env, random.Random(0))
    assert _produce_one(broker.bootstrap_servers) == KafkaError.KAFKA_STORAGE_ERROR
    fault.heal()
    assert _produce_one(broker.bootstrap_servers) == 0


def test_clock_step_moves_the_broker_clock_and_heal_puts_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = fake({0: tmp_path}, tmp_path / "clocks")
    monkeypatch.setenv(faults.CLOCK_OFFSET_FILE_ENV, str(env.clock_file(0)))
    fault = ClockStepKind().inject(env, random.Random(5))

    def skew() -> float:
        return wall_clock.wall_clock_ms() - time.time() * 1000

    deadline = time.monotonic() + 5
    while abs(skew() - fault.offset_ms) > 500 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert abs(skew() - fault.offset_ms) <= 500
    fault.heal()
    deadline = time.monotonic() + 5
    while abs(skew()) > 500 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert abs(skew()) <= 500
