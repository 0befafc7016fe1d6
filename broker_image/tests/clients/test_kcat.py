"""kcat (librdkafka's command-line client) against Samsa, unmodified.

kcat has no admin commands: its topics are made with confluent-kafka's admin client, and
records with explicit timestamps (which kcat cannot produce) with confluent-kafka's producer.
"""

from __future__ import annotations

import json
import selectors
import shutil
import subprocess
import time
from collections.abc import Sequence
from typing import Any

import pytest
from clients_support import (
    ACKS,
    CODECS,
    N_RECORDS,
    TS_RECORDS,
    Got,
    Sent,
    check_compressed,
    check_consumed,
    create_topic,
    fetch_requests,
    make_records,
    now_ms,
    ts_plan,
    ts_queries,
)
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka_support import wait_until

from samsa.testing import InProcessBroker

KCAT = shutil.which("kcat")
pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(KCAT is None, reason="kcat is not installed"),
]

# kcat sets headers on the command line: the same for every record.
HEADERS = (("dup", b"first"), ("dup", b"second"), ("app", b"kcat"))


def kcat(
    broker: InProcessBroker, *args: str, stdin: bytes | None = None, timeout: float = 60
) -> str:
    """Run kcat to completion; its stdout. Fails on a non-zero exit or any error printed."""
    proc = subprocess.run(
        [str(KCAT), "-b", broker.bootstrap_servers, *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, f"kcat {args} exited {proc.returncode}: {err}"
    assert "ERROR" not in err and "Delivery failed" not in err, err
    return proc.stdout.decode()


def kcat_records(n: int) -> list[Sent]:
    return [Sent(s.index, s.key, s.value, HEADERS) for s in make_records(n, headers=False)]


def kcat_produce(broker: InProcessBroker, topic: str, sent: Sequence[Sent], *conf: str) -> None:
    lines = b"".join(s.key + b"^" + s.value + b"\n" for s in sent)
    headers = [arg for name, value in HEADERS for arg in ("-H", f"{name}={value.decode()}")]
    extra = [arg for c in conf for arg in ("-X", c)]
    kcat(broker, "-P", "-t", topic, "-K", "^", *headers, *extra, stdin=lines)


def parse(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def as_got(messages: Sequence[dict[str, Any]]) -> list[Got]:
    got = []
    for m in messages:
        h = m.get("headers") or []
        headers = tuple((h[i], h[i + 1].encode()) for i in range(0, len(h), 2))
        key = None if m["key"] is None else m["key"].encode()
        value = None if m["payload"] is None else m["payload"].encode()
        got.append(Got(m["partition"], m["offset"], key, value, headers))
    return got


def kcat_consume(broker: InProcessBroker, topic: str, *args: str) -> list[dict[str, Any]]:
    """Everything in the topic (-e: until the end of every partition), as kcat's JSON."""
    return parse(kcat(broker, "-C", "-t", topic, "-J", "-q", "-e", *args))


# --- 1. produce and consume 10,000 records with every codec -----------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_codec(broker: InProcessBroker, topic: str, codec: str) -> None:
    create_topic(broker, topic)
    sent = kcat_records(N_RECORDS)
    kcat_produce(broker, topic, sent, f"compression.codec={codec}", "acks=all")
    got = as_got(kcat_consume(broker, topic, "-o", "beginning"))
    check_consumed(sent, got)
    check_compressed(broker, topic, codec, sent)


# --- acks, isolation, long poll, LogAppendTime ------------------------------------------------


@pytest.mark.parametrize("acks", ACKS)
def test_every_acks_setting_delivers(broker: InProcessBroker, topic: str, acks: str) -> None:
    create_topic(broker, topic)
    sent = kcat_records(300)
    kcat_produce(broker, topic, sent, f"acks={acks}")
    # With acks=0 kcat may exit before the broker appended: read until all are there.
    got: list[Got] = []

    def everything() -> bool:
        got[:] = as_got(kcat_consume(broker, topic, "-o", "beginning"))
        return len(got) >= len(sent)

    wait_until(everything, 20, what="all records")
    check_consumed(sent, got)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_isolation_levels_see_records(broker: InProcessBroker, topic: str, isolation: str) -> None:
    create_topic(broker, topic)
    sent = kcat_records(300)
    kcat_produce(broker, topic, sent)
    got = as_got(
        kcat_consume(broker, topic, "-o", "beginning", "-X", f"isolation.level={isolation}")
    )
    check_consumed(sent, got)


def test_long_poll_wakes_on_produce(broker: InProcessBroker, topic: str) -> None:
    create_topic(broker, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    assert p.list_topics(topic, timeout=10).topics[topic].error is None
    before = fetch_requests(broker)
    args = ["-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", "1", "-J", "-q"]
    args += ["-X", "fetch.wait.max.ms=10000"]
    proc = subprocess.Popen(
        [str(KCAT), "-b", broker.bootstrap_servers, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            # Nothing there yet: kcat's fetch waits at the broker.
            assert sel.select(1.5) == [], "kcat printed something before a record existed"
        start = time.monotonic()
        p.produce(topic, value=b"late", key=b"k")
        assert p.flush(10) == 0
        out, err = proc.communicate(timeout=10)
        latency = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    [m] = parse(out.decode())
    assert (m["offset"], m["payload"]) == (0, "late")
    # Long-polling: answered when the record arrived, not at fetch.wait.max.ms...
    assert latency < 3, f"record took {latency:.1f}s to arrive"
    # ... and the idle consumer's fetch was held, not answered empty over and over.
    fetches = fetch_requests(broker) - before
    assert fetches <= 4, f"{fetches} fetches for one record"


def test_log_append_time_topic(broker: InProcessBroker, topic: str) -> None:
    create_topic(broker, topic, 1, **{"message.timestamp.type": "LogAppendTime"})
    before = now_ms()
    kcat_produce(broker, topic, kcat_records(5))
    after = now_ms()
    messages = kcat_consume(broker, topic, "-o", "beginning")
    assert len(messages) == 5
    for m in messages:
        assert m["tstype"] == "logappend", m
        assert before - 1 <= m["ts"] <= after + 1, (m["ts"], before, after)


# --- 2. ListOffsets ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ts_topic(broker: InProcessBroker) -> tuple[str, int]:
    """A one-partition topic of TS_RECORDS records with ts_plan(base) timestamps; (name, base)."""
    name = "kcat-timestamps"
    create_topic(broker, name, 1)
    base = now_ms() - 600_000
    stamps = ts_plan(base)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for chunk in range(4):  # several batches
        for i in range(chunk * TS_RECORDS // 4, (chunk + 1) * TS_RECORDS // 4):
            p.produce(name, value=b"%06d" % i, timestamp=stamps[i])
        assert p.flush(10) == 0
    return name, base


def query(broker: InProcessBroker, topic: str, ts: int) -> int:
    """kcat -Q: the offset for a timestamp (or -1 latest, -2 earliest)."""
    out = kcat(broker, "-Q", "-t", f"{topic}:0:{ts}").strip()
    prefix = f"{topic} [0] offset "
    assert out.startswith(prefix), out
    return int(out[len(prefix) :])


def test_query_offsets_by_timestamp(broker: InProcessBroker, ts_topic: tuple[str, int]) -> None:
    topic, base = ts_topic
    for target, expected in ts_queries(base):
        assert query(broker, topic, target) == (expected if expected is not None else -1), target
    assert query(broker, topic, -2) == 0
    assert query(broker, topic, -1) == TS_RECORDS


def test_consume_from_timestamp(broker: InProcessBroker, ts_topic: tuple[str, int]) -> None:
    topic, base = ts_topic
    stamps = ts_plan(base)
    for target, expected in ts_queries(base):
        messages = kcat_consume(broker, topic, "-o", f"s@{target}", "-c", "1")
        if expected is None:
            assert messages == [], target
        else:
            [m] = messages
            assert (m["offset"], m["ts"], m["tstype"]) == (expected, stamps[expected], "create")


def test_consume_from_ends(broker: InProcessBroker, ts_topic: tuple[str, int]) -> None:
    topic, _ = ts_topic
    first = kcat_consume(broker, topic, "-o", "beginning", "-c", "1")
    assert [m["offset"] for m in first] == [0]
    last = kcat_consume(broker, topic, "-o", "-5")
    assert [m["offset"] for m in last] == list(range(TS_RECORDS - 5, TS_RECORDS))
    assert kcat_consume(broker, topic, "-o", "end") == []


# --- metadata ---------------------------------------------------------------------------------


def test_metadata_lists_topics_and_new_partitions(broker: InProcessBroker, topic: str) -> None:
    create_topic(broker, topic, 2)
    md = json.loads(kcat(broker, "-L", "-J"))
    assert [b["id"] for b in md["brokers"]] == [0]
    [t] = [t for t in md["topics"] if t["topic"] == topic]
    assert [p["partition"] for p in t["partitions"]] == [0, 1]
    assert all(p["leader"] == 0 for p in t["partitions"])

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(10)

    def partitions() -> list[int]:
        [t] = json.loads(kcat(broker, "-L", "-J", "-t", topic))["topics"]
        return [p["partition"] for p in t["partitions"]]

    wait_until(lambda: partitions() == [0, 1, 2, 3], 10, what="4 partitions")
    # Records to the new partition go there and come back.
    kcat(broker, "-P", "-t", topic, "-p", "3", stdin=b"to three\n")
    [m] = kcat_consume(broker, topic, "-p", "3", "-o", "beginning")
    assert (m["partition"], m["offset"], m["payload"]) == (3, 0, "to three")
