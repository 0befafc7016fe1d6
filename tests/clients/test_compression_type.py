"""A topic's compression.type and KIP-467's record errors, against the 3-broker Samsa cluster
(RF 3, min.insync.replicas 2), with the clients users run.

One topic per codec (and uncompressed): librdkafka, kafka-python and the Java producer each
send records uncompressed and with another codec; all three read every record back, and every
batch on every replica carries the topic's codec, as our reading of the segment files and
Kafka's own kafka-dump-log (DumpLogSegments, which decompresses each record) both show.

A batch of 100 records to a compacted topic, every tenth without a key: librdkafka and the
Java producer fail exactly those ten as invalid, and the others as part of a failed batch, as
they do against Apache Kafka (tests/compat/test_compat_compression.py compares the two).
The same batch with every tenth record two hours ahead of the brokers' clocks, where Kafka's
default message.timestamp.after.max.ms is an hour: the broker's error is INVALID_TIMESTAMP, and
those ten fail (INVALID_RECORD in librdkafka, which gives every named record that code, and
InvalidRecordException with Kafka's message in the Java producer); the others can be sent
again, and a topic that takes any time ahead stores them all.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition
from matrix_support import stored_batches

from samsa.local_cluster.cluster import LocalCluster
from samsa.protocol.record_batch import COMPRESSION_NAMES
from samsa_dev.kafka import java_program, run_tool

PRODUCE_CHECKS = Path(__file__).resolve().parent / "java/ProduceChecks.java"
TOPIC_CODECS = ("uncompressed", "gzip", "snappy", "lz4", "zstd")
# What each client sends with beside "none": a codec that differs from most topics'.
CLIENT_CODECS = {"librdkafka": "lz4", "kafka-python": "gzip", "java": "zstd"}
EACH = 50  # records each producer sends to each topic, in each of its two codecs
TOTAL = EACH * 2 * len(CLIENT_CODECS)


def stored_codec(name: str) -> str:
    """The codec name a batch header gives, for a topic's compression.type."""
    return "none" if name == "uncompressed" else name


def create(bootstrap: str, topics: dict[str, dict[str, str]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(t, 1, 3, config=config) for t, config in topics.items()]
    for future in admin.create_topics(new).values():
        future.result(30)


def java(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        java_program(PRODUCE_CHECKS, list(args), heap="256m"),
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def row(key: bytes | None, value: bytes | None, headers: Any) -> str:
    """A record as ProduceChecks.java prints it: key=value|header=value..."""
    text = f"{(key or b'').decode()}={(value or b'').decode()}"
    for hkey, hvalue in headers or []:
        text += f"|{hkey}={'null' if hvalue is None else hvalue.decode()}"
    return text


def expected() -> Counter[str]:
    """Every record every producer sent to a topic."""
    rows: Counter[str] = Counter()
    for client in CLIENT_CODECS:
        for codec in ("none", CLIENT_CODECS[client]):
            prefix = "java" if client == "java" else f"{client}-{codec}"
            rows.update(
                row(f"{prefix}-{i}".encode(), f"v-{i}".encode(), [("i", str(i).encode())])
                for i in range(EACH)
            )
    return rows


def fields(client: str, codec: str, i: int) -> dict[str, Any]:
    """The i-th record a Python client sends in `codec`, to partition 0."""
    return {
        "key": f"{client}-{codec}-{i}".encode(),
        "value": f"v-{i}".encode(),
        "headers": [("i", str(i).encode())],
        "partition": 0,
    }


def produce_librdkafka(bootstrap: str, topics: list[str], codec: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "acks": "all"})
    errors: list[Any] = []
    for topic in topics:
        for i in range(EACH):
            p.produce(
                topic,
                **fields("librdkafka", codec, i),
                on_delivery=lambda err, _msg: err and errors.append(err),
            )
    assert p.flush(60) == 0 and not errors, errors


def produce_kafka_python(bootstrap: str, topics: list[str], codec: str) -> None:
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        acks="all",
        linger_ms=5,
    )
    try:
        futures = [
            p.send(topic, **fields("kafka-python", codec, i))
            for topic in topics
            for i in range(EACH)
        ]
        for future in futures:
            future.get(timeout=60)
    finally:
        p.close()


def read_librdkafka(bootstrap: str, topic: str) -> Counter[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}"})
    c.assign([TopicPartition(topic, 0, 0)])
    got: Counter[str] = Counter()
    deadline = time.monotonic() + 60
    try:
        while sum(got.values()) < TOTAL and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got[row(msg.key(), msg.value(), msg.headers())] += 1
    finally:
        c.close()
    return got


def read_kafka_python(bootstrap: str, topic: str) -> Counter[str]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, consumer_timeout_ms=10_000)
    tp = KafkaPythonPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got: Counter[str] = Counter()
    try:
        for msg in c:
            got[row(msg.key, msg.value, msg.headers)] += 1
            if sum(got.values()) == TOTAL:
                break
    finally:
        c.close()
    return got


@pytest.fixture(scope="module")
def codec_topics(samsa_cluster: LocalCluster) -> dict[str, Any]:
    """Each codec's topic, written by the three producers in two codecs each; what the Java
    consumer read back."""
    bootstrap = samsa_cluster.bootstrap_servers
    topics = {f"compression-{codec}": codec for codec in TOPIC_CODECS}
    create(bootstrap, {t: {"compression.type": codec} for t, codec in topics.items()})
    for codec in ("none", CLIENT_CODECS["librdkafka"]):
        produce_librdkafka(bootstrap, list(topics), codec)
    for codec in ("none", CLIENT_CODECS["kafka-python"]):
        produce_kafka_python(bootstrap, list(topics), codec)
    found = {}
    for run, codec in enumerate(("none", CLIENT_CODECS["java"])):
        # What is there to read once this run has sent its records.
        written = TOTAL - (1 - run) * EACH
        args = ["--topics", ",".join(topics), "--compression", codec, "--count", str(EACH)]
        found = java("codecs", "--bootstrap", bootstrap, *args, "--expect", str(written))
        assert found["errors"] == {}, found["errors"]
    return {"topics": topics, "java": found}


def test_librdkafka_kafka_python_and_java_read_every_record_back(
    codec_topics: dict[str, Any], samsa_cluster: LocalCluster
) -> None:
    bootstrap = samsa_cluster.bootstrap_servers
    for topic in codec_topics["topics"]:
        assert Counter(codec_topics["java"]["read"][topic]) == expected(), f"java read {topic}"
        assert read_librdkafka(bootstrap, topic) == expected(), f"librdkafka read {topic}"
        assert read_kafka_python(bootstrap, topic) == expected(), f"kafka-python read {topic}"


def test_every_stored_batch_carries_the_topics_codec(
    codec_topics: dict[str, Any], samsa_cluster: LocalCluster
) -> None:
    for topic, codec in codec_topics["topics"].items():
        headers = stored_batches(samsa_cluster, topic)
        # 3 replicas of 6 producer runs, at least one batch each.
        assert sum(h.records_count for h in headers) == 3 * TOTAL, topic
        assert {COMPRESSION_NAMES[h.compression] for h in headers} == {stored_codec(codec)}


def test_kafka_dump_log_reads_the_segments_and_their_codecs(
    codec_topics: dict[str, Any], samsa_cluster: LocalCluster
) -> None:
    """Kafka's DumpLogSegments decompresses every record of Samsa's segment files."""
    for topic, codec in codec_topics["topics"].items():
        segments = sorted(samsa_cluster.broker_dir(0).glob(f"{topic}-0/*.log"))
        done = run_tool(
            "org.apache.kafka.tools.DumpLogSegments",
            ["--deep-iteration", "--print-data-log", "--files", ",".join(map(str, segments))],
        )
        assert done.returncode == 0, done.stderr[-2000:]
        batches = re.findall(
            r"^baseOffset: .* compresscodec: (\w+) .*isvalid: (\w+)$", done.stdout, re.M
        )
        assert batches and set(batches) == {(stored_codec(codec), "true")}, (topic, batches)
        records = re.findall(r"^\| offset: \d+ .* key: (\S+) .*payload: (\S+)", done.stdout, re.M)
        assert Counter(f"{k}={v}" for k, v in records) == Counter(
            r.split("|")[0] for r in expected().elements()
        ), topic


# -- KIP-467: the records that made a batch fail ----------------------------------------------


@pytest.fixture(scope="module")
def compacted(samsa_cluster: LocalCluster) -> str:
    topic = "record-errors-compacted"
    create(samsa_cluster.bootstrap_servers, {topic: {"cleanup.policy": "compact"}})
    return topic


def test_librdkafka_fails_only_the_keyless_records(
    samsa_cluster: LocalCluster, compacted: str
) -> None:
    reports: list[KafkaError | None] = []
    # One batch of 100: sent before the linger ends, and the batch takes them all.
    p = Producer(
        {
            "bootstrap.servers": samsa_cluster.bootstrap_servers,
            "linger.ms": 2000,
            "batch.num.messages": 1000,
            "acks": "all",
        }
    )
    for i in range(100):
        key = None if i % 10 == 0 else f"k{i}".encode()
        p.produce(
            compacted,
            key=key,
            value=b"v",
            partition=0,
            on_delivery=lambda err, _msg: reports.append(err),
        )
    assert p.flush(60) == 0
    codes = [None if e is None else e.code() for e in reports]
    assert [i for i, c in enumerate(codes) if c == KafkaError.INVALID_RECORD] == list(
        range(0, 100, 10)
    ), codes
    # librdkafka's own code for a record that failed because of another (Kafka gives the same).
    invalid_different_record = -138
    assert Counter(codes) == {KafkaError.INVALID_RECORD: 10, invalid_different_record: 90}


def test_the_java_producer_fails_only_the_keyless_records(
    samsa_cluster: LocalCluster, compacted: str
) -> None:
    found = java(
        "keyless",
        "--bootstrap",
        samsa_cluster.bootstrap_servers,
        "--topic",
        compacted,
        "--count",
        "100",
    )["results"]
    invalid = [i for i, r in enumerate(found) if r.startswith("InvalidRecordException:")]
    assert invalid == list(range(0, 100, 10)), found
    assert all("Compacted topic cannot accept message without key" in found[i] for i in invalid), (
        found
    )
    others = {r for i, r in enumerate(found) if i not in invalid}
    assert others == {
        "KafkaException: Failed to append record because it was part of a batch which had one "
        "more more invalid records"
    }


# -- KIP-467 and KIP-937: records too far ahead of the leader's clock ---------------------------

AHEAD_MS = 2 * 3_600_000  # past Kafka's default message.timestamp.after.max.ms, an hour


@pytest.fixture(scope="module")
def bounded(samsa_cluster: LocalCluster) -> dict[str, str]:
    """A topic at Kafka's default bounds, and one that takes any time ahead."""
    topics = {"record-errors-ahead": {}, "record-errors-any-time": {}}
    topics["record-errors-any-time"] = {"message.timestamp.after.max.ms": str(2**63 - 1)}
    create(samsa_cluster.bootstrap_servers, topics)
    return {"default": "record-errors-ahead", "any": "record-errors-any-time"}


def send_ahead(bootstrap: str, topic: str, indexes: list[int]) -> list[KafkaError | None]:
    """One librdkafka batch of these records (key k<i>), every tenth two hours ahead of now:
    what each one's delivery report said."""
    reports: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2000, "acks": "all"})
    now = int(time.time() * 1000)
    for i in indexes:
        p.produce(
            topic,
            key=f"k{i}".encode(),
            value=b"v",
            partition=0,
            timestamp=now + AHEAD_MS if i % 10 == 0 else now,
            on_delivery=lambda err, _msg: reports.append(err),
        )
    assert p.flush(60) == 0
    return reports


def high_watermark(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "record-errors-ahead"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


def test_librdkafka_fails_only_the_records_two_hours_ahead(
    samsa_cluster: LocalCluster, bounded: dict[str, str]
) -> None:
    bootstrap, topic = samsa_cluster.bootstrap_servers, bounded["default"]
    sent = send_ahead(bootstrap, topic, list(range(100)))
    codes = [None if e is None else e.code() for e in sent]
    # librdkafka gives each named record INVALID_RECORD, whatever the batch's error (against
    # Kafka too: tests/compat/test_compat_compression.py), and its message.
    assert [i for i, c in enumerate(codes) if c == KafkaError.INVALID_RECORD] == list(
        range(0, 100, 10)
    ), codes
    invalid_different_record = -138
    assert Counter(codes) == {KafkaError.INVALID_RECORD: 10, invalid_different_record: 90}
    assert high_watermark(bootstrap, topic) == 0  # the batch was refused whole
    # The others, sent again (as an application does with _INVALID_DIFFERENT_RECORD), go in.
    again = [i for i, c in enumerate(codes) if c == invalid_different_record]
    assert send_ahead(bootstrap, topic, again) == [None] * 90
    assert high_watermark(bootstrap, topic) == 90
    # A topic that takes any time ahead stores the whole batch.
    assert send_ahead(bootstrap, bounded["any"], list(range(100))) == [None] * 100


def test_the_java_producer_fails_only_the_records_two_hours_ahead(
    samsa_cluster: LocalCluster, bounded: dict[str, str]
) -> None:
    found = java(
        "ahead",
        "--bootstrap",
        samsa_cluster.bootstrap_servers,
        "--topic",
        bounded["default"],
        "--count",
        "100",
        "--ahead-ms",
        str(AHEAD_MS),
    )["results"]
    # Several records refused: each one an InvalidRecordException with Kafka's message.
    refused = re.compile(
        r"InvalidRecordException: Timestamp \d+ of message with offset (\d+) is out of range\. "
        r"The timestamp should be within \[-\d+, \d+\]"
    )
    named = [i for i, r in enumerate(found) if refused.fullmatch(r)]
    assert named == list(range(0, 100, 10)), found
    assert all(refused.fullmatch(found[i])[1] == str(i) for i in named), found  # type: ignore[index]
    others = {r for i, r in enumerate(found) if i not in named}
    assert others == {
        "KafkaException: Failed to append record because it was part of a batch which had one "
        "more more invalid records"
    }
