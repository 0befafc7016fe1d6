"""The day-2 driver's own choice: the replication throttle it wants while partitions move."""

from __future__ import annotations

import logging
from typing import Any

from samsa_operator import day2_driver, models
from samsa_operator.day2_planner import KafkaView
from samsa_operator.reconcile import Broker

LOG = logging.getLogger(__name__)


def spec(rate: int) -> models.KafkaClusterSpec:
    return models.parse_spec(
        models.KafkaClusterSpec,
        {"brokers": {"replicas": 2}, "operations": {"reassignmentThrottleBytesPerSecond": rate}},
    )


def moving(*brokers: int) -> KafkaView:
    return KafkaView(
        controller_id=0,
        brokers=[Broker(b) for b in brokers],
        partitions=[],
        reassigning=frozenset({("t", 0)}),
    )


class NoAdmin:
    """Setting the throttle is the caller's; only lifting it reaches the brokers."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the driver called the admin's {name}")


async def test_partitions_moving_want_the_specs_rate_on_the_brokers_kept() -> None:
    wanted = await day2_driver._throttle(NoAdmin(), spec(1000), moving(0, 1, 2), None, {}, LOG)
    assert wanted == {"rate": 1000, "brokers": [0, 1]}


async def test_a_throttle_already_recorded_is_not_asked_for_again() -> None:
    current = {"throttle": {"rate": 1000, "brokers": [0, 1]}}
    assert (
        await day2_driver._throttle(NoAdmin(), spec(1000), moving(0, 1), None, current, LOG) is None
    )


async def test_a_rate_of_zero_throttles_nothing() -> None:
    assert await day2_driver._throttle(NoAdmin(), spec(0), moving(0, 1), None, {}, LOG) is None
