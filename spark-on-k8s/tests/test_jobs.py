"""Jobs (a) and (b) on a known input give the aggregates computed here by hand, through the
samsa format (against the in-process broker) and through Spark's own Kafka connector, format
kafka (against the replicated 3-broker cluster); job (c) reports volume and consumer-group lag."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

import pytest
from confluent_kafka import Consumer, TopicPartition
from spark_support import SINK_KAFKA, consume_all

from samsa_spark.generator import closed_window_counts, generate, publish
from samsa_spark.jobs import ad_clicks, ctr

FIVE_MIN = 5 * 60_000
TEN_MIN = 10 * 60_000
NO_IDEMPOTENCE = {"enable.idempotence": False}


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _output(bootstrap, topic):
    return [json.loads(m.value()) for m in consume_all(bootstrap, topic)]


@pytest.fixture(scope="module")
def events():
    return generate(1500, seed=11, span_minutes=60)


@pytest.fixture(params=["samsa", "kafka"])
def fmt(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def where(fmt: str, request: pytest.FixtureRequest):
    """(bootstrap, make_topic) of the brokers the format is tried against."""
    if fmt == "samsa":
        return request.getfixturevalue("bootstrap"), request.getfixturevalue("make_topic")
    return (
        request.getfixturevalue("cluster_bootstrap"),
        request.getfixturevalue("make_cluster_topic"),
    )


@pytest.mark.slow
def test_ad_clicks_counts_per_campaign_and_window(spark, fmt, where, tmp_path, events):
    bootstrap, make_topic = where
    _imps, clicks = events
    source, sink = make_topic(3, "clicks"), make_topic(1, "counts")
    publish(bootstrap, source, clicks, NO_IDEMPOTENCE)
    q = ad_clicks.start(
        spark,
        bootstrap,
        source,
        sink,
        str(tmp_path / "ckpt"),
        available_now=True,
        sink_options=SINK_KAFKA,
        fmt=fmt,
    )
    q.awaitTermination(240)
    assert q.exception() is None

    # By hand: every five-minute window that the watermark (latest click - 10 min) has closed.
    expected = closed_window_counts(clicks)
    out = _output(bootstrap, sink)
    got = {(r["campaign_id"], r["window_start"]): r["clicks"] for r in out}
    assert len(got) == len(out)  # each window appended exactly once
    assert got == expected
    assert len(got) > 30


@pytest.mark.slow
def test_ctr_join_gives_click_through_rates(spark, fmt, where, tmp_path, events):
    bootstrap, make_topic = where
    imps, clicks = events
    imp_topic, click_topic, sink = (
        make_topic(2, "imps"),
        make_topic(2, "clicks"),
        make_topic(1, "ctr"),
    )
    publish(bootstrap, imp_topic, imps, NO_IDEMPOTENCE)
    publish(bootstrap, click_topic, clicks, NO_IDEMPOTENCE)
    q = ctr.start(
        spark,
        bootstrap,
        imp_topic,
        click_topic,
        sink,
        str(tmp_path / "ckpt"),
        available_now=True,
        sink_options=SINK_KAFKA,
        fmt=fmt,
    )
    q.awaitTermination(300)
    assert q.exception() is None

    # By hand: impressions per campaign and window of impression time, and how many of them
    # were clicked within ten minutes.
    click_at = {c.impression_id: c.event_time_ms for c in clicks}
    shown: Counter = Counter()
    clicked: Counter = Counter()
    for i in imps:
        key = (i.campaign_id, _iso(i.event_time_ms // FIVE_MIN * FIVE_MIN))
        shown[key] += 1
        t = click_at.get(i.impression_id)
        if t is not None and i.event_time_ms <= t <= i.event_time_ms + TEN_MIN:
            clicked[key] += 1
    out = _output(bootstrap, sink)
    got = {(r["campaign_id"], r["window_start"]): r for r in out}
    assert len(got) == len(out)
    # Windows are final, so each emitted one is exact; they are emitted in event-time order, so
    # the emitted ones are the earliest windows.
    assert len(got) >= len(shown) // 2
    for key, r in got.items():
        assert (r["impressions"], r["clicks"]) == (shown[key], clicked[key]), key
        assert r["ctr"] == round(clicked[key] / shown[key], 4)
    last = max(start for _c, start in got)
    assert {k for k in shown if k[1] < last} <= set(got)
    assert sum(r["clicks"] for r in out) > 0


def test_streaming_jobs_take_the_format_on_their_command_line():
    from samsa_spark.jobs.common import arguments

    def parse(*extra: str):
        return arguments("", ["--bootstrap", "127.0.0.1:9092", "--checkpoint", "c", *extra])

    assert parse().format == "samsa"
    assert parse("--format", "kafka").format == "kafka"
    with pytest.raises(SystemExit) as exc:
        parse("--format", "parquet")
    assert exc.value.code == 2


def _fill(bootstrap, topic):
    from spark_support import produce

    produce(bootstrap, topic, [(b"k", b"0123456789")] * 10, partition=0)
    produce(bootstrap, topic, [(None, b"abc")] * 6, partition=1)


def test_volume_per_partition(spark, bootstrap, make_topic):
    from samsa_spark.jobs.lag_report import volume

    topic = make_topic(3, "vol")
    _fill(bootstrap, topic)
    rows = {r.partition: r for r in volume(spark, bootstrap, topic).collect()}
    assert {p: (r.records, r.bytes) for p, r in rows.items()} == {0: (10, 110), 1: (6, 18)}


def test_lag_report_per_partition_and_group(spark, bootstrap, make_topic):
    from samsa_spark.jobs.lag_report import lag_report

    topic = make_topic(3, "lag")
    _fill(bootstrap, topic)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}"})
    c.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 6)], asynchronous=False)
    c.close()
    rows = [
        (r.partition, r.log_end, r.records, r.group, r.committed, r.lag)
        for r in lag_report(spark, bootstrap, topic).collect()
    ]
    assert rows == [
        (0, 10, 10, f"g-{topic}", 4, 6),
        (1, 6, 6, f"g-{topic}", 6, 0),
        (2, 0, 0, None, None, None),
    ]
