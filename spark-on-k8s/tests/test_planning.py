"""Pure planning logic: options, offset resolution, range splitting, rate limits, and the sink's
commit-log arithmetic. No Spark, no broker."""

from __future__ import annotations

from collections import Counter

import pytest

from samsa_spark.commitlog import (
    BatchMarker,
    TaskMarker,
    already_published,
    earlier_attempt,
    missing,
    next_fence,
)
from samsa_spark.offsets import (
    OffsetRange,
    from_json,
    group_small,
    plan_ranges,
    rate_limit,
    resolve,
    to_json,
)
from samsa_spark.options import (
    OffsetSpec,
    SamsaOptionError,
    parse_offsets,
    parse_sink_options,
    parse_source_options,
    parse_subscription,
)

BS = {"kafka.bootstrap.servers": "h:1"}


def test_subscriptions_select_partitions():
    parts = {"a": 2, "b": 1, "ab": 3}
    assert parse_subscription({"subscribe": "a,b"}).select(parts) == [("a", 0), ("a", 1), ("b", 0)]
    assert parse_subscription({"subscribePattern": "a.*"}).select(parts) == [
        ("a", 0),
        ("a", 1),
        ("ab", 0),
        ("ab", 1),
        ("ab", 2),
    ]
    assert parse_subscription({"assign": '{"ab": [2]}'}).select(parts) == [("ab", 2)]
    with pytest.raises(SamsaOptionError, match="option assign: topic ab has 3 partitions"):
        parse_subscription({"assign": '{"ab": [5]}'}).select(parts)
    with pytest.raises(SamsaOptionError, match="option subscribe: unknown topic zz"):
        parse_subscription({"subscribe": "zz"}).select(parts)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of the options"),
        ({"subscribe": "a", "assign": "{}"}, r"\(got assign, subscribe\)"),
        ({"assign": "[1]"}, "option assign: expected a JSON object"),
        ({"subscribe": "a", "startingOffsets": "{"}, "option startingOffsets: malformed JSON"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": "x"}}'}, "must be an integer"),
        ({"subscribe": "a", "startingOffsets": "latest"}, "cannot be latest for a batch"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets cannot be earliest"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "5"}, "for streaming reads only"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be at least 1"),
        ({"subscribe": "a", "kafka.group.id": "g"}, "kafka.group.id is not supported"),
        ({"subscribePattern": "("}, "subscribePattern: bad regular expression"),
    ],
)
def test_bad_options_name_the_option(options, message):
    with pytest.raises(SamsaOptionError, match=message):
        parse_source_options({**BS, **options}, streaming=False)


def test_streaming_defaults_and_kafka_params():
    o = parse_source_options(
        {**BS, "subscribe": "a", "kafka.fetch.max.bytes": "1000", "maxOffsetsPerTrigger": "7"},
        streaming=True,
    )
    assert o.starting.kind == "latest" and o.ending is None
    assert o.kafka == {"bootstrap.servers": "h:1", "fetch.max.bytes": "1000"}
    assert o.max_offsets_per_trigger == 7
    o = parse_source_options({**BS, "subscribe": "a", "startingTimestamp": "1000"}, streaming=True)
    assert o.starting == OffsetSpec("timestamp", timestamp_ms=1000)


def test_resolve_specific_offsets_and_data_loss():
    tps = [("a", 0), ("a", 1)]
    earliest = {("a", 0): 5, ("a", 1): 0}
    latest = {("a", 0): 20, ("a", 1): 9}
    spec = parse_offsets({"s": '{"a": {"0": -2, "1": -1}}'}, "s", "earliest")
    assert resolve(spec, "s", tps, earliest, latest, None, True) == {("a", 0): 5, ("a", 1): 9}
    before = parse_offsets({"s": '{"a": {"0": 1, "1": 3}}'}, "s", "earliest")
    with pytest.raises(SamsaOptionError, match="offset 1 of a/0 is out of range, before"):
        resolve(before, "s", tps, earliest, latest, None, True)
    assert resolve(before, "s", tps, earliest, latest, None, False) == {("a", 0): 5, ("a", 1): 3}
    partial = parse_offsets({"s": '{"a": {"0": 6}}'}, "s", "earliest")
    with pytest.raises(SamsaOptionError, match="missing a/1"):
        resolve(partial, "s", tps, earliest, latest, None, True)
    by_ts = OffsetSpec("timestamp", timestamp_ms=99)
    with pytest.raises(SamsaOptionError, match="no record at or after timestamp 99 in a/1"):
        resolve(by_ts, "startingTimestamp", tps, earliest, latest, {tps[0]: 7, tps[1]: -1}, True)
    assert resolve(
        by_ts, "startingTimestamp", tps, earliest, latest, {tps[0]: 7, tps[1]: -1}, True, "latest"
    ) == {("a", 0): 7, ("a", 1): 9}


def test_ranges_one_per_partition_split_by_min_partitions():
    start = {("a", 0): 0, ("a", 1): 10, ("b", 0): 3}
    end = {("a", 0): 100, ("a", 1): 10, ("b", 0): 13}
    assert plan_ranges(start, end) == [OffsetRange("a", 0, 0, 100), OffsetRange("b", 0, 3, 13)]
    split = plan_ranges(start, end, min_partitions=6)
    assert len(split) >= 6
    covered = Counter()
    for r in split:
        for o in range(r.from_offset, r.until_offset):
            covered[(r.topic, r.partition, o)] += 1
    assert set(covered.values()) == {1} and len(covered) == 110


def test_rate_limit_shares_by_backlog_and_never_exceeds_latest():
    start = {("a", 0): 0, ("a", 1): 0, ("a", 2): 50}
    latest = {("a", 0): 300, ("a", 1): 100, ("a", 2): 50}
    end = rate_limit(start, latest, 40)
    assert end == {("a", 0): 30, ("a", 1): 10, ("a", 2): 50}
    assert rate_limit(start, latest, 10_000) == latest
    assert from_json(to_json(end)) == end


def test_commit_log_arithmetic():
    m = BatchMarker(4, {"out": {0: 10, 1: 3}}, task_log_end=7)
    assert BatchMarker.decode(m.encode()) == m
    assert TaskMarker.decode(TaskMarker(5, 1, 0).encode()) == TaskMarker(5, 1, 0)
    assert already_published(m, 4) and already_published(m, 3) and not already_published(m, 5)
    assert not already_published(None, 0)
    assert earlier_attempt([TaskMarker(5, 1, 0)], 5, 1)
    assert not earlier_attempt([TaskMarker(5, 1, 0)], 5, 0)
    assert next_fence(m, {"other": {0: 1}}) == {"out": {0: 10, 1: 3}, "other": {0: 1}}
    rows = [("t", None, b"x", ()), ("t", None, b"x", ()), ("t", b"k", b"y", ())]
    present = Counter({("t", None, b"x", ()): 1})
    assert missing(rows, present, lambda r: r) == [("t", None, b"x", ()), ("t", b"k", b"y", ())]


def test_java_security_settings_become_librdkafkas():
    """One set of options for both formats: the Java client's names (Spark's connector) are
    translated for librdkafka."""
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="pa\\"ss";'
    )
    o = parse_sink_options(
        {
            **BS,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": jaas,
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": "/ca/ca.crt",
            "kafka.ssl.keystore.location": "/user/user.pem",
        }
    )
    assert o.kafka == {
        "bootstrap.servers": "h:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": 'pa"ss',
        "ssl.ca.location": "/ca/ca.crt",
        "ssl.key.location": "/user/user.pem",
        "ssl.certificate.location": "/user/user.pem",
    }
    with pytest.raises(SamsaOptionError, match="only PEM stores"):
        parse_sink_options({**BS, "kafka.ssl.truststore.type": "JKS"})
    with pytest.raises(SamsaOptionError, match="needs username"):
        parse_sink_options({**BS, "kafka.sasl.jaas.config": "x required;"})


def test_a_small_micro_batch_is_one_task_and_a_large_one_a_task_per_partition() -> None:
    small = [OffsetRange("t", p, 0, 100) for p in range(6)]
    assert group_small(small, 600) == [tuple(small)]
    large = [OffsetRange("t", p, 0, 101) for p in range(6)]
    assert group_small(large, 600) == [(r,) for r in large]
    assert group_small([], 600) == []
