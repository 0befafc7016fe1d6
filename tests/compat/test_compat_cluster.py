"""The differential suite on 3 nodes: a 3-node Apache Kafka beside a 3-broker Samsa, with a
replicated topic whose replicas are placed by hand, so leaders are the same on both. Requests to
followers, a leader stopped and started again (stale epochs, preferred election), a
reassignment and DeleteRecords across replicas."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat_support import Comparison, System, kill_pair, start_pair, systems, wait_for
from test_compat import append, batch, offsets, produce_raw

from samsa.local_cluster.cluster import LocalCluster
from samsa_dev.kafka import ApacheKafka

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TOPIC = "compat-replicated"
ASSIGNMENT = [[0, 1, 2], [1, 2, 0], [2, 0, 1]]


class Trio:
    def __init__(self, kafka: ApacheKafka, samsa: LocalCluster) -> None:
        self.kafka_cluster, self.samsa_cluster = kafka, samsa
        self.pair = systems(kafka, samsa)

    def stop(self, s: System, node: int) -> None:
        if s.name == "kafka":
            self.kafka_cluster.stop_node(node)
        else:
            self.samsa_cluster.stop_broker(node)

    def start(self, s: System, node: int) -> None:
        if s.name == "kafka":
            self.kafka_cluster.start_node(node)
        else:
            self.samsa_cluster.start_broker(node)


@pytest.fixture(scope="module")
def trio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trio]:
    kafka, samsa = start_pair(Path(tmp_path_factory.mktemp("compat3")), 3)
    try:
        yield Trio(kafka, samsa)
    finally:
        kill_pair(kafka, samsa)


def state(s: System) -> list[Any]:
    """(partition, leader, replicas, ISR) of the topic, as partition 0's leader sees it."""
    md = s.request(
        3,
        12,
        {"topics": [{"name": TOPIC, "topic_id": None}], "allow_auto_topic_creation": False},
    )
    return sorted(
        (p["partition_index"], p["leader_id"], p["replica_nodes"], sorted(p["isr_nodes"]))
        for p in md["topics"][0]["partitions"]
    )


def to(node: int, s: System) -> System:
    """The same system, requests going to broker `node`."""
    return System(s.name, [s.ports[node]])


def controller(s: System) -> System:
    """The broker Metadata names as controller, where clients send controller requests."""
    md = s.request(3, 12, {"topics": [], "allow_auto_topic_creation": False})
    return to(md["controller_id"], s)


def non_controller(s: System) -> System:
    md = s.request(3, 12, {"topics": [], "allow_auto_topic_creation": False})
    return to(next(b for b in range(3) if b != md["controller_id"]), s)


def list_offsets(s: System, partition: int, epoch: int) -> Any:
    response = s.request(
        2,
        9,
        {
            "replica_id": -1,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "current_leader_epoch": epoch,
                            "timestamp": -1,
                        }
                    ],
                }
            ],
        },
    )
    p = response["topics"][0]["partitions"][0]
    return p["error_code"], p["offset"] if p["error_code"] == 0 else None


def fetch_from(s: System, partition: int, version: int) -> Any:
    response = s.request(
        1,
        version,
        {
            "replica_id": -1,
            "max_wait": 0,
            "max_bytes": 1 << 20,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": TOPIC,
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            "rack_id": "",
        },
    )
    p = response["responses"][0]["partitions"][0]
    return p["error_code"], p.get("preferred_read_replica"), bool(p["records"])


def test_three_nodes(trio: Trio) -> None:
    pair: Comparison = trio.pair
    for s in (pair.kafka, pair.samsa):
        body = {
            "topics": [
                {
                    "name": TOPIC,
                    "num_partitions": -1,
                    "replication_factor": -1,
                    "assignments": [
                        {"partition_index": i, "broker_ids": r} for i, r in enumerate(ASSIGNMENT)
                    ],
                    "configs": [{"name": "min.insync.replicas", "value": "2"}],
                }
            ],
            "timeout": 30000,
        }
        assert s.request(19, 7, body)["topics"][0]["error_code"] == 0
        wait_for(lambda s=s: all(len(p[3]) == 3 for p in state(s)), 60, "a full ISR")
        for p in range(3):
            append(to(p, s), TOPIC, batch(b"a", b"b", b"c"), p)
            # Produced with acks=1: the checks below start once the records are committed.
            wait_for(lambda p=p, s=s: list_offsets(to(p, s), p, -1) == (0, 3), 30, "commit")
    pair.same("cluster.metadata", state)

    # Partition 0 is led by broker 0: brokers 1 and 2 are its followers.
    def at_follower(s: System) -> Any:
        follower = to(1, s)
        # A follower learns the high watermark in the answer to its next fetch, which both
        # park until replica.fetch.wait.max.ms when nothing new was appended.
        wait_for(lambda: fetch_from(follower, 0, 11)[2], 15, "records at the follower")
        return (
            list_offsets(follower, 0, -1),
            produce_raw(follower, TOPIC, batch(b"x"), 0)["error_code"],
            fetch_from(follower, 0, 4),
            fetch_from(follower, 0, 11),
        )

    pair.same("cluster.at_follower", at_follower)

    def delete_records(s: System) -> Any:
        body = {
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 2}]}],
            "timeout": 10000,
        }
        p = s.request(21, 2, body)["topics"][0]["partitions"][0]
        return p["error_code"], p["low_watermark"]

    pair.same("cluster.delete_records", lambda s: delete_records(to(0, s)))

    # Broker 0 goes: partition 0 moves to a new leader at a new epoch.
    def fail_over(s: System) -> Any:
        trio.stop(s, 0)
        wait_for(lambda: state(to(1, s))[0][1] not in (-1, 0), 60, "a new leader")
        leader = state(to(1, s))[0][1]
        got = (
            list_offsets(to(leader, s), 0, 0),
            offsets(to(leader, s), TOPIC, [-2])[0][:2],
        )
        trio.start(s, 0)
        wait_for(lambda: 0 in state(to(1, s))[0][3], 90, "broker 0 back in the ISR")
        return got

    pair.same("cluster.fail_over", fail_over)

    def elect(s: System) -> Any:
        body = {
            "election_type": 0,
            "topic_partitions": [{"topic": TOPIC, "partitions": [0, 1]}],
            "timeout": 30000,
        }
        response = s.request(43, 2, body)
        return response["error_code"], sorted(
            (p["partition_id"], p["error_code"])
            for r in response["replica_election_results"]
            for p in r["partition_result"]
        )

    pair.same("cluster.elect_at_non_controller", lambda s: elect(non_controller(s))[0])

    def preferred(s: System) -> Any:
        # KRaft Kafka may have moved partition 0 back already, on its own: compare the outcome.
        code = elect(controller(s))[0]
        wait_for(lambda: state(s)[0][1] == 0, 30, "the preferred leader")
        return code, [p[1] for p in state(s)]

    pair.same("cluster.elect_preferred", preferred)
    pair.same("cluster.elect_again", lambda s: elect(controller(s)))

    def reassign(s: System) -> Any:
        body = {
            "timeout": 30000,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 2, "replicas": [0, 1]}]}],
        }
        response = controller(s).request(45, 0, body)
        codes = [p["error_code"] for r in response["responses"] for p in r["partitions"]]

        def done() -> bool:
            listing = controller(s).request(46, 0, {"timeout": 10000, "topics": None})
            return not listing["topics"] and state(s)[2][2] == [0, 1]

        wait_for(done, 90, "the reassignment")
        return response["error_code"], codes, state(s)[2][2:]

    pair.same("cluster.reassign", reassign)
