"""Consumer lag and partition health on /metrics, against the 3-broker cluster, read as a
Prometheus scraping every broker reads them and compared with what Kafka's own
``kafka-consumer-groups --describe`` prints for the same group at the same moment."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import NewTopic
from kafka_support import admin, name_for_test, produce, wait_until
from monitoring_support import by_labels, consume_and_commit, scrape_cluster

from samsa.local_cluster.cluster import LocalCluster
from samsa_dev.kafka import run_tool

PARTITIONS = 3
KEYS = ("topic", "partition")


def describe(bootstrap: str, group: str) -> dict[int, tuple[int, int, int]]:
    """kafka-consumer-groups --describe: (current offset, log end offset, lag) per partition."""
    done = run_tool(
        "kafka-consumer-groups", ["--bootstrap-server", bootstrap, "--describe", "--group", group]
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.split() for line in done.stdout.splitlines() if line.strip()]
    header = next(i for i, cells in enumerate(lines) if cells[:1] == ["GROUP"])
    rows = [dict(zip(lines[header], cells, strict=False)) for cells in lines[header + 1 :]]
    return {
        int(r["PARTITION"]): (int(r["CURRENT-OFFSET"]), int(r["LOG-END-OFFSET"]), int(r["LAG"]))
        for r in rows
    }


def group_series(cluster: LocalCluster, group: str, topic: str) -> dict[str, dict]:
    """Each consumer group series of ``group`` on ``topic``, by name, keyed by partition."""
    samples = scrape_cluster(cluster)
    out = {}
    for name in (
        "kafka_consumergroup_current_offset",
        "kafka_consumergroup_lag",
        "kafka_consumergroup_lag_seconds",
    ):
        found = by_labels(samples, name, ("partition",), consumergroup=group, topic=topic)
        out[name] = {int(p): values for (p,), values in found.items()}
    for name in ("kafka_consumergroup_current_offset_sum", "kafka_consumergroup_lag_sum"):
        out[name] = by_labels(samples, name, (), consumergroup=group, topic=topic).get((), [])
    return out


def test_lag_metrics_match_kafka_consumer_groups_and_follow_produce_and_commit(
    samsa_cluster: LocalCluster, request: pytest.FixtureRequest
) -> None:
    topic = name_for_test(request.node.name, "t")
    group = name_for_test(request.node.name, "g")
    bootstrap = samsa_cluster.bootstrap_servers
    client = admin(bootstrap)
    client.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(20)
    for p in range(PARTITIONS):
        produce(bootstrap, topic, [b"first"] * 5, partition=p, acks="all")
    consume_and_commit(bootstrap, topic, group, 5 * PARTITIONS)

    caught_up = wait_until(
        lambda: (
            (s := group_series(samsa_cluster, group, topic))
            and len(s["kafka_consumergroup_lag"]) == PARTITIONS
            and s
        ),
        what="the group's series on /metrics",
    )
    # Each partition's series comes from one broker only: the group's coordinator.
    assert caught_up["kafka_consumergroup_current_offset"] == {p: [5] for p in range(PARTITIONS)}
    for name in ("kafka_consumergroup_lag", "kafka_consumergroup_lag_seconds"):
        assert caught_up[name] == {p: [0] for p in range(PARTITIONS)}
    assert caught_up["kafka_consumergroup_lag_sum"] == [0]
    assert caught_up["kafka_consumergroup_current_offset_sum"] == [5 * PARTITIONS]

    # Records written a minute ago (their CreateTime), not consumed: lag rises, and its age in
    # seconds is the age of the first unconsumed record.
    written_ms = int(time.time() * 1000) - 60_000
    behind = {0: 1, 1: 4, 2: 7}
    for p, n in behind.items():
        produce(bootstrap, topic, [b"second"] * n, partition=p, acks="all",
                timestamps=[written_ms] * n)  # fmt: skip
    # Nothing is produced or committed between the scrape and the tool's run.
    lagging = group_series(samsa_cluster, group, topic)
    described = describe(bootstrap, group)
    for p, n in behind.items():
        assert described[p] == (5, 5 + n, n), described
        assert lagging["kafka_consumergroup_current_offset"][p] == [5]
        assert lagging["kafka_consumergroup_lag"][p] == [n]
        (age,) = lagging["kafka_consumergroup_lag_seconds"][p]
        assert 60 <= age < 60 + (time.time() * 1000 - written_ms - 60_000) / 1000 + 1, age
    assert lagging["kafka_consumergroup_lag_sum"] == [sum(behind.values())]

    # The leaders' partition series agree with the tool's log end offsets, once each.
    samples = scrape_cluster(samsa_cluster)
    current = by_labels(samples, "kafka_topic_partition_current_offset", KEYS, topic=topic)
    assert current == {(topic, str(p)): [5 + n] for p, n in behind.items()}
    replicas = by_labels(samples, "kafka_topic_partition_replicas", KEYS, topic=topic)
    assert set(replicas) == {(topic, str(p)) for p in range(PARTITIONS)}
    assert all(v == [3] for v in replicas.values())
    name = "kafka_topic_partition_under_replicated_partition"
    assert all(v == [0] for v in by_labels(samples, name, KEYS, topic=topic).values())

    # The consumer reads the rest and commits: lag falls to 0, in both.
    consume_and_commit(bootstrap, topic, group, sum(behind.values()))
    done = wait_until(
        lambda: (
            (s := group_series(samsa_cluster, group, topic))
            and s["kafka_consumergroup_lag_sum"] == [0]
            and s
        ),
        what="lag back to 0",
    )
    assert done["kafka_consumergroup_lag_seconds"] == {p: [0] for p in range(PARTITIONS)}
    assert {p: row[2] for p, row in describe(bootstrap, group).items()} == dict.fromkeys(behind, 0)
