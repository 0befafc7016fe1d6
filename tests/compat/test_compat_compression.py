"""The differential suite on what a broker does inside a producer's batch: the topic's
compression.type (and KIP-390's levels), as configs accepted, refused and described, and as
the codec the stored batches carry; KIP-937's timestamp bounds as configs; and KIP-467's record
errors (keyless records of a compacted topic, timestamps out of the bounds, batches marked
LogAppendTime by their producer), in the raw Produce response and as librdkafka and the Java
producer report them record by record.
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
    set_log_append_time,
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


# -- KIP-937's timestamp bounds, and the records they refuse ---------------------------------------

BOUNDS = ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms")
BROKER_BOUNDS = tuple(f"log.{key}" for key in BOUNDS)
LONG_MAX = 2**63 - 1
HOUR_MS = 3_600_000


def test_the_timestamp_bounds_are_topic_and_broker_configs(pair: Comparison) -> None:
    """Kafka 4's defaults, a topic's own values over the broker's, the same values refused,
    and message.timestamp.difference.max.ms, which Kafka 4 removed, unknown to both as a
    topic config."""
    plain, own = name(), name()
    for s in (pair.kafka, pair.samsa):
        create(s, plain)
        create(s, own, configs={BOUNDS[0]: "86400000", BOUNDS[1]: str(LONG_MAX)})
    pair.same("timestamp_bounds.describe", lambda s: describe(s, TOPIC, plain, BOUNDS))
    pair.same("timestamp_bounds.describe", lambda s: describe(s, TOPIC, own, BOUNDS))
    pair.same("timestamp_bounds.broker", lambda s: describe(s, BROKER, "0", BROKER_BOUNDS))
    for key in BROKER_BOUNDS:
        pair.same("timestamp_bounds.broker_alter", lambda s: alter(s, BROKER, "0", key, "60000"))
    for value in ("-1", "soon", "9223372036854775808"):
        for key in BOUNDS:
            check = f"timestamp_bounds.refused.{key}={value}"
            pair.same(check, lambda s: alter(s, TOPIC, plain, key, value))
            pair.same(check, lambda s: alter(s, BROKER, "0", f"log.{key}", value))
    gone = "message.timestamp.difference.max.ms"
    pair.same("timestamp_bounds.removed", lambda s: alter(s, TOPIC, plain, gone, "1000"))
    pair.same("timestamp_bounds.removed", lambda s: create_result(s, name(), {gone: "1"}, True)[:2])


_BOUNDS_SHOWN = re.compile(r"within \[(-?\d+), (-?\d+)\]")


def _java_long(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


def bounds_shown(message: str, before: int, after: int, t0: int, t1: int) -> str:
    """`message` with the range it shows, [now - before, now + after] at the broker's clock
    when it checked (wrapped as Java's longs), written as "[now-B, now+A]" once checked to be
    that range for a `now` within [t0, t1]."""

    def shown(match: re.Match[str]) -> str:
        low, high = int(match[1]), int(match[2])
        now = _java_long(high - after)
        assert t0 <= now <= t1 and low == _java_long(now - before), (message, t0, t1)
        return f"within [now-{before}, now+{after}]"

    return _BOUNDS_SHOWN.sub(shown, message)


def produce_judged(s: System, topic: str, records: bytes, before: int, after: int) -> Any:
    """produce(), each record error's range checked against the broker's clock at the time."""
    t0 = int(time.time() * 1000) - 1000
    answer = produce(s, topic, records)
    t1 = int(time.time() * 1000) + 1000
    errors = answer.get("record_errors") or []
    answer["record_errors"] = [
        {**e, "batch_index_error_message": bounds_shown(
            e["batch_index_error_message"] or "", before, after, t0, t1)}
        for e in errors
    ]  # fmt: skip
    return answer


def ahead_batch(codec: int, keyless: bool = False, count: int = 30) -> bytes:
    """Every tenth record two hours ahead (a negative delta back to now after it); with
    `keyless`, every seventh without a key."""
    timestamps = [NOW_MS + 2 * HOUR_MS if i % 10 == 3 else NOW_MS + i for i in range(count)]
    records = [
        (None if keyless and i % 7 == 0 else f"k{i}".encode(), f"v-{i}".encode(), [])
        for i in range(count)
    ]
    return build_batch(records, timestamps=timestamps, compression=codec)


def test_records_out_of_the_topics_bounds_are_each_named(pair: Comparison) -> None:
    plain, aged, compacted, appended = name(), name(), name(), name()
    for s in (pair.kafka, pair.samsa):
        create(s, plain)
        create(s, aged, configs={BOUNDS[0]: str(HOUR_MS), "compression.type": "zstd"})
        create(s, compacted, configs={"cleanup.policy": "compact"})
        create(s, appended, configs={"message.timestamp.type": "LogAppendTime"})
    default = (LONG_MAX, HOUR_MS)
    for codec in (COMPRESSION_NONE, COMPRESSION_LZ4):
        batch = ahead_batch(codec)
        check = "produce.timestamp.ahead"
        pair.same(check, lambda s: produce_judged(s, plain, batch, *default))
        pair.same(check, lambda s: produce_judged(s, aged, batch, HOUR_MS, HOUR_MS))
        old = build_batch(
            [(b"k", b"v", [])] * 3, timestamps=[NOW_MS, NOW_MS - 2 * HOUR_MS, NOW_MS - 1]
        )
        check = "produce.timestamp.behind"
        pair.same(check, lambda s: produce_judged(s, aged, old, HOUR_MS, HOUR_MS))
        pair.same(check, lambda s: produce_judged(s, plain, old, *default)["error_code"])
        mixed = ahead_batch(codec, keyless=True)
        check = "produce.timestamp.compacted"
        pair.same(check, lambda s: produce_judged(s, compacted, mixed, *default))
        # A batch its producer marked LogAppendTime: each record named on a LogAppendTime
        # topic; on a CreateTime one checked at the batch's max timestamp, or refused at -1.
        for max_timestamp, topic in ((NOW_MS, appended), (-1, plain), (NOW_MS, plain)):
            marked = bytearray(
                build_batch(
                    [(b"key", b"abc", []), (None, b"", [])] * 2,
                    timestamp_ms=NOW_MS,
                    compression=codec,
                )
            )
            set_log_append_time(marked, 0, max_timestamp)
            check = "produce.timestamp.log_append_time"
            pair.same(check, lambda s: produce_judged(s, topic, bytes(marked), *default))
    for topic in (aged, compacted, appended):
        pair.same("produce.timestamp.stored", lambda s: stored(s, topic))
    # Where the marked batch went in (a listed difference: Samsa keeps the mark).
    pair.same("produce.timestamp.stored_marked", lambda s: stored(s, plain))


def librdkafka_ahead(s: System, topic: str) -> Any:
    """librdkafka's 100 records in one batch, every tenth two hours ahead: each one's report."""
    reports: list[Any] = []
    producer = Producer(
        {"bootstrap.servers": s.bootstrap, "linger.ms": 2000, "message.timeout.ms": 30000}
    )
    now = int(time.time() * 1000)
    for i in range(100):
        producer.produce(
            topic,
            key=f"k{i}".encode(),
            value=b"v",
            partition=0,
            timestamp=now + 2 * HOUR_MS if i % 10 == 0 else now,
            on_delivery=lambda err, _msg: reports.append(
                None if err is None else (err.code(), err.str())
            ),
        )
    assert producer.flush(40) == 0
    return reports


def java_ahead(s: System, topic: str, count: int) -> Any:
    args = ["ahead", "--bootstrap", s.bootstrap, "--topic", topic, "--count", str(count)]
    done = subprocess.run(
        java_program(PRODUCE_CHECKS, [*args, "--ahead-ms", str(2 * HOUR_MS)], heap="256m"),
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])["results"]
    # The records' timestamps and the broker's range are the clocks': their shape only.
    return [re.sub(r"-?\d{6,}", "<ms>", r) for r in results]


def test_clients_fail_only_the_records_ahead(pair: Comparison) -> None:
    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic)
    theirs, _ = pair.same("clients.librdkafka_ahead", lambda s: librdkafka_ahead(s, topic))
    # What the comparisons rest on: librdkafka fails the records ahead as invalid records ...
    assert [i for i, r in enumerate(theirs) if r and r[0] == KafkaError.INVALID_RECORD] == list(
        range(0, 100, 10)
    ), theirs
    # ... and the Java producer with Kafka's message, as InvalidRecordException when several
    # are named, as the batch's own InvalidTimestampException when one is.
    for count, named in ((100, "InvalidRecordException"), (5, "InvalidTimestampException")):
        theirs, _ = pair.same("clients.java_ahead", lambda s: java_ahead(s, topic, count))
        assert Counter(r.split(":")[0] for r in theirs) == {
            named: (count + 9) // 10,
            "KafkaException": count - (count + 9) // 10,
        }, theirs
