"""The differential suite's tools: one system (Apache Kafka or Samsa) seen through raw requests
and real clients, results made comparable, and the comparison that consults the list of known
differences (samsa_dev.differences).

A scenario is a function of a System returning plain data (dicts, lists, ints, strings). Each
is run against both systems; ids, hosts, ports, cluster ids, topic ids, timestamps the broker
chose and error messages are normalised away before the two results are compared.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import os
import time
import typing
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka_support import Wire

from samsa.local_cluster.cluster import LocalCluster, pid_alive
from samsa.protocol.messages import build, request_type
from samsa_dev.differences import DIFFERENCES
from samsa_dev.jars import JarsUnavailable
from samsa_dev.kafka import ApacheKafka

ZERO_UUID = uuid.UUID(int=0)
# Fields whose values are the system's own choice, not behaviour: replaced by a placeholder.
VOLATILE = {
    "cluster_id",
    "throttle_time",
    "throttle_time_ms",
    "host",
    "port",
    "error_message",
    "topic_id",
    "member_id",
    "client_host",
    "rack",
    "session_id",
    "leader_id",
    "controller_id",
}


@dataclass
class System:
    """One system under comparison: its name and its brokers' ports (broker id i at ports[i])."""

    name: str
    ports: list[int]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 15000})

    def request(self, key: int, version: int, body: dict[str, Any], node: int = 0) -> Any:
        """One raw request over a fresh connection; the response as plain data."""
        cls = request_type(key, version)
        with Wire(self.ports[node], timeout=30) as wire:
            return plain(wire.request(key, version, build(cls, filled(cls, body))))

    def closes(self, frame: bytes, node: int = 0) -> bool | Any:
        """Send a hand-made frame: True if the broker closes the connection, else its answer
        frame's length (a response arrived)."""
        with Wire(self.ports[node], timeout=15) as wire:
            wire.send(frame)
            try:
                return len(wire.read_frame())
            except (EOFError, ConnectionResetError):
                return True


def fetch_body(topic: str, offset: int = 0, partition: int = 0, epoch: int = -1) -> dict[str, Any]:
    """A consumer's Fetch (v4 and up) of one partition from `offset`, answered at once."""
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": epoch,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def described_configs(
    s: System, kind: int, resource: str, keys: Any = None, synonyms: bool = True
) -> Any:
    """DescribeConfigs v4 of one resource (`keys`: the config names, None for all): its
    result, error code and configs."""
    response = s.request(
        32,
        4,
        {
            "resources": [
                {"resource_type": kind, "resource_name": resource, "configuration_keys": keys}
            ],
            "include_synonyms": synonyms,
            "include_documentation": False,
        },
    )
    (result,) = response["results"]
    return result


def filled(cls: Any, values: dict[str, Any]) -> dict[str, Any]:
    """`values` with every field the version has and the scenario left out given an empty
    value (None, false, 0 or an empty list), nested entities included."""
    out = dict(values)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        nested = next(
            (a for a in typing.get_args(hint) if dataclasses.is_dataclass(a)),
            hint if dataclasses.is_dataclass(hint) else None,
        )
        if f.name in out:
            if nested is not None and isinstance(out[f.name], list):
                out[f.name] = [filled(nested, v) if isinstance(v, dict) else v for v in out[f.name]]
            continue
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        if type(None) in typing.get_args(hint):
            out[f.name] = None
        elif typing.get_origin(hint) is tuple:
            out[f.name] = []
        elif hint is bool:
            out[f.name] = False
        elif isinstance(hint, type) and issubclass(hint, str):
            out[f.name] = ""
        else:
            out[f.name] = 0
    return out


def plain(value: Any) -> Any:
    """kio values as JSON-like data: enums by value, durations in ms, ids as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return "zero-uuid" if value == ZERO_UUID else "uuid"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value


def normalise(value: Any, drop: frozenset[str] = frozenset()) -> Any:
    """Volatile fields replaced by "*" (or dropped when named in `drop`), recursively."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in drop:
                continue
            if k in VOLATILE and v is not None:
                out[k] = "*"
            else:
                out[k] = normalise(v, drop)
        return out
    if isinstance(value, list):
        return [normalise(v, drop) for v in value]
    return value


class Comparison:
    """Runs each check on both systems and records what differs, so that one test can assert
    that every difference seen is listed, and every listed one still seen."""

    def __init__(self, kafka: System, samsa: System) -> None:
        self.kafka = kafka
        self.samsa = samsa

    def same(self, check: str, scenario: Callable[[System], Any]) -> tuple[Any, Any]:
        """Run `scenario` on both; they must agree unless `check` is a listed difference."""
        theirs = scenario(self.kafka)
        ours = scenario(self.samsa)
        expect(check, theirs, ours)
        return theirs, ours


def listed(check: str) -> bool:
    return any(check in d.checks for d in DIFFERENCES)


def expect(check: str, kafka: Any, samsa: Any) -> None:
    """Kafka's and Samsa's results agree, or `check` is a listed difference that holds.

    With SAMSA_COMPAT_SURVEY set, differences are printed instead, to see them all at once."""
    if os.environ.get("SAMSA_COMPAT_SURVEY"):
        if kafka != samsa:
            print(
                f"DIFF {check} listed={listed(check)}\n  "
                + diff(kafka, samsa).replace("\n", "\n  ")
            )
        return
    if kafka == samsa:
        assert not listed(check), (
            f"{check}: Samsa now behaves as Kafka; remove it from samsa.handlers.differences"
        )
        return
    assert listed(check), f"{check}: Samsa differs from Kafka and it is not listed:\n" + diff(
        kafka, samsa
    )


def diff(kafka: Any, samsa: Any, path: str = "") -> str:
    """The differing leaves of two results, one per line."""
    lines = list(_diff(kafka, samsa, path or "$"))
    return "\n".join(lines[:40]) or f"kafka={kafka!r} samsa={samsa!r}"


def _diff(a: Any, b: Any, path: str) -> Iterator[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k, "<absent>") != b.get(k, "<absent>"):
                yield from _diff(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _diff(x, y, f"{path}[{i}]")
    elif a != b:
        theirs, ours = (json.dumps(v, default=str)[:300] for v in (a, b))
        yield f"{path}: kafka={theirs} samsa={ours}"


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    """Poll until `predicate` returns something truthy; its value. Fails after `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as exc:  # a system still settling: try again
            last = exc
        else:
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what or predicate}: last {last!r}")


# The same for both systems: internal topics a cluster of `size` can hold, quick group starts.
COMMON = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "auto.create.topics.enable": "false",
}


def replicated(size: int) -> dict[str, str]:
    return {
        **COMMON,
        "offsets.topic.replication.factor": str(min(3, size)),
        "transaction.state.log.replication.factor": str(min(3, size)),
        "transaction.state.log.min.isr": str(min(2, size)),
        "default.replication.factor": "1",
    }


def start_pair(tmp: Path, size: int) -> tuple[ApacheKafka, LocalCluster]:
    """Apache Kafka and Samsa of `size` brokers each, started side by side."""
    kafka = ApacheKafka(tmp / "kafka", size, replicated(size))
    samsa = LocalCluster(
        tmp / "samsa",
        size,
        {**replicated(size), "zookeeper.session.timeout.ms": "6000"},
    )
    with ThreadPoolExecutor(2) as pool:
        started = [pool.submit(kafka.up, 180), pool.submit(samsa.up, 180)]
        errors = [f.exception() for f in started]
    if any(errors):
        kill_pair(kafka, samsa)
        if isinstance(errors[0], JarsUnavailable):
            pytest.fail(f"Apache Kafka's jars are missing: {errors[0]} (run `make setup`)")
        raise next(e for e in errors if e is not None)
    return kafka, samsa


def kill_pair(kafka: ApacheKafka, samsa: LocalCluster) -> None:
    """Kill both systems' nodes, then stop ZooKeeper and clear their state. Nothing compared
    here depends on a clean shutdown (the bench's systems test checks Kafka's), and a clean
    one cost the 3-node pair about 38 s: three KRaft voters SIGTERMed together can wait out
    the timeout for a quorum that is gone, and Samsa's brokers shut down one at a time."""
    for node in kafka.nodes:
        if pid_alive(node.pid):
            kafka.kill_node(node.node_id)
    for b in samsa.state.brokers if samsa.state else []:
        samsa.kill_broker(b.broker_id)
    kafka.down(timeout=5)
    samsa.down(timeout=5)


def systems(kafka: ApacheKafka, samsa: LocalCluster) -> Comparison:
    assert samsa.state is not None
    return Comparison(
        System("kafka", [n.port for n in kafka.nodes]),
        System("samsa", [b.port for b in samsa.state.brokers]),
    )
