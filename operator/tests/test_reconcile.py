"""Pure decisions: replica assignment, the topic plan, the day-2 rules, conditions, drift."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa_operator import k8s, models, reconcile, status
from samsa_operator.reconcile import Broker, DesiredTopic, Load, PartitionState, TopicState


def spread(counts: Counter[int], brokers: list[Broker]) -> int:
    values = [counts[b.id] for b in brokers]
    return max(values) - min(values)


@given(
    n=st.integers(1, 7),
    partitions=st.integers(1, 40),
    rf=st.integers(1, 7),
    racks=st.integers(0, 3),
)
def test_assignment_is_balanced_and_rack_aware(
    n: int, partitions: int, rf: int, racks: int
) -> None:
    rf = min(rf, n)
    brokers = [Broker(i, f"r{i % racks}" if racks else None) for i in range(n)]
    assignment = reconcile.assign(brokers, partitions, rf)
    assert sorted(assignment) == list(range(partitions))
    load = Load.of([assignment])
    assert spread(load.leaders, brokers) <= 1
    if not racks or n % racks == 0:  # with uneven racks, spreading over racks comes first
        assert spread(load.replicas, brokers) <= 1
    rack_count = len({b.rack for b in brokers})
    rack_of = {b.id: b.rack for b in brokers}
    for replicas in assignment.values():
        assert len(replicas) == len(set(replicas)) == rf
        assert len({rack_of[r] for r in replicas}) == min(rf, rack_count)
    assert reconcile.assign(brokers, partitions, rf) == assignment  # deterministic


def test_growth_continues_the_numbering_and_the_balance() -> None:
    brokers = [Broker(i) for i in range(3)]
    first = reconcile.assign(brokers, 4, 2)
    more = reconcile.assign(brokers, 2, 2, existing=first)
    assert sorted(more) == [4, 5]
    load = Load.of([first, more])
    assert spread(load.leaders, brokers) == 0
    assert spread(load.replicas, brokers) == 0


def test_new_leaders_avoid_the_busiest_broker() -> None:
    brokers = [Broker(i) for i in range(3)]
    busy = Load.of([{p: [0, 1] for p in range(10)}])
    assignment = reconcile.assign(brokers, 2, 1, cluster_load=busy)
    assert {r[0] for r in assignment.values()} == {1, 2}


@pytest.mark.parametrize("rf", [0, 4])
def test_impossible_replication_factor(rf: int) -> None:
    with pytest.raises(reconcile.AssignmentError):
        reconcile.assign([Broker(i) for i in range(3)], 1, rf)


BROKERS = [Broker(0), Broker(1), Broker(2)]


def state(partitions: int, rf: int, config: dict[str, str] | None = None) -> TopicState:
    return TopicState("t", reconcile.assign(BROKERS, partitions, rf), config or {}, topic_id="id")


def test_plan_creates_with_assignment_and_config() -> None:
    plan = reconcile.plan_topic(DesiredTopic("t", 3, 2, {"retention.ms": "1"}), None, BROKERS)
    assert plan.create == reconcile.assign(BROKERS, 3, 2)
    assert plan.config_set == {"retention.ms": "1"}


def test_plan_grows_and_alters_configs() -> None:
    current = state(2, 2, {"retention.ms": "1", "cleanup.policy": "compact"})
    plan = reconcile.plan_topic(DesiredTopic("t", 4, 2, {"retention.ms": "2"}), current, BROKERS)
    assert plan.add_partitions is not None and sorted(plan.add_partitions) == [2, 3]
    assert plan.config_set == {"retention.ms": "2"}
    assert plan.config_delete == ["cleanup.policy"]
    same = reconcile.plan_topic(
        DesiredTopic("t", 2, 2, {"retention.ms": "1", "cleanup.policy": "compact"}),
        current,
        BROKERS,
    )
    assert same.in_sync


@pytest.mark.parametrize(
    ("desired", "current", "reason"),
    [
        (DesiredTopic("t", 1, 2, {}), state(3, 2), "PartitionDecrease"),
        (DesiredTopic("t", 3, 4, {}), state(3, 2), "ReplicationFactorTooLarge"),
        (DesiredTopic("t", 3, 4, {}), None, "ReplicationFactorTooLarge"),
    ],
)
def test_plan_refusals(desired: DesiredTopic, current: TopicState | None, reason: str) -> None:
    plan = reconcile.plan_topic(desired, current, BROKERS)
    assert plan.refusal is not None and plan.refusal.reason == reason
    assert plan.create is None and plan.add_partitions is None


def test_plan_changes_the_replication_factor_by_reassignment() -> None:
    current = state(3, 2)
    plan = reconcile.plan_topic(DesiredTopic("t", 3, 3, {}), current, BROKERS)
    assert plan.refusal is None and plan.reassign is not None and not plan.in_sync
    assert sorted(plan.reassign) == [0, 1, 2]
    for partition, replicas in plan.reassign.items():
        assert replicas[:2] == list(current.assignment[partition])
        assert sorted(replicas) == [0, 1, 2]


def p(replicas: list[int], isr: list[int], min_isr: int) -> PartitionState:
    return PartitionState("t", 0, replicas, isr, replicas[0], min_isr)


@pytest.mark.parametrize(
    ("partition", "blocked"),
    [
        (p([0, 1, 2], [0, 1, 2], 2), False),  # ISR above min: fine
        (p([0, 1, 2], [0, 1], 2), True),  # at min and broker 0 in ISR
        (p([0, 1, 2], [1, 2], 2), False),  # at min but broker 0 already out
        (p([0, 1, 2], [1], 2), True),  # already under min
        (p([0, 1], [0], 2), False),  # rf <= min.insync: skipped, or it blocks forever
        (p([1, 2, 3], [1], 2), False),  # no replica on broker 0
    ],
)
def test_restart_rule(partition: PartitionState, blocked: bool) -> None:
    assert bool(reconcile.restart_blockers(0, [partition])) == blocked


def test_restart_order_puts_the_controller_last() -> None:
    assert reconcile.restart_order([2, 0, 1], controller_id=0) == [1, 2, 0]
    assert reconcile.restart_order([2, 1], controller_id=0) == [1, 2]


def test_brokers_to_restart_by_config_hash() -> None:
    assert reconcile.brokers_to_restart({0: "a", 1: "b", 2: "c"}, {0: "a", 1: "x"}) == [1, 2]


def test_leader_imbalance() -> None:
    parts = [
        PartitionState("t", 0, [0, 1], [0, 1], 1),
        PartitionState("t", 1, [0, 1], [0, 1], 0),
        PartitionState("t", 2, [1, 0], [0, 1], 1),
    ]
    assert reconcile.leader_imbalance(parts) == {0: 0.5, 1: 0.0}


def test_conditions_keep_their_transition_time() -> None:
    first = status.merge_conditions([], [status.condition("Ready", False, "A", "", 1)], "t1")
    same = status.merge_conditions(first, [status.condition("Ready", False, "B", "", 2)], "t2")
    flip = status.merge_conditions(same, [status.condition("Ready", True, "C", "", 3)], "t3")
    assert [c["lastTransitionTime"] for c in (first[0], same[0], flip[0])] == ["t1", "t1", "t3"]
    assert same[0]["reason"] == "B"


def test_drift_ignores_server_defaults_and_immutable_fields() -> None:
    desired = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "s", "labels": {"a": "1"}},
        "spec": {
            "replicas": 3,
            "serviceName": "x",
            "template": {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 1}]}]}},
        },
    }
    actual = {
        "metadata": {"name": "s", "labels": {"a": "1", "extra": "kept"}, "uid": "u"},
        "spec": {
            "replicas": 3,
            "serviceName": "changed-but-immutable",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "ports": [{"containerPort": 1, "protocol": "TCP"}],
                            "terminationMessagePath": "/dev/termination-log",
                        }
                    ]
                }
            },
        },
        "status": {"replicas": 3},
    }
    assert k8s.drift_patch(desired, actual) is None
    actual["spec"]["replicas"] = 1
    patch = k8s.drift_patch(desired, actual)
    assert patch is not None and patch["spec"]["replicas"] == 3
    assert "serviceName" not in patch["spec"]


def test_spec_errors_name_the_field() -> None:
    with pytest.raises(models.SpecError) as err:
        models.parse_spec(models.TopicSpec, {"clusterRef": "c", "partitions": -2})
    assert "spec.partitions: Input should be greater than or equal to 1" in str(err.value)
