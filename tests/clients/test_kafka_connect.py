"""Kafka Connect (distributed mode, 4.3.1) against the 3-broker Samsa cluster: its config,
offset and status topics are compacted Samsa topics; a FileStreamSource connector moves a file
into a topic and a FileStreamSink connector moves it back out, byte for byte; a worker killed
with kill -9 and started again resumes where its committed offsets say, so lines appended after
the restart arrive once and nothing from before is repeated.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka_support import consume, wait_until
from typer.testing import CliRunner

from samsa.local_cluster.cluster import LocalCluster
from samsa_dev import jars
from samsa_dev.cli import dev_app
from samsa_dev.connect import FILE_SINK, FILE_SOURCE, ConnectError, ConnectWorker

# Workers start in 15-25 s on a loaded 2-core machine.
READY_TIMEOUT = 120.0
FLOW_TIMEOUT = 60.0


def lines(first: int, count: int) -> bytes:
    # ASCII only: FileStreamSourceTask counts its file position in characters and seeks by
    # bytes on restart, so a multi-byte character before the committed position would shift
    # the resumed read (a limitation of the connector, not of the brokers).
    return b"".join(
        f'{n:05d} {{"campaign": "c{n % 7}", "text": "line {n}"}} !#$%&*+-/<=>?@\n'.encode()
        for n in range(first, first + count)
    )


@pytest.fixture(scope="module")
def worker(
    tmp_path_factory: pytest.TempPathFactory, samsa_cluster: LocalCluster
) -> Iterator[ConnectWorker]:
    """One worker for the module (a JVM start costs 15-25 s here); each test adds its own
    connectors, topic and files."""
    try:
        jars.fetch("connect")
    except jars.JarsUnavailable as exc:
        pytest.fail(str(exc))
    w = ConnectWorker(
        tmp_path_factory.mktemp("connect"),
        samsa_cluster.bootstrap_servers,
        "connect-cluster",
        # The worker runs for a minute: the optimising compiler would cost more than it gives.
        jvm_options=("-XX:TieredStopAtLevel=1",),
    )
    w.start().wait_ready(READY_TIMEOUT)
    try:
        yield w
    finally:
        if w.running():
            w.stop()


def topic_configs(bootstrap: str, topics: list[str]) -> dict[str, dict[str, str]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.describe_configs([ConfigResource("topic", t) for t in topics])
    return {r.name: {k: v.value for k, v in f.result(30).items()} for r, f in futures.items()}


def partition_counts(bootstrap: str, topics: list[str]) -> dict[str, tuple[int, int]]:
    """Each topic's partition count and the replication factor of its partition 0."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {
        t: (len(md.topics[t].partitions), len(md.topics[t].partitions[0].replicas))
        for t in topics
        if t in md.topics and md.topics[t].error is None
    }


def source_offsets(bootstrap: str, offsets_topic: str) -> dict[str, Any]:
    """The source offsets as the offsets topic holds them: the newest value of each key (the
    key as JSON in Python's spelling)."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(offsets_topic, timeout=10)
    return {
        json.dumps(json.loads(r.key)): json.loads(r.value) if r.value else None
        for p in md.topics[offsets_topic].partitions
        for r in consume(bootstrap, offsets_topic, p)
        if r.key is not None
    }


def connectors_running(worker: ConnectWorker, *names: str) -> bool:
    for name in names:
        status = worker.status(name)
        states = [status["connector"]["state"], *(t["state"] for t in status["tasks"])]
        assert "FAILED" not in states, json.dumps(status)
        if len(states) < 2 or set(states) != {"RUNNING"}:
            return False
    return True


def file_connectors(
    worker: ConnectWorker, name: str, topic: str, source_file: Path, sink_file: Path
) -> tuple[str, str]:
    """A FileStreamSource reading `source_file` into `topic` and a FileStreamSink writing the
    topic to `sink_file`; their names, once both run.

    The source creates its topic through Connect's topic creation (KIP-158), with one partition
    so that the sink writes the lines in the order the source read them."""
    source, sink = f"{name}-source", f"{name}-sink"
    worker.put_connector(
        source,
        {
            "connector.class": FILE_SOURCE,
            "file": str(source_file),
            "topic": topic,
            "tasks.max": "1",
            "topic.creation.default.partitions": "1",
            "topic.creation.default.replication.factor": "3",
        },
    )
    worker.put_connector(
        sink,
        {"connector.class": FILE_SINK, "file": str(sink_file), "topics": topic, "tasks.max": "1"},
    )
    wait_until(
        lambda: connectors_running(worker, source, sink),
        FLOW_TIMEOUT,
        0.5,
        f"{source} and {sink} RUNNING",
        retry_on=(ConnectError,),
    )
    return source, sink


def wait_copied(source_file: Path, sink_file: Path, what: str) -> None:
    wait_until(
        lambda: sink_file.exists() and sink_file.read_bytes() == source_file.read_bytes(),
        FLOW_TIMEOUT,
        0.2,
        what,
    )


def end_offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)
    finally:
        consumer.close()
    return int(low), int(high)


def test_internal_topics_are_compacted_and_a_file_goes_through_samsa_and_back(
    worker: ConnectWorker, bootstrap: str, topic: str, tmp_path: Path
) -> None:
    root = worker.rest("GET", "/")
    cluster_id = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).cluster_id
    assert root["kafka_cluster_id"] == cluster_id

    group = worker.properties["group.id"]
    internal = [f"{group}-configs", f"{group}-offsets", f"{group}-status"]
    configs = topic_configs(bootstrap, internal)
    assert {t: c["cleanup.policy"] for t, c in configs.items()} == dict.fromkeys(
        internal, "compact"
    )
    # Connect's defaults: one partition for the configs (their order matters), 25 and 5 for the
    # others; the brokers' default replication factor (3) for all.
    assert partition_counts(bootstrap, internal) == {
        internal[0]: (1, 3),
        internal[1]: (25, 3),
        internal[2]: (5, 3),
    }

    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_bytes(lines(0, 1000))
    file_connectors(worker, "copy", topic, source_file, sink_file)
    wait_copied(source_file, sink_file, "the sink file to equal the source file")
    assert partition_counts(bootstrap, [topic]) == {topic: (1, 3)}
    assert end_offsets(bootstrap, topic) == (0, 1000)

    # The records are the JSON converter's envelopes: a string schema and the line.
    [first] = consume(bootstrap, topic, 0, 0, 1)
    assert first.value is not None
    assert json.loads(first.value) == {
        "schema": {"type": "string", "optional": False},
        "payload": lines(0, 1).decode().rstrip("\n"),
    }


@pytest.mark.slow
def test_a_worker_killed_and_started_again_resumes_from_its_committed_offsets(
    worker: ConnectWorker, bootstrap: str, topic: str, tmp_path: Path
) -> None:
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_bytes(lines(0, 1000))
    source, sink = file_connectors(worker, "resume", topic, source_file, sink_file)
    wait_copied(source_file, sink_file, "the sink file to equal the source file")

    # Kill the worker only once both sides have committed all they did, so that a restart
    # that ignored the committed offsets would show as duplicated lines.
    offsets_topic = worker.properties["offset.storage.topic"]
    size = len(source_file.read_bytes())
    position_key = json.dumps([source, {"filename": str(source_file)}])
    wait_until(
        lambda: source_offsets(bootstrap, offsets_topic).get(position_key) == {"position": size},
        FLOW_TIMEOUT,
        0.5,
        "the source's file position committed in the offsets topic",
    )
    committed = {
        "partition": {"kafka_topic": topic, "kafka_partition": 0},
        "offset": {"kafka_offset": 1000},
    }
    wait_until(
        lambda: worker.offsets(sink) == [committed],
        FLOW_TIMEOUT,
        0.5,
        "the sink's offset committed",
    )

    worker.kill()
    with source_file.open("ab") as f:
        f.write(lines(1000, 200))
    worker.start().wait_ready(READY_TIMEOUT)

    wait_copied(
        source_file, sink_file, "the lines appended while it was down in the sink file, once each"
    )
    assert connectors_running(worker, source, sink)
    # And it goes on following the file.
    with source_file.open("ab") as f:
        f.write(lines(1200, 100))
    wait_copied(source_file, sink_file, "the lines appended after the restart in the sink file")
    assert end_offsets(bootstrap, topic) == (0, 1300), "each line produced to the topic once"


def test_samsa_dev_connect_refuses_a_malformed_override_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        dev_app, ["connect", "--data-dir", str(tmp_path), "--override", "group.id"]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: group.id: an override must look like key=value"
    ]
    assert not (tmp_path / "worker.properties").exists()
