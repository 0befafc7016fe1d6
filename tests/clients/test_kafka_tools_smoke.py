"""Apache Kafka's own command-line tools against a 3-broker Samsa cluster: a smoke test that
the jars and the launcher work; the full tool matrix lives beside it."""

from __future__ import annotations

from samsa.dev.kafka import run_tool


def test_kafka_topics_creates_and_describes_a_replicated_topic(bootstrap: str, topic: str) -> None:
    created = run_tool(
        "kafka-topics",
        ["--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", "3"],
    )
    assert created.returncode == 0, created.stderr
    described = run_tool(
        "kafka-topics", ["--bootstrap-server", bootstrap, "--describe", "--topic", topic]
    )
    assert described.returncode == 0, described.stderr
    rows = [line for line in described.stdout.splitlines() if "Partition:" in line]
    assert len(rows) == 3
    assert all(
        "Replicas: " in r and len(r.split("Replicas: ")[1].split()[0].split(",")) == 3 for r in rows
    )
