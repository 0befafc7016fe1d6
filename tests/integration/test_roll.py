"""Rolling restarts by the real operator on the real control plane, of real broker pods the
node agent runs: under acks=all load, against a SIGSTOPped follower, and configs that change
live."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import day2_scenarios as scenarios
import pytest
from cluster_support import (
    LoadProducer,
    check_exactly_once,
    consume_all,
    create_topic,
)
from day2_support import (
    IsrWatch,
    acked,
    broker_config,
    broker_pid,
    cluster_status,
    condition,
    in_thread,
    merge,
    not_led_by_preferred,
    start_cluster,
    starts,
    wait_status,
)

from samsa.local_cluster import ZooKeeperServer
from samsa_dev.kube.harness import KubeNamespace, eventually

# A whole cluster on the control plane: more than the default 300 s under load.
pytestmark = pytest.mark.timeout(600)

STATIC_BROKER_CONFIG, DYNAMIC_BROKER_CONFIG = 4, 2


roll_finished = scenarios.roll_finished(3)


@pytest.mark.slow
@pytest.mark.e2e  # day-2 under load: `make e2e` (docs/kubernetes.md)
async def test_roll_under_load_loses_nothing_and_ends_with_preferred_leaders(
    kube: KubeNamespace, zookeeper: ZooKeeperServer
) -> None:
    status, brokers = await start_cluster(kube, zookeeper)
    await in_thread(create_topic, brokers, "load", 6, 3, **{"min.insync.replicas": "2"})
    load = LoadProducer(brokers, "load").start()
    watch = IsrWatch(brokers, "load").start()
    try:
        await eventually(lambda: acked(load, 500), 60, "records acknowledged")
        controller = status["controllerId"]
        started = time.monotonic()
        # log.roll.hours cannot change live: every broker needs a restart.
        await merge(kube, {"spec": {"config": {"log.roll.hours": 100}}})
        status = await wait_status(kube, roll_finished, "the roll to finish", 240)
        before = load.oracle.count()
        await eventually(lambda: acked(load, before + 300), 60, "records after the roll")
    finally:
        smallest = watch.stop()
        oracle = load.stop()
    order = starts(kube, started)
    assert sorted(order) == [0, 1, 2], f"each broker restarted once: {order}"
    assert order[-1] == controller, f"the controller ({controller}) last: {order}"
    assert status["lastRoll"]["restarted"] == order
    assert not oracle.errors, oracle.errors[:3]
    check_exactly_once(oracle, await in_thread(consume_all, brokers, "load", 6))
    assert watch.polls > 20 and min(smallest.values()) >= 2, f"ISR fell below 2: {smallest}"
    for b in range(3):
        assert await in_thread(broker_config, brokers, b, "log.roll.hours") == (
            "100",
            STATIC_BROKER_CONFIG,
        )
    assert await in_thread(not_led_by_preferred, brokers) == []
    assert condition(status, "RollingRestart")["reason"] == "Idle"


@pytest.mark.e2e  # day-2 under load: `make e2e` (docs/kubernetes.md)
async def test_roll_waits_for_a_stopped_follower_and_live_configs_need_no_restart(
    kube: KubeNamespace, zookeeper: ZooKeeperServer
) -> None:
    status, brokers = await start_cluster(kube, zookeeper)
    await in_thread(create_topic, brokers, "t", 3, 3, **{"min.insync.replicas": "2"})

    # A config that can change live changes without a restart.
    started = time.monotonic()
    await merge(kube, {"spec": {"config": {"log.retention.ms": 3600000}}})

    def applied_live() -> bool:
        return all(
            broker_config(brokers, b, "log.retention.ms") == ("3600000", DYNAMIC_BROKER_CONFIG)
            for b in range(3)
        )

    await eventually(lambda: in_thread(applied_live), 60, "log.retention.ms set live")
    assert starts(kube, started) == []

    # A follower stops answering: the roll must wait, and say why.
    controller = status["controllerId"]
    follower = next(b for b in range(3) if b != controller)
    pid = broker_pid(kube, follower)
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        await kube.kubectl("annotate", "kc", "day2", "kafka.samsa.dev/manual-rolling-update=true")
        blocked = await wait_status(
            kube,
            scenarios.roll_blocked,
            "the roll blocked",
        )
        message = condition(blocked, "RollingRestart")["message"]
        assert f"brokers {follower} not ready" in message
        # It stays blocked while the follower is stopped: nothing restarts.
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert starts(kube, started) == []
            status = await cluster_status(kube)
            assert condition(status, "RollingRestart")["reason"] == "Blocked"
            await asyncio.sleep(0.25)  # an observation window, not a synchronisation
    finally:
        os.kill(pid, signal.SIGCONT)
    status = await wait_status(kube, roll_finished, "the roll to finish", 240)
    order = starts(kube, started)
    assert sorted(order) == [0, 1, 2] and order[-1] == controller, order
    assert await in_thread(not_led_by_preferred, brokers) == []
