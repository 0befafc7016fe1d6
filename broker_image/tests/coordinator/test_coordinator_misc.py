"""Clocks, settings, subscriptions and shutdown of the group coordinator."""

from __future__ import annotations

import asyncio
import time

import pytest
from coordinator_support import make_harness, subscription
from manual_clock import ManualClock

from samsa.config.kafka import KafkaConfig
from samsa.coordinator import AsyncioClock, GroupCoordinatorConfig
from samsa.coordinator.consumer_protocol import SubscriptionFormatError, subscribed_topics
from samsa.coordinator.group_records import (
    GroupMetadataValue,
    MemberMetadataValue,
    group_from_value,
)
from samsa.protocol.errors import ErrorCode


def test_manual_clock_fires_due_timers_in_order_at_their_deadlines() -> None:
    clock = ManualClock(start_ms=0)
    fired: list[tuple[str, int]] = []
    clock.call_later(20, lambda: fired.append(("b", clock.now_ms())))
    clock.call_later(10, lambda: fired.append(("a", clock.now_ms())))
    cancelled = clock.call_later(15, lambda: fired.append(("x", clock.now_ms())))
    cancelled.cancel()
    clock.call_later(10, lambda: clock.call_later(5, lambda: fired.append(("c", clock.now_ms()))))
    clock.advance(19)
    assert fired == [("a", 10), ("c", 15)] and clock.now_ms() == 19
    assert clock.pending() == 1 and clock.next_deadline_ms() == 20
    clock.advance(1)
    assert fired[-1] == ("b", 20)


async def test_asyncio_clock_runs_timers_on_the_loop() -> None:
    clock = AsyncioClock()
    done = asyncio.Event()
    clock.call_later(0, done.set)
    cancelled = clock.call_later(0, lambda: pytest.fail("cancelled timer ran"))
    cancelled.cancel()
    await asyncio.wait_for(done.wait(), 5)
    # Wall-clock time, since commit timestamps are persisted and compared across brokers.
    assert abs(clock.now_ms() - time.time() * 1000) < 60_000


def test_config_from_kafka_properties() -> None:
    cfg = GroupCoordinatorConfig.from_properties(
        KafkaConfig({"offsets.topic.num.partitions": "7", "offsets.retention.minutes": "2"})
    )
    assert cfg.offsets_topic_num_partitions == 7
    assert cfg.offsets_retention_ms == 120_000
    assert cfg.group_initial_rebalance_delay_ms == 3_000
    assert cfg.offset_metadata_max_bytes == 4_096
    assert GroupCoordinatorConfig.from_properties({"offset.metadata.max.bytes": 10}) == (
        GroupCoordinatorConfig(offset_metadata_max_bytes=10)
    )


def test_subscribed_topics_reads_every_version_by_its_v0_prefix() -> None:
    assert subscribed_topics(subscription("a", "b")) == {"a", "b"}
    # A v3 subscription only adds fields after the v0 ones.
    v3 = b"\x00\x03" + subscription("a")[2:] + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff"
    assert subscribed_topics(v3) == {"a"}
    for bad in (b"", b"\x00", b"\xff\xff\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x02\x00\x05ab"):
        with pytest.raises(SubscriptionFormatError):
            subscribed_topics(bad)


def test_a_v0_member_record_gets_its_session_timeout_as_rebalance_timeout() -> None:
    value = GroupMetadataValue(
        "consumer", 3, "range", "m", -1, (MemberMetadataValue("m", "c", "h", 9_000, b"", b""),)
    )
    group = group_from_value("g", value, lambda: 0)
    assert group.get("m").rebalance_timeout_ms == 9_000
    assert group.current_state_timestamp is None and str(group.state) == "Stable"


async def test_shutdown_answers_parked_requests_with_not_coordinator() -> None:
    h = await make_harness(initial_delay_ms=3_000)
    mid = await h.new_member_id("g")
    parked = await h.join("g", mid)
    assert not parked.done()
    await h.coordinator.shutdown()
    await h.settle()
    assert parked.result().error is ErrorCode.not_coordinator
    assert h.clock.pending() == 0 and not h.coordinator.owned_partitions
