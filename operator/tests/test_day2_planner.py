"""The day-2 decisions: the configuration diff, the roll, scaling and leader election steps."""

from __future__ import annotations

from typing import Any

import pytest

from samsa_operator import day2_planner, rolling
from samsa_operator.day2_planner import (
    ClusterView,
    ElectPreferred,
    KafkaView,
    PodView,
    Reassign,
    Resize,
    Restart,
    RestartZooKeeper,
)
from samsa_operator.reconcile import Broker, PartitionState
from samsa_operator.rolling import ReportedConfig

NOW = "2030-01-01T00:00:00Z"


def reported(value: str | None, source: str = rolling.STATIC, read_only: bool = True) -> Any:
    return ReportedConfig(value, source, read_only)


@pytest.mark.parametrize(
    ("wanted", "broker", "expected"),
    [
        # equal, loosely: numbers by value, lists without spaces, booleans by case
        ({"a": "0.50"}, {"a": reported("0.5")}, rolling.ConfigDiff()),
        ({"a": "compact, delete"}, {"a": reported("compact,delete")}, rolling.ConfigDiff()),
        ({"a": "True"}, {"a": reported("true")}, rolling.ConfigDiff()),
        # a live key is set live; a read-only one needs a restart
        ({"a": "2"}, {"a": reported("1", read_only=False)}, rolling.ConfigDiff(set={"a": "2"})),
        ({"a": "2"}, {"a": reported("1")}, rolling.ConfigDiff(restart=("a",))),
        # removed from the spec: a live override goes live; one from the file needs a restart
        ({}, {"a": reported("1", rolling.DYNAMIC, False)}, rolling.ConfigDiff(delete=("a",))),
        ({}, {"a": reported("1", rolling.STATIC, False)}, rolling.ConfigDiff(restart=("a",))),
        ({}, {"a": reported("1", rolling.DEFAULT)}, rolling.ConfigDiff()),
        # what the broker does not know, what the operator owns, the throttle: not compared
        ({"x.unknown": "1"}, {}, rolling.ConfigDiff()),
        ({"listeners": "PLAINTEXT://b:9092"}, {"listeners": reported("x")}, rolling.ConfigDiff()),
        (
            {},
            {rolling.THROTTLE_KEY: reported("10", rolling.DYNAMIC, False)},
            rolling.ConfigDiff(),
        ),
    ],
)
def test_config_diff(
    wanted: dict[str, str], broker: dict[str, ReportedConfig], expected: rolling.ConfigDiff
) -> None:
    assert rolling.config_diff(wanted, broker) == expected


# -- views ----------------------------------------------------------------------------------


def topic(
    name: str, assignment: dict[int, list[int]], isr: dict[int, list[int]] | None = None, **kw: Any
) -> list[PartitionState]:
    return [
        PartitionState(
            name,
            p,
            replicas,
            (isr or {}).get(p, replicas),
            kw.get("leader", {}).get(p, replicas[0]) if "leader" in kw else replicas[0],
            kw.get("min_isr", 2),
        )
        for p, replicas in assignment.items()
    ]


RF3 = topic("t", {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]})


def view(
    n: int = 3,
    *,
    partitions: list[PartitionState] | None = None,
    controller: int = 0,
    pods: dict[int, PodView] | None = None,
    **kw: Any,
) -> ClusterView:
    registered = kw.pop("registered", range(max(n, kw.get("sts_replicas", n))))
    kafka = KafkaView(
        controller,
        [Broker(i) for i in registered],
        RF3 if partitions is None else partitions,
        kw.pop("reassigning", frozenset()),
    )
    sts = kw.pop("sts_replicas", n)
    all_pods = {i: PodView(i, ready=True) for i in range(sts)}
    all_pods.update(pods or {})
    return ClusterView(wanted_brokers=n, sts_replicas=sts, pods=all_pods, kafka=kafka, **kw)


def outdated(*ids: int) -> dict[int, PodView]:
    return {i: PodView(i, ready=True, outdated=True) for i in ids}


# -- rolling restart ------------------------------------------------------------------------


def test_roll_restarts_one_broker_at_a_time_the_controller_last() -> None:
    step = day2_planner.next_step(view(pods=outdated(0, 1, 2), controller=1), NOW)
    assert step.action == Restart(0, ["pod template changed"])
    assert step.status["roll"]["pending"] == [2, 1]
    assert step.status["roll"]["restarted"] == [0]
    # broker 0's pod is being replaced: nothing else happens meanwhile
    roll = step.status["roll"]
    pods = {**outdated(1, 2), 0: PodView(0, ready=False)}
    step = day2_planner.next_step(view(pods=pods, controller=1, roll=roll), NOW)
    assert step.action is None
    [cond] = [c for c in step.conditions if c.type == day2_planner.ROLLING]
    assert cond.reason == "Blocked" and "brokers 0 not ready" in cond.message
    # back in every ISR: the next one, then the controller
    step = day2_planner.next_step(view(pods=outdated(1, 2), controller=1, roll=roll), NOW)
    assert step.action == Restart(2, ["pod template changed"])
    roll = step.status["roll"]
    step = day2_planner.next_step(view(pods=outdated(1), controller=1, roll=roll), NOW)
    assert step.action == Restart(1, ["pod template changed"])
    assert step.status["roll"]["restarted"] == [0, 2, 1]


def test_roll_waits_for_the_restart_rule() -> None:
    # broker 2 fell out of every ISR: restarting 0 would leave one in sync, below 2
    partitions = topic("t", {0: [0, 1, 2], 1: [1, 2, 0]}, isr={0: [0, 1], 1: [1, 0]})
    step = day2_planner.next_step(view(pods=outdated(0, 1), partitions=partitions), NOW)
    assert step.action is None
    [cond] = [c for c in step.conditions if c.type == day2_planner.ROLLING]
    assert cond.reason == "Blocked"
    assert "t-0 would fall below min.insync.replicas=2" in cond.message
    assert step.status["roll"]["phase"] == "Blocked"


def test_roll_skips_topics_whose_rf_is_at_most_min_isr() -> None:
    partitions = topic("t", {0: [0, 1]}, isr={0: [0]}, min_isr=2)
    step = day2_planner.next_step(view(pods=outdated(0), partitions=partitions), NOW)
    assert step.action == Restart(0, ["pod template changed"])


def test_roll_reasons_combine_and_manual_rolls_count() -> None:
    pods = {1: PodView(1, ready=True, manual_restart=True)}
    step = day2_planner.next_step(view(pods=pods, restart_reasons={1: ["log.roll.hours"]}), NOW)
    assert step.action == Restart(1, ["manual rolling update", "config changed: log.roll.hours"])


def test_roll_ends_with_a_preferred_election_then_clears() -> None:
    moved = topic("t", {0: [0, 1, 2], 1: [1, 2, 0]}, leader={0: 1, 1: 1})
    roll = {"restarted": [0, 1, 2], "phase": "Restarting", "startedAt": NOW}
    step = day2_planner.next_step(view(partitions=moved, roll=roll), NOW)
    assert step.action == ElectPreferred([("t", 0)])
    led = topic("t", {0: [0, 1, 2], 1: [1, 2, 0]})
    step = day2_planner.next_step(view(partitions=led, roll=step.status["roll"]), NOW)
    assert step.action is None
    assert step.status["roll"] is None and step.status["lastRoll"]["restarted"] == [0, 1, 2]


def test_nothing_rolls_while_partitions_move() -> None:
    step = day2_planner.next_step(view(pods=outdated(0), reassigning=frozenset({("t", 0)})), NOW)
    assert step.action is None


# -- scaling --------------------------------------------------------------------------------


def test_scale_down_below_a_replication_factor_is_refused() -> None:
    step = day2_planner.next_step(view(2, sts_replicas=3), NOW)
    assert step.action is None
    [cond] = [c for c in step.conditions if c.type == day2_planner.SCALING]
    assert (cond.ok, cond.reason) == (False, "ScaleDownRefused")
    assert "below the replication factor 3 of t" in cond.message
    assert "scaling" not in step.status


def test_scale_down_drains_then_shrinks() -> None:
    five = topic("t", {p: [p % 5, (p + 1) % 5, (p + 2) % 5] for p in range(5)})
    step = day2_planner.next_step(view(3, sts_replicas=5, partitions=five), NOW)
    assert isinstance(step.action, Reassign)
    assert all(set(r) <= {0, 1, 2} for r in step.action.plan.values())
    scaling = step.status["scaling"]
    assert (scaling["phase"], scaling["fromReplicas"], scaling["toReplicas"]) == ("Draining", 5, 3)
    # moving: wait; never shrink while a replica is left on 3 or 4
    moving = frozenset({("t", 1)})
    step = day2_planner.next_step(
        view(3, sts_replicas=5, partitions=five, reassigning=moving, scaling=scaling), NOW
    )
    assert step.action is None and step.status["scaling"]["phase"] == "Draining"
    # an interrupted drain (the reassignment ended, replicas still on 4): drain again
    step = day2_planner.next_step(view(3, sts_replicas=5, partitions=five, scaling=scaling), NOW)
    assert isinstance(step.action, Reassign)
    drained = topic("t", {p: [p % 3, (p + 1) % 3, (p + 2) % 3] for p in range(5)})
    step = day2_planner.next_step(view(3, sts_replicas=5, partitions=drained, scaling=scaling), NOW)
    assert step.action == Resize(3)
    scaling = step.status["scaling"]
    step = day2_planner.next_step(view(3, partitions=drained, scaling=scaling), NOW)
    assert step.action is None and step.status["scaling"] is None


def test_scale_up_waits_for_the_new_brokers_then_balances() -> None:
    scaling = {"fromReplicas": 3, "toReplicas": 5, "startedAt": NOW}
    pods = {3: PodView(3, ready=False)}
    step = day2_planner.next_step(view(5, pods=pods, scaling=scaling, registered=range(4)), NOW)
    assert step.action is None
    assert "waiting for brokers 3, 4 to join" in step.status["scaling"]["message"]
    step = day2_planner.next_step(view(5, scaling=scaling), NOW)
    assert isinstance(step.action, Reassign)
    assert {r for replicas in step.action.plan.values() for r in replicas} & {3, 4}
    balanced = topic("t", {p: [p % 5, (p + 1) % 5, (p + 2) % 5] for p in range(5)})
    unled = topic("t", {p: [p % 5, (p + 1) % 5, (p + 2) % 5] for p in range(5)}, leader={0: 1})
    step = day2_planner.next_step(view(5, partitions=unled, scaling=step.status["scaling"]), NOW)
    assert step.action == ElectPreferred([("t", 0)])
    step = day2_planner.next_step(view(5, partitions=balanced, scaling=step.status["scaling"]), NOW)
    assert step.action is None and step.status["scaling"] is None
    assert step.status["lastScaling"]["phase"] == "Done"


# -- leaders and ZooKeeper ------------------------------------------------------------------


def test_leader_imbalance_over_the_threshold_elects() -> None:
    partitions = topic("t", {p: [p % 3, (p + 1) % 3] for p in range(30)}, leader={0: 1}, min_isr=1)
    # broker 0 leads 9 of its 10: 10 % off, not above the threshold
    assert day2_planner.next_step(view(partitions=partitions), NOW).action is None
    step = day2_planner.next_step(view(partitions=partitions, leader_imbalance_percent=5), NOW)
    assert step.action == ElectPreferred([("t", 0)])


def test_zookeeper_rolls_followers_first_the_leader_last() -> None:
    zk = {i: PodView(i, ready=True, outdated=True) for i in range(3)}
    modes = {0: "leader", 1: "follower", 2: "follower"}
    v = view(zookeeper_pods=zk, zookeeper_replicas=3, zookeeper_modes=modes)
    assert day2_planner.next_step(v, NOW).action == RestartZooKeeper(1)
    zk = {0: PodView(0, ready=True, outdated=True), 1: PodView(1, ready=True)}
    zk[2] = PodView(2, ready=False)
    v = view(zookeeper_pods=zk, zookeeper_replicas=3, zookeeper_modes=modes)
    step = day2_planner.next_step(v, NOW)
    assert step.action is None
    assert "servers 2 not ready" in step.conditions[-1].message
    assert rolling.zookeeper_restart_order({0: "leader", 1: None, 2: "follower"}) == [1, 2, 0]
    assert not rolling.zookeeper_may_restart(0, [0, 1], 3)
    assert rolling.zookeeper_may_restart(0, [0, 1, 2], 3)
