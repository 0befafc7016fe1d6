"""Consumer lag and partition health on /metrics, against the 3-broker cluster, read as a
Prometheus scraping every broker reads them and compared with what Kafka's own
``kafka-consumer-groups --describe`` prints for the same group at the same moment."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic
from kafka_support import admin, create_topic, name_for_test, produce, wait_until
from monitoring_support import (
    by_labels,
    consume_and_commit,
    scrape,
    scrape_cluster,
    scrape_url,
)

from samsa.broker.consumer_lag import DEFAULT_TIMEOUT_S as LAG_TIMEOUT_S
from samsa.local_cluster.cluster import LocalCluster
from samsa.testing.cluster import replicated_cluster
from samsa.testing.inprocess import InProcessBroker
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


@pytest.fixture
def names(request: pytest.FixtureRequest) -> tuple[str, str]:
    """A topic name and a group id unique to the test."""
    return name_for_test(request.node.name, "t"), name_for_test(request.node.name, "g")


def test_lag_metrics_match_kafka_consumer_groups_and_follow_produce_and_commit(
    samsa_cluster: LocalCluster, names: tuple[str, str]
) -> None:
    topic, group = names
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


def test_a_standalone_broker_exports_lag_and_partition_health(
    samsa_broker: InProcessBroker, names: tuple[str, str]
) -> None:
    """Standalone, every partition is local: no other broker is asked."""
    topic, group = names
    bootstrap = samsa_broker.bootstrap_servers
    create_topic(bootstrap, topic)
    written_ms = int(time.time() * 1000) - 30_000
    produce(bootstrap, topic, [b"v"] * 10, timestamps=[written_ms] * 10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    finally:
        consumer.close()

    samples = scrape_url(f"{samsa_broker.http_url}/metrics")
    keys = ("consumergroup", "topic", "partition")
    assert by_labels(samples, "kafka_consumergroup_current_offset", keys, topic=topic) == {
        (group, topic, "0"): [4]
    }
    assert by_labels(samples, "kafka_consumergroup_lag", keys, topic=topic) == {
        (group, topic, "0"): [6]
    }
    [[age]] = by_labels(samples, "kafka_consumergroup_lag_seconds", keys, topic=topic).values()
    assert 30 <= age < 30 + (time.time() * 1000 - written_ms - 30_000) / 1000 + 1
    for name, value in [("current_offset", 10), ("oldest_offset", 0), ("replicas", 1),
                        ("in_sync_replica", 1), ("leader_is_preferred", 1),
                        ("under_replicated_partition", 0)]:  # fmt: skip
        found = by_labels(samples, f"kafka_topic_partition_{name}", KEYS, topic=topic)
        assert found == {(topic, "0"): [value]}, name
    [[total]] = by_labels(samples, "kafka_log_dir_total_bytes", ()).values()
    [[usable]] = by_labels(samples, "kafka_log_dir_usable_bytes", ()).values()
    assert 0 < usable <= total


def test_a_leader_that_does_not_answer_leaves_its_partition_out_of_a_bounded_scrape(
    tmp_path: Path, names: tuple[str, str]
) -> None:
    """The coordinator asks a paused leader for its log end offset: the scrape still answers
    within the lag's bound, with every other partition's lag and none for the paused one."""
    topic, group = names
    with replicated_cluster(tmp_path / "cluster") as cluster:
        bootstrap = cluster.bootstrap_servers
        client = admin(bootstrap)  # kept alive until the answer is in
        client.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(20)
        for p in range(PARTITIONS):
            produce(bootstrap, topic, [b"v"] * 3, partition=p, acks="all")
        consume_and_commit(bootstrap, topic, group, 3 * PARTITIONS)

        def lag_on(broker: int) -> set[str]:
            """The partitions of the group's lag series on one broker's /metrics."""
            samples = scrape(cluster.broker(broker).http_port)
            lag = by_labels(samples, "kafka_consumergroup_lag", KEYS, consumergroup=group)
            return {p for _, p in lag}

        def coordinator() -> int | None:
            return next((b for b in range(3) if len(lag_on(b)) == PARTITIONS), None)

        # A tuple, so that broker 0 counts as found.
        (exporter,) = wait_until(lambda: (b := coordinator()) is not None and (b,), what="lag")
        leaders = by_labels(scrape_cluster(cluster), "kafka_topic_partition_leader", KEYS,
                            topic=topic)  # fmt: skip
        paused, partition = next(
            (int(value), int(p)) for (_, p), [value] in leaders.items() if value != exporter
        )
        cluster.signal_broker(paused, signal.SIGSTOP)
        try:
            started = time.monotonic()
            lag = lag_on(exporter)
            took = time.monotonic() - started
        finally:
            cluster.signal_broker(paused, signal.SIGCONT)
        # It waited for the paused leader as long as its bound, and no longer.
        assert LAG_TIMEOUT_S - 0.5 <= took < LAG_TIMEOUT_S + 2, took
        assert lag == {str(p) for p in range(PARTITIONS)} - {str(partition)}
