"""The sink's columnar producer against a real broker, read back with librdkafka: every row
arrives with its key, value and headers; keys land where librdkafka's murmur2 partitioner (Kafka's
Java default) puts them; the batches are idempotent (a producer id, sequences from 0 with no
gap); topic and partition columns are obeyed; settings it cannot carry out fall back."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from spark_support import consume_all

from samsa.protocol import record_batch as ref
from samsa_spark.fetch import FetchConnection, FetchSettings
from samsa_spark.options import SamsaOptionError, parse_sink_options
from samsa_spark.produce import columnar_settings
from samsa_spark.sink import publish_columnar

_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _batch(n: int, start: int = 0, **extra: pa.Array) -> pa.RecordBatch:
    keys = [None if i % 7 == 0 else f"key-{i}".encode() for i in range(start, start + n)]
    values = [f"value-{i}".encode() * (1 + i % 3) for i in range(start, start + n)]
    headers = [
        [{"key": "n", "value": str(i).encode()}] if i % 2 else [] for i in range(start, start + n)
    ]
    cols = {
        "key": pa.array(keys, pa.binary()),
        "value": pa.array(values, pa.binary()),
        "headers": pa.array(headers, _HEADERS),
        **extra,
    }
    return pa.RecordBatch.from_pydict(cols)


def _opts(bootstrap: str, topic: str | None, **kafka: str):
    options = {"kafka.bootstrap.servers": bootstrap, **{f"kafka.{k}": v for k, v in kafka.items()}}
    if topic:
        options["topic"] = topic
    return parse_sink_options(options)


def _rows(batches: list[pa.RecordBatch], tag: bytes | None = None) -> Counter:
    out: Counter = Counter()
    for b in batches:
        for row in b.to_pylist():
            hs = tuple((h["key"], h["value"]) for h in row["headers"] or ())
            if tag is not None:
                hs += (("samsa.sink.batch", tag),)
            out[(row["key"], row["value"], hs)] += 1
    return out


def test_rows_arrive_whole_and_keys_land_where_kafkas_partitioner_puts_them(
    bootstrap, make_topic
) -> None:
    topic, reference = make_topic(6), make_topic(6)
    # larger than one record batch per partition, in several Arrow batches
    batches = [_batch(4000, start) for start in range(0, 20_000, 4000)]
    done = publish_columnar(_opts(bootstrap, topic), batches, ("samsa.sink.batch", b"q:1:0"))
    assert done == ([topic], 20_000)

    got = consume_all(bootstrap, topic)
    assert Counter((m.key(), m.value(), tuple(m.headers() or ())) for m in got) == _rows(
        batches, b"q:1:0"
    )

    p = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2", "linger.ms": 5})
    keys = {m.key() for m in got if m.key() is not None}
    for k in keys:
        p.produce(reference, b"", k)
    assert p.flush(30) == 0
    expected = {m.key(): m.partition() for m in consume_all(bootstrap, reference)}
    assert {m.key(): m.partition() for m in got if m.key() is not None} == expected


def test_batches_are_idempotent_with_gapless_sequences(bootstrap, make_topic) -> None:
    topic = make_topic(1)
    publish_columnar(_opts(bootstrap, topic), [_batch(3000, s) for s in range(0, 30_000, 3000)])
    host, port = bootstrap.split(":")
    conn = FetchConnection(host, int(port), 10)
    try:
        got = conn.fetch(topic, 0, 0, FetchSettings(100, 64 << 20, False))
    finally:
        conn.close()
    headers = [h for _pos, h in ref.scan_batches(bytes(got.records))]
    assert len(headers) > 1
    assert {h.producer_id for h in headers} != {-1} and len({h.producer_id for h in headers}) == 1
    sequences = [h.base_sequence for h in headers]
    counts = [h.records_count for h in headers]
    assert sequences == [sum(counts[:i]) for i in range(len(counts))]
    assert sum(counts) == 30_000


def test_topic_and_partition_columns(bootstrap, make_topic) -> None:
    a, b = make_topic(3), make_topic(2)
    n = 300
    batch = _batch(
        n,
        topic=pa.array([a if i % 2 else b for i in range(n)]),
        partition=pa.array([None if i % 3 else 1 for i in range(n)], pa.int32()),
    )
    topics, sent = publish_columnar(_opts(bootstrap, None), [batch])
    assert (topics, sent) == (sorted([a, b]), n)
    rows = batch.to_pylist()
    for t in (a, b):
        got = consume_all(bootstrap, t)
        assert len(got) == sum(1 for r in rows if r["topic"] == t)
        pinned = {r["value"] for r in rows if r["topic"] == t and r["partition"] == 1}
        assert {m.value() for m in got if m.value() in pinned and m.partition() == 1} == pinned


def test_unknown_topic_is_named(bootstrap) -> None:
    with pytest.raises(SamsaOptionError, match="unknown topic no-such-topic"):
        publish_columnar(_opts(bootstrap, "no-such-topic"), [_batch(10)])


def test_settings_only_librdkafka_can_honour_fall_back() -> None:
    assert columnar_settings({"bootstrap.servers": "x", "compression.type": "zstd"}, 1)
    assert columnar_settings({"security.protocol": "SASL_SSL"}, 1) is None
    assert columnar_settings({"partitioner": "consistent_random"}, 1) is None
    assert columnar_settings({"acks": "0"}, 1) is None
    assert columnar_settings({"acks": "1"}, 1) is None  # idempotence needs acks=all
    assert columnar_settings({"acks": "1", "enable.idempotence": "false"}, 1)
    assert columnar_settings({"socket.keepalive.enable": "true"}, 1) is None


def test_a_broker_restart_mid_publish_loses_and_doubles_nothing(tmp_path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from samsa.testing import InProcessBroker

    with InProcessBroker(tmp_path) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        for f in admin.create_topics([NewTopic("restarted", 2, 1)]).values():
            f.result(30)
        opts = _opts(b.bootstrap_servers, "restarted", **{"metadata.max.age.ms": "1000"})
        batches = [_batch(2000, s) for s in range(0, 20_000, 2000)]

        def fed():
            for i, batch in enumerate(batches):
                if i == 5:
                    b.restart()
                yield batch

        assert publish_columnar(opts, fed()) == (["restarted"], 20_000)
        got = consume_all(b.bootstrap_servers, "restarted")
    assert Counter((m.key(), m.value(), tuple(m.headers() or ())) for m in got) == _rows(batches)
