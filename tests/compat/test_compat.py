"""The differential suite: each scenario against a single-node Apache Kafka and a 1-broker
Samsa (with ZooKeeper), results compared after normalisation (compat_support).

Raw requests show what clients hide (error codes, sentinel fields); real clients show what users
see. A result that differs must be a listed difference (samsa_dev.differences).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from compat_support import (
    Comparison,
    System,
    described_configs,
    expect,
    fetch_body,
    listed,
    normalise,
    wait_for,
)
from confluent_kafka import Consumer, Producer

from samsa.protocol.record_batch import build_batch
from samsa_dev.differences import DIFFERENCES

_names = itertools.count()


def name(kind: str = "t") -> str:
    """A topic or group name, the same for both systems, unique in the session."""
    return f"compat-{kind}-{next(_names)}-{int(time.time()) % 100000}"


def create(
    s: System, topic: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> Any:
    """CreateTopics v7, one topic; the topic's result (leaders awaited)."""
    response = s.request(
        19,
        7,
        {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            "timeout": 30000,
            "validate_only": False,
        },
    )
    wait_for(lambda: all(p["leader_id"] >= 0 for p in partitions_of(s, topic)), what="leaders")
    return response["topics"][0]


def partitions_of(s: System, topic: str) -> list[dict[str, Any]]:
    body = {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False}
    md = s.request(3, 12, body)
    return list(md["topics"][0]["partitions"])


def produce_raw(
    s: System, topic: str, records: bytes, partition: int = 0, version: int = 9, acks: int = 1
) -> dict[str, Any]:
    response = s.request(
        0,
        version,
        {
            "transactional_id": None,
            "acks": acks,
            "timeout": 10000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        },
    )
    p = response["responses"][0]["partition_responses"][0]
    return {k: p.get(k) for k in ("error_code", "base_offset") if k in p}


def append(s: System, topic: str, records: bytes, partition: int = 0) -> None:
    """Produce as set-up: retried until the new partition's leader takes it."""
    wait_for(lambda: produce_raw(s, topic, records, partition)["error_code"] == 0, what="append")


def batch(*values: bytes, ts: int | None = None, timestamps: list[int] | None = None) -> bytes:
    return build_batch(
        [(None, v, []) for v in values],
        timestamp_ms=int(time.time() * 1000) if ts is None else ts,
        timestamps=timestamps,
    )


def offsets(s: System, topic: str, timestamps: list[int], version: int = 9) -> list[Any]:
    """ListOffsets for partition 0 at each timestamp: (error, offset, timestamp)."""
    out = []
    for ts in timestamps:
        response = s.request(
            2,
            version,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}
                        ],
                    }
                ],
            },
        )
        p = response["topics"][0]["partitions"][0]
        out.append((p["error_code"], p["offset"], p["timestamp"]))
    return out


# -- the list itself ---------------------------------------------------------------------------


def test_every_listed_difference_says_what_and_why() -> None:
    checks = [c for d in DIFFERENCES for c in d.checks]
    assert len(checks) == len(set(checks)), "a check is listed under two differences"
    for d in DIFFERENCES:
        assert d.api and d.what and len(d.why) > 20, d


# -- API versions and metadata ---------------------------------------------------------------


def test_api_versions(pair: Comparison) -> None:
    from kio.index import api_key_map

    def ranges(s: System) -> dict[int, tuple[int, int]]:
        body = {"client_software_name": "compat", "client_software_version": "1"}
        response = s.request(18, 3, body)
        assert response["error_code"] == 0
        return {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}

    theirs, ours = ranges(pair.kafka), ranges(pair.samsa)
    for key in sorted(set(theirs) | set(ours)):
        api = api_key_map.get(key, str(key))
        expect(f"api_versions.{api}", theirs.get(key), ours.get(key))


def test_api_versions_newer_than_served(pair: Comparison) -> None:
    """An ApiVersions request newer than the broker serves: a v0 UNSUPPORTED_VERSION answer."""
    from kafka_support import decode_response, header_only_frame

    def answer(s: System) -> Any:
        from kafka_support import Wire

        with Wire(s.ports[0]) as wire:
            # A flexible request header ends in a tagged-fields byte.
            wire.send(header_only_frame(18, 99, 7, b"\x00"))
            try:
                _, response = decode_response(18, 0, wire.read_frame())
            except EOFError:
                return "connection closed"
        return response.error_code.value, len(response.api_keys) > 10

    pair.same("api_versions.too_new", answer)


def test_metadata(pair: Comparison) -> None:
    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic, 3)

    def metadata(s: System, version: int, include_ops: bool) -> Any:
        response = s.request(
            3,
            version,
            {
                "topics": [
                    {"name": n, "topic_id": None} for n in (topic, "compat-missing", "bad/name")
                ],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": include_ops,
                "include_cluster_authorized_operations": include_ops,
            },
        )
        return normalise(response)

    for version in (1, 9, 12, 13):
        for ops in (False, True):
            pair.same(f"metadata.v{version}", lambda s: metadata(s, version, ops))

    def cluster(s: System, include: bool) -> Any:
        body = {"include_cluster_authorized_operations": include, "endpoint_type": 1}
        return normalise(s.request(60, 1, body))

    for include in (False, True):
        pair.same("describe_cluster", lambda s: cluster(s, include))


# -- CreateTopics, DeleteTopics and configs: bad requests ------------------------------------


def test_create_topics_errors(pair: Comparison) -> None:
    taken = name()
    for s in (pair.kafka, pair.samsa):
        create(s, taken)
    dup = name()

    def topic(n: str, partitions: int = 1, rf: int = 1, **configs: str) -> dict[str, Any]:
        return {
            "name": n,
            "num_partitions": partitions,
            "replication_factor": rf,
            "assignments": [],
            "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
        }

    cases = {
        "exists": [topic(taken)],
        "zero_partitions": [topic(name(), 0)],
        "negative_partitions": [topic(name(), -5)],
        "rf_zero": [topic(name(), rf=0)],
        "rf_too_big": [topic(name(), rf=3)],
        "bad_name": [topic("bad/name")],
        "dot_name": [topic("..")],
        "long_name": [topic("x" * 250)],
        "unknown_config": [topic(name(), no_such_config="1")],
        "bad_config_value": [topic(name(), cleanup_policy="sometimes")],
        "bad_config_number": [topic(name(), retention_ms="soon")],
        "duplicate": [topic(dup), topic(dup)],
    }
    for case, topics in cases.items():
        for validate_only in (True, False):

            def run(s: System) -> Any:
                body = {"topics": topics, "timeout": 30000, "validate_only": validate_only}
                response = s.request(19, 7, body)
                return sorted(
                    (t["name"], t["error_code"], t["error_message"] is not None)
                    for t in response["topics"]
                )

            pair.same(f"create_topics.{case}", run)


def test_delete_topics_errors(pair: Comparison) -> None:
    def run(s: System) -> Any:
        body = {
            "topic_names": ["compat-missing", "compat-missing", "__consumer_offsets"],
            "timeout": 10000,
        }
        response = s.request(20, 5, body)
        return sorted((r["name"], r["error_code"]) for r in response["responses"])

    pair.same("delete_topics.errors", run)


def test_alter_configs_errors(pair: Comparison) -> None:
    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic)

    def resource(kind: int, rname: str, **configs: str) -> dict[str, Any]:
        return {
            "resource_type": kind,
            "resource_name": rname,
            "configs": [
                {"name": k.replace("_", "."), "value": v, "config_operation": 0}
                for k, v in configs.items()
            ],
        }

    cases = {
        "ok": [resource(2, topic, retention_ms="1000")],
        "unknown_topic": [resource(2, "compat-missing", retention_ms="1000")],
        "bad_value": [resource(2, topic, retention_ms="soon")],
        "unknown_key": [resource(2, topic, no_such_config="1")],
        "duplicate": [resource(2, topic, retention_ms="1"), resource(2, topic, retention_ms="2")],
        "bad_broker": [resource(4, "77", log_retention_ms="1000")],
    }
    for case, resources in cases.items():

        def run(s: System) -> Any:
            response = s.request(44, 1, {"resources": resources, "validate_only": True})
            return sorted((r["resource_name"], r["error_code"]) for r in response["responses"])

        pair.same(f"incremental_alter_configs.{case}", run)


# -- Produce and Fetch: bad input ---------------------------------------------------------------


def test_produce_errors(pair: Comparison) -> None:
    topic = name()
    small = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic, 2)
        create(s, small, configs={"max.message.bytes": "2000"})
    good = batch(b"a", b"b")
    corrupt = bytearray(batch(b"c"))
    corrupt[-1] ^= 0xFF
    cases = {
        "ok": (topic, good, 0),
        "unknown_topic": ("compat-missing", good, 0),
        "unknown_partition": (topic, good, 9),
        "oversized": (small, batch(b"x" * 5000), 0),
        "corrupt_crc": (topic, bytes(corrupt), 0),
        "two_batches": (topic, batch(b"d") + batch(b"e"), 0),
        "truncated": (topic, good[:-3], 0),
    }
    for case, (t, records, partition) in cases.items():
        pair.same(f"produce.{case}", lambda s: produce_raw(s, t, records, partition)["error_code"])


def test_produce_old_versions(pair: Comparison) -> None:
    """Produce v0-v2 (message format v0/v1), advertised by both: what comes back."""
    import struct
    import zlib

    from kafka_support import Wire, header_only_frame

    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic)
    encoded = topic.encode()
    body_v1 = struct.pack(">bbq", 1, 0, 1_700_000_000_000) + struct.pack(">i", -1)
    body_v1 += struct.pack(">i", 5) + b"hello"
    message = struct.pack(">I", zlib.crc32(body_v1)) + body_v1
    message_set = struct.pack(">qi", 0, len(message)) + message
    body = (
        struct.pack(">hi", 1, 5000)
        + struct.pack(">ih", 1, len(encoded))
        + encoded
        + struct.pack(">iii", 1, 0, len(message_set))
        + message_set
    )

    def produce(s: System, version: int) -> Any:
        with Wire(s.ports[0]) as wire:
            wire.send(header_only_frame(0, version, 77, body))
            try:
                frame = wire.read_frame()
            except (EOFError, ConnectionError):
                return "connection closed"
        pos = 8 + 2 + len(encoded)
        partitions, index, error = struct.unpack_from(">iih", frame, pos)
        return partitions, index, error

    for version in (0, 1, 2):
        pair.same(f"produce.v{version}", lambda s: produce(s, version))
    pair.same("produce.v2_appended_nothing", lambda s: offsets(s, topic, [-1]))


def test_log_append_time(pair: Comparison) -> None:
    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic, configs={"message.timestamp.type": "LogAppendTime"})

    def run(s: System) -> Any:
        sent = 1_600_000_000_000
        before = int(time.time() * 1000)
        response = s.request(
            0,
            9,
            {
                "acks": 1,
                "timeout": 10000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [{"index": 0, "records": batch(b"a", ts=sent)}],
                    }
                ],
            },
        )
        p = response["responses"][0]["partition_responses"][0]
        stamped = p["log_append_time"]
        found = offsets(s, topic, [before - 60_000, sent, -3])
        return p["error_code"], stamped >= before - 60_000, [f[:2] for f in found]

    pair.same("produce.log_append_time", run)


def test_fetch_edge_cases(pair: Comparison) -> None:
    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic)
        append(s, topic, batch(b"a", b"b", b"c"))

    def fetch(s: System, offset: int, epoch: int = -1, version: int = 12, part: int = 0) -> Any:
        response = s.request(1, version, fetch_body(topic, offset, part, epoch))
        p = response["responses"][0]["partitions"][0]
        return {
            "top": response.get("error_code"),
            **{
                k: p.get(k)
                for k in ("error_code", "high_watermark", "last_stable_offset", "log_start_offset")
            },
            "records": bool(p["records"]),
        }

    cases = {
        "at_start": (0, -1, 12, 0),
        "at_end": (3, -1, 12, 0),
        "past_end": (10, -1, 12, 0),
        "negative": (-5, -1, 12, 0),
        "future_epoch": (0, 5, 12, 0),
        "unknown_partition": (0, -1, 12, 4),
        "v4": (0, -1, 4, 0),
        "v4_past_end": (10, -1, 4, 0),
    }
    for case, (offset, epoch, version, part) in cases.items():
        pair.same(f"fetch.{case}", lambda s: fetch(s, offset, epoch, version, part))


# -- ListOffsets by timestamp -------------------------------------------------------------------


def test_list_offsets_by_timestamp(pair: Comparison) -> None:
    topic = name()
    base = 1_700_000_000_000
    for s in (pair.kafka, pair.samsa):
        create(s, topic)
        append(s, topic, batch(b"a", b"b", timestamps=[base + 1000, base + 2000]))
        append(s, topic, batch(b"c", b"d", timestamps=[base + 5000, base + 3000]))
        append(s, topic, batch(b"e", timestamps=[base + 4000]))
    stamps = [
        base,
        base + 1000,
        base + 1500,
        base + 3000,
        base + 3500,
        base + 5000,
        base + 9000,
        -1,
        -2,
        -3,
        -4,
        -5,
    ]
    for version in (1, 4, 7, 9, 10):
        pair.same(f"list_offsets.v{version}", lambda s: offsets(s, topic, stamps, version))
    pair.same("list_offsets.bad_timestamp", lambda s: offsets(s, topic, [-7], 9))
    pair.same("list_offsets.v11", lambda s: offsets(s, topic, [-6, -1, -2], 11))
    pair.same("list_offsets.empty", lambda s: offsets(s, topic_empty(pair, s), [-1, -2, -3, 5]))


_empty: dict[str, str] = {}


def topic_empty(pair: Comparison, s: System) -> str:
    if s.name not in _empty:
        _empty[s.name] = "compat-empty"
        create(s, "compat-empty")
    return _empty[s.name]


def test_stale_and_future_epochs(pair: Comparison) -> None:
    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic)
        append(s, topic, batch(b"a"))

    def list_offsets(s: System, epoch: int) -> Any:
        response = s.request(
            2,
            9,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": 0, "current_leader_epoch": epoch, "timestamp": -1}
                        ],
                    }
                ],
            },
        )
        return response["topics"][0]["partitions"][0]["error_code"]

    def epoch_end(s: System, current: int, wanted: int) -> Any:
        response = s.request(
            23,
            4,
            {
                "replica_id": -2,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": current,
                                "leader_epoch": wanted,
                            }
                        ],
                    }
                ],
            },
        )
        p = response["topics"][0]["partitions"][0]
        return p["error_code"], p["leader_epoch"], p["end_offset"]

    for epoch in (-1, 0, 7):
        pair.same(f"list_offsets.epoch_{epoch}", lambda s: list_offsets(s, epoch))
    for current, wanted in ((-1, 0), (0, 0), (7, 0), (-1, 3)):
        pair.same(
            f"offset_for_leader_epoch.{current}_{wanted}", lambda s: epoch_end(s, current, wanted)
        )


# -- DescribeConfigs --------------------------------------------------------------------------


def test_describe_configs_defaults_and_sources(pair: Comparison) -> None:
    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic, configs={"retention.ms": "86400000", "cleanup.policy": "compact"})

    def describe(s: System, kind: int, rname: str, synonyms: bool) -> dict[str, Any]:
        r = described_configs(s, kind, rname, synonyms=synonyms)
        assert r["error_code"] == 0, r
        return {
            c["name"]: {
                "value": c["value"],
                "read_only": c["read_only"],
                "source": c["config_source"],
                "sensitive": c["is_sensitive"],
                "type": c["config_type"],
                "synonyms": [(y["name"], y["source"]) for y in c["synonyms"]],
            }
            for c in r["configs"]
        }

    theirs = describe(pair.kafka, 2, topic, True)
    ours = describe(pair.samsa, 2, topic, True)
    for key in sorted(set(theirs) | set(ours)):
        expect(f"describe_configs.topic.{key}", theirs.get(key), ours.get(key))

    # Broker configs: the keys both know must agree (values that name paths or ports aside).
    theirs = describe(pair.kafka, 4, "0", False)
    ours = describe(pair.samsa, 4, "0", False)
    local = {"log.dirs", "listeners", "advertised.listeners", "node.id", "broker.id"}
    for key in sorted(set(theirs) & set(ours) - local):
        expect(f"describe_configs.broker.{key}", theirs[key], ours[key])

    def errors(s: System) -> Any:
        response = s.request(
            32,
            4,
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": "compat-missing",
                        "configuration_keys": None,
                    },
                    {"resource_type": 4, "resource_name": "77", "configuration_keys": None},
                    {"resource_type": 4, "resource_name": "x", "configuration_keys": None},
                    {"resource_type": 2, "resource_name": topic, "configuration_keys": ["nope"]},
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
        return [
            (r["resource_name"], r["error_code"], len(r["configs"])) for r in response["results"]
        ]

    pair.same("describe_configs.errors", errors)


# -- consumer groups ------------------------------------------------------------------------


def test_consumer_group_states_and_offsets(pair: Comparison) -> None:
    topic = name()
    group = name("g")
    for s in (pair.kafka, pair.samsa):
        create(s, topic, 2)
        p = Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 0})
        for i in range(10):
            p.produce(topic, value=b"%d" % i, partition=i % 2)
        assert p.flush(30) == 0

    def describe(s: System) -> Any:
        response = s.request(15, 5, {"groups": [group], "include_authorized_operations": True})
        (g,) = response["groups"]
        return {
            "error": g["error_code"],
            "state": g["group_state"],
            "protocol_type": g["protocol_type"],
            "protocol": g["protocol_data"],
            "members": len(g["members"]),
            "ops": g["authorized_operations"],
        }

    def listed_groups(s: System) -> Any:
        response = s.request(16, 4, {"states_filter": []})
        return sorted(
            (g["group_id"], g["group_state"]) for g in response["groups"] if g["group_id"] == group
        )

    def committed(s: System) -> Any:
        response = s.request(
            9,
            8,
            {
                "groups": [
                    {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}]}
                ],
                "require_stable": True,
            },
        )
        (g,) = response["groups"]
        return [
            (p["partition_index"], p["committed_offset"], p["error_code"])
            for t in g["topics"]
            for p in t["partitions"]
        ], g["error_code"]

    pair.same("groups.describe_unknown", describe)
    pair.same("groups.offsets_unknown", committed)
    consumers: dict[str, Consumer] = {}

    def consume(s: System) -> Any:
        c = Consumer(
            {
                "bootstrap.servers": s.bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumers[s.name] = c
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 60
        while got < 10 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got += 1
        c.commit(asynchronous=False)
        return got

    pair.same("groups.consume", consume)
    pair.same("groups.describe_stable", describe)
    pair.same("groups.list_stable", listed_groups)
    pair.same("groups.offsets", committed)

    def delete_non_empty(s: System) -> Any:
        response = s.request(42, 2, {"groups_names": [group, "compat-missing-group"]})
        return sorted((r["group_id"], r["error_code"]) for r in response["results"])

    pair.same("groups.delete_non_empty", delete_non_empty)
    for c in consumers.values():
        c.close()
    pair.same(
        "groups.describe_empty",
        lambda s: wait_for(lambda: describe(s)["state"] == "Empty" and describe(s)),
    )
    pair.same("groups.offsets_after", committed)
    pair.same("groups.delete", delete_non_empty)


def test_group_protocol_errors(pair: Comparison) -> None:
    group = name("g")

    def join(s: System, session_timeout: int, member: str = "") -> Any:
        response = s.request(
            11,
            5,
            {
                "group_id": group,
                "session_timeout": session_timeout,
                "rebalance_timeout": 10000,
                "member_id": member,
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        )
        return response["error_code"]

    def heartbeat(s: System) -> Any:
        body = {
            "group_id": group,
            "generation_id": 3,
            "member_id": "nobody",
            "group_instance_id": None,
        }
        return s.request(12, 4, body)["error_code"]

    def sync(s: System) -> Any:
        body = {
            "group_id": group,
            "generation_id": 3,
            "member_id": "nobody",
            "group_instance_id": None,
            "assignments": [],
        }
        return s.request(14, 3, body)["error_code"]

    def leave(s: System) -> Any:
        body = {"group_id": group, "members": [{"member_id": "nobody", "group_instance_id": None}]}
        response = s.request(13, 4, body)
        return response["error_code"], [m["error_code"] for m in response["members"]]

    pair.same("groups.join_session_too_small", lambda s: join(s, 1))
    pair.same("groups.join_session_too_big", lambda s: join(s, 10_000_000))
    pair.same("groups.join_unknown_member", lambda s: join(s, 10000, "nobody"))
    pair.same("groups.heartbeat_unknown", heartbeat)
    pair.same("groups.sync_unknown", sync)
    pair.same("groups.leave_unknown", leave)


# -- CreatePartitions, DeleteRecords, ElectLeaders, reassignments ------------------------------


def test_create_partitions(pair: Comparison) -> None:
    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic)

    def grow(s: System, topics: list[dict[str, Any]], validate_only: bool = False) -> Any:
        body = {"topics": topics, "timeout": 30000, "validate_only": validate_only}
        response = s.request(37, 3, body)
        return sorted((r["name"], r["error_code"]) for r in response["results"])

    cases = {
        "validate": ([{"name": topic, "count": 3, "assignments": None}], True),
        "grow": ([{"name": topic, "count": 3, "assignments": None}], False),
        "same": ([{"name": topic, "count": 3, "assignments": None}], False),
        "shrink": ([{"name": topic, "count": 2, "assignments": None}], False),
        "unknown": ([{"name": "compat-missing", "count": 3, "assignments": None}], False),
        "bad_assignment": (
            [{"name": topic, "count": 5, "assignments": [{"broker_ids": [0]}]}],
            False,
        ),
        "unknown_broker": (
            [{"name": topic, "count": 4, "assignments": [{"broker_ids": [9]}]}],
            False,
        ),
        "duplicate": (
            [
                {"name": topic, "count": 6, "assignments": None},
                {"name": topic, "count": 6, "assignments": None},
            ],
            False,
        ),
    }
    for case, (topics, validate_only) in cases.items():
        pair.same(f"create_partitions.{case}", lambda s: grow(s, topics, validate_only))
    pair.same("create_partitions.result", lambda s: len(partitions_of(s, topic)))


def test_delete_records(pair: Comparison) -> None:
    topic = name()
    compacted = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic, 2)
        create(s, compacted, configs={"cleanup.policy": "compact"})
        append(s, topic, batch(b"a", b"b", b"c", b"d", b"e"))

    def delete(s: System, parts: dict[tuple[str, int], int]) -> Any:
        topics: dict[str, list[dict[str, int]]] = {}
        for (t, p), offset in parts.items():
            topics.setdefault(t, []).append({"partition_index": p, "offset": offset})
        body = {
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            "timeout": 5000,
        }
        response = s.request(21, 2, body)
        return sorted(
            (t["name"], p["partition_index"], p["error_code"], p["low_watermark"])
            for t in response["topics"]
            for p in t["partitions"]
        )

    cases = {
        "move": {(topic, 0): 2, (topic, 1): -1},
        "below_start": {(topic, 0): 1},
        "high_watermark": {(topic, 0): -1},
        "beyond_hw": {(topic, 0): 6},
        "negative": {(topic, 0): -3},
        "unknown": {("compat-missing", 0): 1, (topic, 5): 0},
        "compacted": {(compacted, 0): 0},
    }
    for case, parts in cases.items():
        pair.same(f"delete_records.{case}", lambda s: delete(s, parts))
    pair.same("delete_records.log_start", lambda s: offsets(s, topic, [-2, -1]))


def test_elect_leaders(pair: Comparison) -> None:
    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic, 2)

    def elect(s: System, version: int, kind: int, parts: list[tuple[str, int]] | None) -> Any:
        topics = None
        if parts is not None:
            by: dict[str, list[int]] = {}
            for t, p in parts:
                by.setdefault(t, []).append(p)
            topics = [{"topic": t, "partitions": ps} for t, ps in by.items()]
        body = {"election_type": kind, "topic_partitions": topics, "timeout": 10000}
        response = s.request(43, version, body)
        return response.get("error_code"), sorted(
            (r["topic"], p["partition_id"], p["error_code"])
            for r in response["replica_election_results"]
            for p in r["partition_result"]
        )

    cases = {
        "preferred": (2, 0, [(topic, 0), (topic, 1)]),
        "unclean": (2, 1, [(topic, 0)]),
        "unknown": (2, 0, [("compat-missing", 0), (topic, 7)]),
        "all": (2, 0, None),
        "v0": (0, 0, [(topic, 0)]),
    }
    for case, (version, kind, parts) in cases.items():
        pair.same(f"elect_leaders.{case}", lambda s: elect(s, version, kind, parts))


def test_reassignments(pair: Comparison) -> None:
    topic = name()
    for s in (pair.kafka, pair.samsa):
        create(s, topic, 2)

    def alter(s: System, parts: list[tuple[str, int, list[int] | None]]) -> Any:
        by: dict[str, list[dict[str, Any]]] = {}
        for t, p, replicas in parts:
            by.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
        body = {"timeout": 10000, "topics": [{"name": t, "partitions": ps} for t, ps in by.items()]}
        response = s.request(45, 0, body)
        return response["error_code"], sorted(
            (r["name"], p["partition_index"], p["error_code"])
            for r in response["responses"]
            for p in r["partitions"]
        )

    def listing(s: System) -> Any:
        response = s.request(46, 0, {"timeout": 10000, "topics": None})
        return response["error_code"], [t["name"] for t in response["topics"]]

    cases = {
        "same_replicas": [(topic, 0, [0])],
        "unknown_broker": [(topic, 0, [5])],
        "empty_replicas": [(topic, 0, [])],
        "duplicate_replica": [(topic, 0, [0, 0])],
        "unknown_topic": [("compat-missing", 0, [0])],
        "unknown_partition": [(topic, 9, [0])],
        "cancel_none": [(topic, 1, None)],
    }
    for case, parts in cases.items():
        pair.same(f"reassignments.{case}", lambda s: alter(s, parts))
    pair.same(
        "reassignments.list", lambda s: wait_for(lambda: listing(s) == (0, []) and listing(s))
    )


def test_unlisted_checks_are_known() -> None:
    """Every check a difference names is one this suite runs (no stale entries by typo)."""
    import re
    from pathlib import Path

    here = "".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    prefixes = set(re.findall(r'f?"([a-z_]+)\.', here))
    for d in DIFFERENCES:
        for check in d.checks:
            assert check.split(".")[0] in prefixes, check
    assert not listed("no.such.check")


pytestmark = pytest.mark.timeout(600)
