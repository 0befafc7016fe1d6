"""Kafka's ZooKeeper layout (its ZkData): the znode paths and the JSON each znode holds.

The znodes and their JSON are Apache Kafka's (ZooKeeper mode), so anyone who knows Kafka can
read a Samsa cluster with zkCli:

    /cluster/id                                   {"version":"1","id":...}
    /brokers/ids/<id>                             ephemeral registration, endpoints and rack
    /brokers/topics/<t>                           replica assignment and topic id
    /brokers/topics/<t>/partitions/<p>/state      leader, leader_epoch, isr, controller_epoch
    /controller                                   ephemeral: the elected controller
    /controller_epoch                             the controller epoch
    /config/topics/<t>, /config/brokers/<entity>  config overrides
    /admin/delete_topics/<t>                      topics to delete
    /latest_producer_id_block                     producer id blocks

Pure values and codecs, no I/O: kazoo is named only for types, so a standalone broker that
imports these names loads no ZooKeeper client.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from samsa.metadata.model import BrokerInfo, Endpoint
from samsa.wall_clock import wall_clock_ms

if TYPE_CHECKING:
    from kazoo.protocol.states import ZnodeStat

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
DELETE_TOPICS = "/admin/delete_topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
PERSISTENT_PATHS = (
    "/brokers/ids",
    "/brokers/topics",
    "/brokers/seqid",
    "/config/topics",
    "/config/brokers",
    "/config/changes",
    "/admin/delete_topics",
    "/isr_change_notification",
)
# Kafka's LeaderAndIsr sentinels.
NO_LEADER = -1
LEADER_DURING_DELETE = -2


def topic_id_to_zk(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def topic_id_from_zk(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def sanitize(name: str) -> str:
    """A user or client id as a znode name, as Kafka's Sanitizer writes it: URL-encoded, with
    '*' and '~' encoded too (Java's URLEncoder with Kafka's fixes)."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(znode: str) -> str:
    return unquote(znode)


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _now_ms() -> str:
    return str(wall_clock_ms())


@dataclass(frozen=True)
class RegisteredBroker:
    info: BrokerInfo
    epoch: int  # the czxid of its registration: a restarted broker has a larger one


@dataclass(frozen=True)
class TopicZnode:
    name: str
    topic_id: uuid.UUID
    assignment: dict[int, list[int]]
    adding: dict[int, list[int]]
    removing: dict[int, list[int]]
    version: int  # znode version, for conditional updates


@dataclass(frozen=True)
class LeaderIsrAndEpoch:
    """/brokers/topics/<t>/partitions/<p>/state with its znode version (the partition epoch)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int
    leader_recovery_state: int = 0

    def to_json(self) -> bytes:
        return _dump(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
                "leader_recovery_state": self.leader_recovery_state,
            }
        )

    @classmethod
    def from_json(cls, data: bytes, stat: ZnodeStat) -> LeaderIsrAndEpoch:
        d = json.loads(data)
        return cls(
            int(d["leader"]),
            int(d["leader_epoch"]),
            tuple(int(r) for r in d["isr"]),
            int(d["controller_epoch"]),
            stat.version,
            int(d.get("leader_recovery_state", 0)),
        )


def cluster_id_json(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def parse_cluster_id(data: bytes) -> str:
    return str(json.loads(data)["id"])


def controller_json(broker_id: int) -> bytes:
    return _dump({"version": 2, "brokerid": broker_id, "timestamp": _now_ms()})


def parse_controller_id(data: bytes) -> int:
    return int(json.loads(data).get("brokerid", -1))


def broker_json(info: BrokerInfo) -> bytes:
    endpoints = info.endpoints or (Endpoint("PLAINTEXT", info.host, info.port),)
    value: dict[str, Any] = {
        "features": {},
        "listener_security_protocol_map": {e.listener: "PLAINTEXT" for e in endpoints},
        "endpoints": [f"{e.listener}://{e.host}:{e.port}" for e in endpoints],
        "jmx_port": -1,
        "port": info.port,
        "host": info.host,
        "version": 5,
        "timestamp": _now_ms(),
    }
    if info.rack:
        value["rack"] = info.rack
    return _dump(value)


def parse_broker(broker_id: int, data: bytes, inter_broker: str | None = None) -> BrokerInfo:
    """A registration; host and port are those of the ``inter_broker`` listener (else the
    first one)."""
    d = json.loads(data)
    endpoints = []
    for text in d.get("endpoints", []):
        name, _, address = text.partition("://")
        h, _, p = address.rpartition(":")
        endpoints.append(Endpoint(name, h.strip("[]"), int(p)))
    chosen = next((e for e in endpoints if e.listener == inter_broker), None)
    chosen = chosen or (endpoints[0] if endpoints else None)
    if chosen is None:
        return BrokerInfo(broker_id, d.get("host"), int(d.get("port", -1)), d.get("rack"))
    return BrokerInfo(broker_id, chosen.host, chosen.port, d.get("rack"), tuple(endpoints))


def topic_json(
    topic_id: uuid.UUID,
    assignment: dict[int, list[int]],
    adding: dict[int, list[int]] | None = None,
    removing: dict[int, list[int]] | None = None,
) -> bytes:
    return _dump(
        {
            "partitions": {str(p): r for p, r in sorted(assignment.items())},
            "topic_id": topic_id_to_zk(topic_id),
            "adding_replicas": {str(p): r for p, r in sorted((adding or {}).items())},
            "removing_replicas": {str(p): r for p, r in sorted((removing or {}).items())},
            "version": 3,
        }
    )


def parse_topic(name: str, data: bytes, stat: ZnodeStat) -> TopicZnode:
    d = json.loads(data)

    def table(key: str) -> dict[int, list[int]]:
        return {int(p): [int(r) for r in rs] for p, rs in (d.get(key) or {}).items()}

    raw_id = d.get("topic_id")
    # A topic written by a tool that predates topic ids gets a stable id from its name.
    topic_id = topic_id_from_zk(raw_id) if raw_id else uuid.uuid5(uuid.NAMESPACE_URL, name)
    return TopicZnode(
        name,
        topic_id,
        table("partitions"),
        table("adding_replicas"),
        table("removing_replicas"),
        stat.version,
    )


def config_json(configs: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": configs})


def parse_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {str(k): str(v) for k, v in json.loads(data).get("config", {}).items()}
