"""Committed offsets outlive the broker: a clean stop, or kill -9 right after a commit was
acknowledged.  A consumer of the group then resumes at the last commit: nothing it had
committed comes again, and nothing after it is skipped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from groups_support import (
    GROUP_BROKER_CONFIG,
    Handled,
    committed,
    fill,
    index_of,
    member_config,
)
from kafka_support import BrokerProcess, create_topic

from samsa.testing import free_port

# Broker processes started and restarted: the slowest group tests.
pytestmark = pytest.mark.slow

PARTITIONS = 3
RECORDS = 3000


def _consume(consumer: Consumer, until: int, timeout: float = 30.0) -> list[Handled]:
    """Handle batches, committing after each, until `until` records were handled."""
    handled: list[Handled] = []
    deadline = time.monotonic() + timeout
    while len(handled) < until:
        assert time.monotonic() < deadline, f"handled {len(handled)} of {until} records"
        messages = consumer.consume(100, 0.2)
        for m in messages:
            assert m.error() is None, m.error()
            handled.append(Handled(m.partition(), m.offset(), index_of(m.value())))
        if messages:
            consumer.commit(asynchronous=False)
    return handled


@pytest.mark.parametrize("stop", ["clean", "kill-9"])
def test_a_consumer_resumes_at_the_last_commit_after_a_broker_restart(
    tmp_path: Path, topic: str, group: str, stop: str
) -> None:
    broker = BrokerProcess(tmp_path / "data", free_port(), GROUP_BROKER_CONFIG).start()
    try:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, topic, PARTITIONS)
        fill(bootstrap, topic, RECORDS, PARTITIONS)
        first = Consumer(member_config(bootstrap, group))
        first.subscribe([topic])
        before = _consume(first, RECORDS // 2)
        last_commit = committed(bootstrap, group, topic, PARTITIONS)
        assert sum(last_commit.values()) == len(before)

        # The first consumer is still a member when the broker goes.
        if stop == "clean":
            assert broker.stop() == 0
        else:
            broker.kill()
        broker.start()
        assert committed(bootstrap, group, topic, PARTITIONS) == last_commit
        first.close()

        second = Consumer(member_config(bootstrap, group))
        second.subscribe([topic])
        try:
            after = _consume(second, RECORDS - len(before))
        finally:
            second.close()
    finally:
        broker.stop()
    end = RECORDS // PARTITIONS
    for p in range(PARTITIONS):
        resumed = min((h.offset for h in after if h.partition == p), default=end)
        assert resumed == last_commit.get(p, 0), f"partition {p}: resumed at {resumed}"
    # Each record handled once in all: no redelivery, nothing skipped.
    assert sorted(h.index for h in [*before, *after]) == list(range(RECORDS))
