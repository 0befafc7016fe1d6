"""Apache Kafka's Java client (kafka-clients 4.3) against the 3-broker Samsa cluster (RF 3,
min.insync.replicas 2): an idempotent producer with acks=all, a consumer group with
cooperative-sticky assignment, and the AdminClient.

The scenarios run at once, in one run of tests/clients/java/JavaClient.java (one JVM start
for the module), which prints what each saw as JSON; each test judges a part of it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from java_support import java_client
from kafka_support import wait_until
from matrix_support import stored_batches

from samsa.local_cluster.cluster import LocalCluster

COUNT = 1000  # records the idempotent producer sends
PARTITIONS, EACH = 6, 300  # the group's partitions, and records produced at each of 3 steps


@pytest.fixture(scope="module")
def java(samsa_cluster: LocalCluster) -> dict[str, Any]:
    """What each JavaClient scenario found, by scenario."""
    bootstrap = samsa_cluster.bootstrap_servers
    return java_client(
        ["produce", "--bootstrap", bootstrap, "--topic", "java-produce",
         "--partitions", "3", "--count", str(COUNT)],
        ["group", "--bootstrap", bootstrap, "--topic", "java-group", "--group", "java-group",
         "--partitions", str(PARTITIONS), "--count", str(EACH)],
        ["admin", "--bootstrap", bootstrap, "--topic", "java-admin",
         "--group", "java-admin-group"],
    )  # fmt: skip


def test_idempotent_producer_acks_all_every_record_once_and_in_order(
    java: dict[str, Any], samsa_cluster: LocalCluster
) -> None:
    count, topic, found = COUNT, "java-produce", java["produce"]
    assert found["failure"] is None, found["failure"]
    assert (found["acked"], found["errors"]) == (count, {})
    read = found["read"]
    assert Counter(r for rows in read.values() for r in rows) == Counter(
        f"k{i}=v-{i}" for i in range(count)
    ), "every acknowledged record read back once"
    for rows in read.values():
        sent = [int(r.split("=v-")[1]) for r in rows]
        assert sent == sorted(sent), "a partition keeps the order records were sent in"
    assert sum(found["end_offsets"].values()) == count

    # acks=all: every replica holds every record; idempotence: every batch has a producer id
    # and sequence numbers.
    wait_until(
        lambda: sum(h.records_count for h in stored_batches(samsa_cluster, topic)) == 3 * count,
        what="every record on all 3 replicas",
    )
    headers = stored_batches(samsa_cluster, topic)
    assert all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers), headers[:3]


def test_cooperative_sticky_members_split_partitions_hand_over_and_consume_each_record_once(
    java: dict[str, Any],
) -> None:
    partitions, count, found = PARTITIONS, EACH, java["group"]
    a, b = found["members"]["a"], found["members"]["b"]
    assert found["failure"] is None, (found["failure"], found["steps"], a["events"], b["events"])
    assert a["error"] is None and b["error"] is None
    assert found["acked"] == 3 * count

    everything = set(range(partitions))
    values = [v for m in (a, b) for _, _, v in m["records"]]
    expected = {f"{prefix}-{i}" for prefix in ("first", "second", "third") for i in range(count)}
    counts = Counter(values)
    assert set(counts) == expected
    assert [v for v, n in counts.items() if n > 1] == [], "records consumed twice"

    def changes(member: dict[str, Any]) -> list[tuple[str, set[int]]]:
        return [(e["event"], set(e["partitions"])) for e in member["events"] if e["partitions"]]

    # Cooperative rebalancing: a gives up only the partitions b gets, and keeps the rest
    # throughout; when b leaves, a is given just b's partitions. Nothing is ever lost.
    (b_assigned, b_partitions), (b_revoked, b_gave_up) = changes(b)
    assert (b_assigned, b_revoked) == ("assigned", "revoked") and b_partitions == b_gave_up
    assert 0 < len(b_partitions) < partitions
    assert changes(a) == [
        ("assigned", everything),
        ("revoked", b_partitions),
        ("assigned", b_partitions),
        ("revoked", everything),
    ]
    assert {p for p, _, _ in b["records"]} <= b_partitions

    assert found["committed"] == found["end"], "every consumed record committed"
    assert sum(found["end"].values()) == 3 * count
    assert (found["group_state"], found["assignor"]) == ("Empty", "")


@pytest.fixture(scope="module")
def admin(java: dict[str, Any]) -> dict[str, Any]:
    """The AdminClient's calls: each call's result or error."""
    found: dict[str, Any] = java["admin"]
    assert found["failure"] is None, found["failure"]
    return found


def result(admin: dict[str, Any], call: str) -> Any:
    found = admin[call]
    assert found["error"] is None, (call, found)
    return found["result"]


def test_admin_describes_the_cluster_and_creates_lists_and_describes_topics(
    admin: dict[str, Any],
) -> None:
    cluster = result(admin, "describe_cluster")
    assert cluster["nodes"] == [0, 1, 2] and cluster["controller"] in (0, 1, 2)
    assert cluster["cluster_id"]
    result(admin, "create_topics")
    assert admin["create_existing"]["error"] == "TopicExistsException"
    assert result(admin, "list_topics") == ["java-admin", "java-admin-moved"]
    described = result(admin, "describe_topics")
    replicated = described["java-admin"]
    assert [p["partition"] for p in replicated] == [0, 1, 2]
    for p in replicated:
        assert sorted(p["replicas"]) == [0, 1, 2] and sorted(p["isr"]) == [0, 1, 2], p
        assert p["leader"] == p["replicas"][0], p
    placed = {p["partition"]: p["replicas"] for p in described["java-admin-moved"]}
    assert placed == {0: [0, 1], 1: [1, 0]}
    assert described["by_id"] == ["java-admin", 3], "a topic described by its id"


def test_admin_describes_and_alters_configs(admin: dict[str, Any]) -> None:
    described = result(admin, "describe_configs")
    assert described["topic"] == {
        "retention.ms": ["3600000", "DYNAMIC_TOPIC_CONFIG"],
        "min.insync.replicas": ["2", "STATIC_BROKER_CONFIG"],
        "cleanup.policy": ["delete", "DEFAULT_CONFIG"],
    }
    assert described["broker"] == {
        "min.insync.replicas": ["2", "STATIC_BROKER_CONFIG"],
        "default.replication.factor": ["3", "STATIC_BROKER_CONFIG"],
        "num.partitions": ["1", "DEFAULT_CONFIG"],
    }
    assert result(admin, "alter_configs") == {
        "retention.ms": ["7200000", "DYNAMIC_TOPIC_CONFIG"],
        "max.message.bytes": ["1048588", "DEFAULT_CONFIG"],
    }
    assert admin["alter_configs_invalid"]["error"] == "InvalidConfigurationException"


def test_admin_reassigns_partitions_and_elects_preferred_leaders(admin: dict[str, Any]) -> None:
    assert result(admin, "produce") == 110
    assert result(admin, "alter_reassignments") is None
    listed = result(admin, "list_reassignments")
    assert set(listed["first"]) <= {"java-admin-moved-0", "java-admin-moved-1"}
    moved = {p["partition"]: p for p in result(admin, "after_reassignment")}
    assert moved[0]["replicas"] == [2, 1] and sorted(moved[0]["isr"]) == [1, 2]
    assert moved[0]["leader"] in (1, 2), "a replica taken off gives up its leadership"
    assert moved[1]["replicas"] == [0, 1] and moved[1]["leader"] == 1
    assert result(admin, "elect_preferred") == {"java-admin-moved-1": None}
    assert result(admin, "elect_again") == {"java-admin-moved-1": "ElectionNotNeededException"}
    elected = {p["partition"]: p["leader"] for p in result(admin, "after_election")}
    assert elected[1] == 0
    assert result(admin, "read_moved") == {"0": 50, "1": 50}, "every record where it moved"


def test_admin_alters_lists_and_describes_consumer_group_offsets(admin: dict[str, Any]) -> None:
    assert result(admin, "alter_group_offsets") is None
    assert result(admin, "list_group_offsets") == {
        "java-admin-0": [5, "five"],
        "java-admin-1": [0, ""],
    }
    assert result(admin, "list_groups") == [["", "Classic"]]
    assert result(admin, "describe_group") == ["Empty", 0]


def test_admin_deletes_records(admin: dict[str, Any]) -> None:
    assert result(admin, "delete_records") == 4
    assert result(admin, "earliest_after_delete") == 4


def test_admin_deletes_topics(admin: dict[str, Any]) -> None:
    assert result(admin, "delete_topics") is None
