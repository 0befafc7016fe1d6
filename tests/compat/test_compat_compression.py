"""The differential suite on what a broker does inside a producer's batch: the topic's
compression.type (and KIP-390's levels), as configs accepted, refused and described, and as
the codec the stored batches carry; and KIP-467's record errors, in the raw Produce response
and as librdkafka and the Java producer report them record by record.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from compat_support import Comparison, System, described_configs, fetch_body, wait_for
from confluent_kafka import KafkaError, Producer
from test_compat import create, name

from samsa.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    build_batch,
    decode_records,
    scan_batches,
)
from samsa_dev.kafka import java_program

CODECS = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
KEYS = (
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
)
# A level other than the default for each codec that has levels, at the ends of Kafka's ranges.
LEVELS = {"gzip": "9", "lz4": "17", "zstd": "-131072"}
REFUSED = {
    "compression.type": ("brotli", "none", "GZIP", ""),
    "compression.gzip.level": ("0", "10", "-2", "fast"),
    "compression.lz4.level": ("0", "18"),
    "compression.zstd.level": ("23", "-131073"),
}
TOPIC, BROKER = 2, 4
# Records' timestamps: now, for Kafka refuses a CreateTime an hour ahead of its clock.
NOW_MS = int(time.time() * 1000)


def describe(s: System, kind: int, resource: str, keys: tuple[str, ...] = KEYS) -> Any:
    """DescribeConfigs of these keys, with synonyms: value, source, read-only, synonyms."""
    r = described_configs(s, kind, resource, list(keys))
    return r["error_code"], {
        c["name"]: (
            c["value"],
            c["config_source"],
            c["read_only"],
            [(y["name"], y["value"], y["source"]) for y in c["synonyms"]],
        )
        for c in r["configs"]
    }


def create_result(s: System, topic: str, configs: dict[str, str], validate_only: bool) -> Any:
    """CreateTopics v7: the error, whether a message came, and the configs it reports."""
    response = s.request(
        19,
        7,
        {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
            "timeout": 30000,
            "validate_only": validate_only,
        },
    )
    (t,) = response["topics"]
    reported = {c["name"]: (c["value"], c["config_source"]) for c in t["configs"] or []}
    return t["error_code"], t["error_message"] is not None, {k: reported.get(k) for k in KEYS}


def alter(s: System, kind: int, resource: str, key: str, value: str) -> int:
    """IncrementalAlterConfigs v1, validate only: the resource's error."""
    response = s.request(
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": kind,
                    "resource_name": resource,
                    "configs": [{"name": key, "value": value, "config_operation": 0}],
                }
            ],
            "validate_only": True,
        },
    )
    return int(response["responses"][0]["error_code"])


def test_every_compression_type_and_level_is_a_topic_config(pair: Comparison) -> None:
    for codec in CODECS:
        configs = {"compression.type": codec}
        if codec in LEVELS:
            configs[f"compression.{codec}.level"] = LEVELS[codec]
        for validate_only in (True, False):
            topic = name()
            pair.same(
                f"compression.create.{codec}",
                lambda s: create_result(s, topic, configs, validate_only),
            )
        for s in (pair.kafka, pair.samsa):
            wait_for(lambda: describe(s, TOPIC, topic)[0] == 0, what=f"{topic} described")
        pair.same(f"compression.describe.{codec}", lambda s: describe(s, TOPIC, topic))
        for key, value in configs.items():
            pair.same(f"compression.alter.{key}", lambda s: alter(s, TOPIC, topic, key, value))


def test_the_same_compression_configs_are_refused(pair: Comparison) -> None:
    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic)
    for key, values in REFUSED.items():
        for value in values:
            check, fresh = f"compression.refused.{key}={value}", name()
            pair.same(check, lambda s: create_result(s, fresh, {key: value}, True)[:2])
            pair.same(check, lambda s: alter(s, TOPIC, topic, key, value))
            pair.same(check, lambda s: alter(s, BROKER, "0", key, value))


def test_the_broker_default_is_described_and_dynamic(pair: Comparison) -> None:
    pair.same("compression.broker", lambda s: describe(s, BROKER, "0"))
    for codec in CODECS:
        pair.same(
            "compression.broker_alter", lambda s: alter(s, BROKER, "0", "compression.type", codec)
        )
    pair.same(
        "compression.broker_alter", lambda s: alter(s, BROKER, "", "compression.lz4.level", "3")
    )


# -- the stored codec --------------------------------------------------------------------------


def produce(s: System, topic: str, records: bytes, version: int = 9) -> dict[str, Any]:
    """One batch to partition 0; the partition's answer as it came, KIP-467 fields included."""
    response = s.request(
        0,
        version,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        },
    )
    (p,) = response["responses"][0]["partition_responses"]
    return {
        k: p.get(k)
        for k in ("error_code", "base_offset", "log_start_offset", "record_errors", "error_message")
        if k in p
    }


def stored(s: System, topic: str) -> list[Any]:
    """Fetch from offset 0: each batch's header as a reader sees it, and its records."""
    response = s.request(1, 12, fetch_body(topic))
    data = bytes.fromhex(response["responses"][0]["partitions"][0]["records"] or "")
    out = []
    for pos, h in scan_batches(data):
        batch = data[pos : pos + h.size]
        out.append(
            {
                "codec": h.compression,
                "attributes": h.attributes,
                "offsets": (h.base_offset, h.last_offset_delta, h.records_count),
                "producer": (h.producer_id, h.producer_epoch, h.base_sequence),
                "base_timestamp": h.base_timestamp,
                # LogAppendTime stamps the broker's clock: only whether it moved.
                "max_timestamp": h.max_timestamp if h.timestamp_type == 0 else "log-append-time",
                "records": [
                    (r.offset, r.timestamp if h.timestamp_type == 0 else "*", r.key, r.value,
                     r.headers)
                    for r in decode_records(batch)
                ],
            }
        )  # fmt: skip
    return out


SENT = [
    (f"k{i}".encode(), b"value %d " % i * 30, [("i", str(i).encode()), ("none", None)])
    for i in range(20)
]


@pytest.mark.parametrize("timestamps", ["CreateTime", "LogAppendTime"])
def test_batches_are_stored_with_the_topics_codec(pair: Comparison, timestamps: str) -> None:
    for target in CODECS:
        topic = name()
        for s in (pair.kafka, pair.samsa):
            configs = {"compression.type": target, "message.timestamp.type": timestamps}
            create(s, topic, configs=configs)
        for source in (
            COMPRESSION_NONE,
            COMPRESSION_GZIP,
            COMPRESSION_SNAPPY,
            COMPRESSION_LZ4,
            COMPRESSION_ZSTD,
        ):
            records = build_batch(
                SENT,
                timestamps=[NOW_MS + 3 * i - (40 if i == 5 else 0) for i in range(len(SENT))],
                compression=source,
            )
            pair.same(
                f"compression.stored.{target}", lambda s: produce(s, topic, records)["error_code"]
            )
        pair.same(f"compression.stored.{target}", lambda s: stored(s, topic))


# -- KIP-467: record errors ----------------------------------------------------------------------


def keyless_batch(codec: int = COMPRESSION_NONE, count: int = 100) -> bytes:
    """`count` records, every tenth without a key."""
    values = [
        (None if i % 10 == 0 else f"k{i}".encode(), f"v-{i}".encode(), []) for i in range(count)
    ]
    return build_batch(values, timestamp_ms=NOW_MS, compression=codec)


def test_keyless_records_of_a_compacted_topic_are_each_named(pair: Comparison) -> None:
    for configs in ({}, {"compression.type": "zstd"}):
        topic = name()
        for s in (pair.kafka, pair.samsa):
            create(s, topic, configs={"cleanup.policy": "compact", **configs})
        for codec in (COMPRESSION_NONE, COMPRESSION_LZ4):
            records = keyless_batch(codec)
            for version in (3, 8, 9, 12):
                pair.same(
                    f"produce.record_errors.v{version}",
                    lambda s: produce(s, topic, records, version),
                )
        keyed = build_batch([(b"k", b"v", [])], timestamp_ms=NOW_MS)
        pair.same("produce.record_errors.keyed", lambda s: produce(s, topic, keyed)["error_code"])
        pair.same("produce.record_errors.stored", lambda s: stored(s, topic))


PRODUCE_CHECKS = Path(__file__).resolve().parents[1] / "clients/java/ProduceChecks.java"


def java_keyless(s: System, topic: str) -> Any:
    """The same from the Java producer: what each record's callback got."""
    args = ["keyless", "--bootstrap", s.bootstrap, "--topic", topic, "--count", "100"]
    done = subprocess.run(
        java_program(PRODUCE_CHECKS, args, heap="256m"),
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])["results"]


def librdkafka_keyless(s: System, topic: str) -> Any:
    """A librdkafka producer's 100 records in one batch, every tenth without a key: what each
    one's delivery report said."""
    reports: list[Any] = []

    def report(err: KafkaError | None, _msg: Any) -> None:
        reports.append(None if err is None else (err.code(), err.str()))

    producer = Producer(
        {
            "bootstrap.servers": s.bootstrap,
            "linger.ms": 2000,
            "batch.num.messages": 1000,
            "message.timeout.ms": 30000,
        }
    )
    for i in range(100):
        key = None if i % 10 == 0 else f"k{i}".encode()
        producer.produce(topic, key=key, value=f"v-{i}".encode(), partition=0, on_delivery=report)
    assert producer.flush(40) == 0
    return reports


def test_clients_fail_only_the_keyless_records(pair: Comparison) -> None:
    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic, configs={"cleanup.policy": "compact"})
    theirs, _ = pair.same("clients.librdkafka_keyless", lambda s: librdkafka_keyless(s, topic))
    # What the comparison rests on: librdkafka fails exactly the keyless records as invalid.
    assert [i for i, r in enumerate(theirs) if r and r[0] == KafkaError.INVALID_RECORD] == list(
        range(0, 100, 10)
    ), theirs
    theirs, _ = pair.same("clients.java_keyless", lambda s: java_keyless(s, topic))
    assert Counter(r.split(":")[0] for r in theirs) == {
        "InvalidRecordException": 10,
        "KafkaException": 90,
    }, theirs
