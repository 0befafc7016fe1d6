"""Shared pieces of the client-compatibility tests: records, checks, broker metrics.

Every client test produces records whose value starts with its index, so that whatever the
client, a consumed record can be matched with the one that was sent.
"""

from __future__ import annotations

import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient, NewTopic

from samsa.testing import InProcessBroker

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = ["0", "1", "all"]

N_RECORDS = 10_000
N_KEYS = 97
PARTITIONS = 3
# Compressible but not trivially so: every codec should shrink it well below its size.
FILLER = b"".join(b"samsa-%03d;" % (i % 13) for i in range(16))

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Sent:
    index: int
    key: bytes
    value: bytes
    headers: Headers


@dataclass(frozen=True)
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers


def make_records(n: int = N_RECORDS, keys: int = N_KEYS, headers: bool = True) -> list[Sent]:
    """n keyed records; the value starts with the index; headers vary per record.

    The header list has a repeated name, whose order must survive, and a binary value.
    """
    out = []
    for i in range(n):
        hdrs: Headers = ()
        if headers:
            hdrs = (
                ("seq", b"%d" % i),
                ("dup", b"first"),
                ("dup", b"second"),
                ("bin", bytes([i % 256, 0, 255, (i * 7) % 256])),
            )
        out.append(Sent(i, b"key-%03d" % (i % keys), b"%06d|" % i + FILLER, hdrs))
    return out


def index_of(value: bytes | None) -> int:
    assert value is not None, "a record came back with a null value"
    return int(value[:6])


def check_consumed(
    sent: Sequence[Sent],
    got: Sequence[Got],
    delivered: dict[int, tuple[int, int]] | None = None,
) -> None:
    """Every sent record came back exactly once, intact, in send order within its partition.

    ``got`` is in the order the consumer returned records (only the order within each
    partition matters); ``delivered`` maps index to the (partition, offset) of its delivery
    report, where the producer gives one.
    """
    positions = [(g.partition, g.offset) for g in got]
    assert len(set(positions)) == len(positions), "a (partition, offset) was consumed twice"
    by_partition: dict[int, list[Got]] = defaultdict(list)
    for g in got:
        by_partition[g.partition].append(g)
    for p, records in by_partition.items():
        offsets = [g.offset for g in records]
        assert offsets == list(range(len(records))), (
            f"partition {p}: offsets are not 0..{len(records) - 1} in order: "
            f"first gaps at {_first_gap(offsets)}"
        )
        indices = [index_of(g.value) for g in records]
        assert indices == sorted(indices), f"partition {p}: records out of send order"
    indices = sorted(index_of(g.value) for g in got)
    assert indices == [s.index for s in sent], (
        f"consumed {len(got)} records for {len(sent)} sent; "
        f"missing {sorted(set(range(len(sent))) - set(indices))[:10]}..."
    )
    partition_of_key: dict[bytes | None, int] = {}
    for g in got:
        s = sent[index_of(g.value)]
        assert g.key == s.key, f"record {s.index}: key {g.key!r} != {s.key!r}"
        assert g.value == s.value, f"record {s.index}: value differs"
        assert g.headers == s.headers, f"record {s.index}: headers {g.headers} != {s.headers}"
        assert partition_of_key.setdefault(g.key, g.partition) == g.partition, (
            f"key {g.key!r} is in two partitions"
        )
        if delivered is not None:
            assert delivered[s.index] == (g.partition, g.offset), (
                f"record {s.index}: delivery report said {delivered[s.index]}, "
                f"consumed at {(g.partition, g.offset)}"
            )


def _first_gap(offsets: Sequence[int]) -> list[int]:
    return [i for i, o in enumerate(offsets) if o != i][:5]


def value_bytes(sent: Iterable[Sent]) -> int:
    return sum(len(s.value) for s in sent)


# --- the broker ------------------------------------------------------------------------------


def metrics(broker: InProcessBroker) -> dict[str, float]:
    with urllib.request.urlopen(broker.http_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def fetch_requests(broker: InProcessBroker) -> float:
    """Consumers' Fetch requests the broker has answered so far."""
    return metrics(broker).get(
        'kafka_network_request_metrics_requests_total{request="FetchConsumer"}', 0
    )


def bytes_in(broker: InProcessBroker, topic: str) -> float:
    return metrics(broker).get(
        f'kafka_server_broker_topic_metrics_bytes_in_total{{topic="{topic}"}}', 0
    )


def check_compressed(broker: InProcessBroker, topic: str, codec: str, sent: Sequence[Sent]) -> None:
    """The batches the broker stored were compressed (or not, for none).

    A client that silently sends uncompressed batches fails here: the broker's bytes-in for
    the topic are then larger than the values alone.
    """
    stored = bytes_in(broker, topic)
    raw = value_bytes(sent)
    if codec == "none":
        assert stored > raw, f"{stored} bytes stored for {raw} bytes of values, uncompressed"
    else:
        assert stored < raw / 2, f"{stored} bytes stored for {raw} bytes of values with {codec}"


def create_topic(
    broker: InProcessBroker, name: str, partitions: int = PARTITIONS, **config: str
) -> None:
    """Create a topic with confluent-kafka's admin client (for clients without one)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(10)
    del admin


def now_ms() -> int:
    return int(time.time() * 1000)


# --- ListOffsets by timestamp ----------------------------------------------------------------

TS_RECORDS = 1000


def ts_plan(base: int) -> list[int]:
    """Timestamps of the single-partition timestamp topic: pairs of equal, increasing ones."""
    return [base + 10 * (i // 2) for i in range(TS_RECORDS)]


def ts_queries(base: int) -> list[tuple[int, int | None]]:
    """(target timestamp, expected offset or None for no such record) for ts_plan(base)."""
    last = ts_plan(base)[-1]
    return [
        (base - 1000, 0),  # before the first record
        (base, 0),
        (base + 10 * 250, 500),  # exactly a record's timestamp: the first of the equal pair
        (base + 10 * 250 + 5, 502),  # between two: the next one
        (base + 10 * 333 + 1, 668),
        (last, TS_RECORDS - 2),
        (last + 1, None),  # after the last: no offset
    ]


# Out-of-order CreateTimes in one batch: the max timestamp is in the middle.
MAX_TS_OFFSETS = [0, 1, 2, 3]


def max_ts_plan(base: int) -> list[int]:
    return [base + 1000, base + 3000, base + 2000, base + 2500]
