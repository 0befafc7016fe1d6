"""franz-go (Go) and kafkajs (Node) against the 3-broker Samsa cluster (RF 3, acks=all).

Each client is a small program (tests/clients/go, tests/clients/node) with the same
subcommands and flags, printing JSON: create, describe, produce, offsets, consume (a group
member driven over stdin and stdout) and features. ``make setup`` builds and installs them;
a test fails with a message naming it when they are missing.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import pytest
from kafka_support import Wire, wait_until
from kio.schema.create_partitions.v1.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_topics.v3.request import CreatableTopic, CreateTopicsRequest
from kio.schema.metadata.v6.request import MetadataRequest, MetadataRequestTopic
from matrix_support import ready_group_coordinator, stored_batches

from samsa.local_cluster.cluster import LocalCluster
from samsa_dev import programs

HERE = Path(__file__).resolve().parent
# Every step of the programs is bounded by 20 s; a subprocess gets a little more.
RUN_TIMEOUT = 60.0
# A feature the broker lacks must be refused at once, not after retries run out.
PROMPT_MS = 10_000
PARTITIONS = 6


@dataclass(frozen=True)
class Program:
    name: str
    argv: list[str]

    def run(self, command: str, bootstrap: str, topic: str, *args: str) -> dict[str, Any]:
        argv = [*self.argv, command, "--bootstrap", bootstrap, "--topic", topic, *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        assert done.returncode == 0, f"{self.name} {command}: {done.stderr[-2000:]}"
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def member(self, bootstrap: str, topic: str, group: str, log: Path, *args: str) -> Member:
        argv = [*self.argv, "consume", "--bootstrap", bootstrap, "--topic", topic]
        return Member(self.name, [*argv, "--group", group, *args], log)


@dataclass
class Member:
    """A group member in its own process: it reports its partitions and the records it
    consumed as JSON lines, and leaves the group when told."""

    name: str
    argv: list[str]
    log: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        self._stderr = self.log.open("w")
        self.process = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True
        )
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _drain(self) -> None:
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line is not None:
                self.events.append(json.loads(line))

    def owned(self) -> set[int]:
        self._drain()
        latest = [e["partitions"] for e in self.events if e["event"] == "owned"]
        return set(latest[-1]) if latest else set()

    def records(self) -> list[tuple[int, int, str]]:
        self._drain()
        return [tuple(r) for e in self.events if e["event"] == "records" for r in e["records"]]  # type: ignore[misc]

    def errors(self) -> list[dict[str, Any]]:
        self._drain()
        return [e for e in self.events if e["event"] == "error"]

    def wait(self, predicate: Callable[[], object], what: str, timeout: float = 60) -> None:
        def check() -> object:
            if self.process.poll() is not None:
                pytest.fail(f"{self.name} member exited ({self.process.returncode}): {self.tail()}")
            return predicate()

        wait_until(check, timeout=timeout, interval=0.1, what=f"{self.name}: {what}")

    def leave(self) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write("leave\n")
        self.process.stdin.flush()
        assert self.process.wait(timeout=RUN_TIMEOUT) == 0, self.tail()
        self._drain()
        return self.events[-1]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self._stderr.close()

    def tail(self) -> str:
        self._stderr.flush()
        return self.log.read_text()[-2000:]


@pytest.fixture(scope="session")
def franz_go() -> Program:
    try:
        return Program("franz-go", [str(programs.go_program(HERE / "go"))])
    except programs.ProgramUnavailable as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def kafkajs() -> Program:
    try:
        return Program("kafkajs", programs.node_program(HERE / "node", "client.js"))
    except programs.ProgramUnavailable as exc:
        pytest.fail(str(exc))


@pytest.fixture(params=["franz_go", "kafkajs"])
def program(request: pytest.FixtureRequest) -> Program:
    value: Program = request.getfixturevalue(request.param)
    return value


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.stop()


def test_admin_calls_idempotent_produce_and_group_offsets(
    program: Program, bootstrap: str, topic: str, group: str, samsa_cluster: LocalCluster
) -> None:
    created = program.run("create", bootstrap, topic, "--partitions", "3", "--config",
                          "retention.ms=3600000")  # fmt: skip
    assert created["error"] is None
    again = program.run("create", bootstrap, topic, "--partitions", "3")
    if program.name == "kafkajs":  # kafkajs answers false, not an error, for an existing topic
        assert again == {"error": None, "created": False}
    else:
        assert again["error"] == "TOPIC_ALREADY_EXISTS"

    # Metadata reaches the other brokers after CreateTopics answers, as in Kafka.
    described = wait_until(
        lambda: (d := program.run("describe", bootstrap, topic))["partitions"] and d,
        what="the new topic in every broker's metadata",
    )
    assert described["error"] is None and described["brokers"] == [0, 1, 2]
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    for p in described["partitions"]:
        assert p["error"] is None and sorted(p["replicas"]) == [0, 1, 2], p
        assert p["leader"] in p["replicas"] and sorted(p["isr"]) == [0, 1, 2], p
    assert described["configs"]["retention.ms"] == {
        "value": "3600000",
        "source": "DYNAMIC_TOPIC_CONFIG",
    }
    assert described["configs"]["min.insync.replicas"]["value"] == "2"

    produced = program.run("produce", bootstrap, topic, "--count", "500")
    assert produced["acked"] == 500 and produced["errors"] == {}, produced
    if program.name == "franz-go":
        assert produced["producer_id"] >= 0 and produced["producer_id_error"] is None
    # acks=all: every replica holds every record; idempotent: every batch has a producer id
    # and sequence numbers.
    wait_until(
        lambda: sum(h.records_count for h in stored_batches(samsa_cluster, topic)) == 3 * 500,
        what="500 records on all 3 replicas",
    )
    headers = stored_batches(samsa_cluster, topic)
    assert all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers), headers[:3]

    offsets = program.run("offsets", bootstrap, topic, "--group", group, "--commit")
    assert offsets["start"] == {"0": 0, "1": 0, "2": 0}
    assert sum(offsets["end"].values()) == 500
    assert offsets["commit_error"] is None and offsets["fetch_error"] is None
    assert offsets["committed"] == offsets["end"]
    assert (offsets["group_error"], offsets["group_state"], offsets["group_members"]) == (
        None,
        "Empty",
        0,
    )


def test_group_members_split_partitions_hand_over_and_consume_each_record_once(
    program: Program, bootstrap: str, topic: str, group: str, tmp_path: Path, members: list[Member]
) -> None:
    assert program.run("create", bootstrap, topic, "--partitions", str(PARTITIONS))["error"] is None
    everything = set(range(PARTITIONS))
    a = program.member(bootstrap, topic, group, tmp_path / "a.log")
    members.append(a)
    a.wait(lambda: a.owned() == everything, "the only member owns every partition")

    def produce(prefix: str, count: int = 300) -> set[str]:
        done = program.run("produce", bootstrap, topic, "--count", str(count), "--prefix", prefix)
        assert done["acked"] == count and done["errors"] == {}, done
        return {f"{prefix}-{i}" for i in range(count)}

    def consumed() -> list[str]:
        return [value for m in members for _, _, value in m.records()]

    expected = produce("first")
    b = program.member(bootstrap, topic, group, tmp_path / "b.log")
    members.append(b)
    a.wait(
        lambda: a.owned() and b.owned() and not a.owned() & b.owned()
        and a.owned() | b.owned() == everything,
        "two members split the partitions",
    )  # fmt: skip
    expected |= produce("second")
    a.wait(lambda: set(consumed()) >= expected, "the first and second records consumed")
    b_partitions = {p for p, _, _ in b.records()}
    assert b_partitions and b_partitions <= b.owned(), (b_partitions, b.owned())

    left = b.leave()
    assert left == {"event": "left", "error": None}
    a.wait(lambda: a.owned() == everything, "the member that stayed owns every partition")
    expected |= produce("third")
    a.wait(lambda: set(consumed()) >= expected, "the third records consumed")
    assert a.leave() == {"event": "left", "error": None}

    counts = Counter(consumed())
    assert set(counts) == expected
    assert [v for v, n in counts.items() if n > 1] == [], "records consumed twice"
    assert a.errors() == [] and b.errors() == []
    offsets = program.run("offsets", bootstrap, topic, "--group", group)
    assert offsets["committed"] == offsets["end"] and sum(offsets["end"].values()) == 900


def test_transactions_and_admin_features_are_served_and_kip848_is_refused_promptly(
    program: Program, bootstrap: str, topic: str, group: str
) -> None:
    assert program.run("create", bootstrap, topic, "--partitions", "1")["error"] is None
    assert program.run("produce", bootstrap, topic, "--count", "10")["acked"] == 10
    # What is checked is the answer to each feature, not a fresh cluster's first group.
    ready_group_coordinator(bootstrap, topic)
    tried = program.run("features", bootstrap, topic)
    for name, attempt in tried.items():
        assert attempt["elapsed_ms"] < PROMPT_MS, (name, attempt)
    assert tried.pop("after")["error"] is None, "the client still works afterwards"
    too_old = "broker is too old; the broker has already indicated it will not know how to handle"
    # Transactions are served now: the attempt's transactional record lands in the topic.
    assert tried["transaction"]["error"] is None, tried["transaction"]
    if program.name == "franz-go":
        assert tried["describe_log_dirs"]["error"] is None, "one log directory is described"
        # KIP-848's ConsumerGroupHeartbeat is not advertised, so it is never sent.
        assert too_old in tried["consumer_group_heartbeat"]["error"]
    else:
        # ACLs are served; with no authorizer, as Kafka without one answers
        assert tried["describe_acls"]["error"] == "SECURITY_DISABLED"
        assert tried["delete_records"]["error"] is None
    offsets = program.run("offsets", bootstrap, topic, "--group", group)
    # kafkajs's DeleteRecords trimmed the first record; nothing else went.
    start = 1 if program.name == "kafkajs" else 0
    assert offsets["start"] == {"0": start}, "nothing was lost"
    # Ten records, then the transaction's record (and its marker, once it ends).
    assert offsets["end"]["0"] >= 11


def test_franz_go_asking_for_kip848_groups_gets_a_classic_group(
    franz_go: Program, bootstrap: str, topic: str, group: str, tmp_path: Path, members: list[Member]
) -> None:
    """franz-go's ServerSideBalancer falls back to the classic protocol when the broker does
    not advertise ConsumerGroupHeartbeat, as with Kafka before 4.0."""
    assert franz_go.run("create", bootstrap, topic, "--partitions", "3")["error"] is None
    assert franz_go.run("produce", bootstrap, topic, "--count", "50")["acked"] == 50
    m = franz_go.member(bootstrap, topic, group, tmp_path / "m.log", "--server-side-balancer")
    members.append(m)
    m.wait(lambda: len(m.records()) >= 50, "50 records consumed")
    described = franz_go.run("offsets", bootstrap, topic, "--group", group)
    assert (described["group_state"], described["group_members"]) == ("Stable", 1)
    assert m.leave() == {"event": "left", "error": None}
    assert sorted(v for _, _, v in m.records()) == sorted(f"r-{i}" for i in range(50))
    assert m.errors() == []


def test_create_topics_and_partitions_answer_once_the_broker_knows_the_leaders(
    samsa_cluster: LocalCluster, topic: str
) -> None:
    """kafkajs creates a topic on the controller, then at once asks that broker for the
    topic's leaders and gives up on UNKNOWN_TOPIC_OR_PARTITION. Kafka answers CreateTopics
    and CreatePartitions only once the answering broker has a leader for every new
    partition; so does Samsa, whichever broker is asked."""
    wait = timedelta(seconds=20)

    def leaders(wire: Wire, name: str) -> list[int]:
        asked = MetadataRequest(
            topics=(MetadataRequestTopic(name=name),), allow_auto_topic_creation=False
        )
        answer = wire.request(3, 6, asked)
        (described,) = answer.topics
        assert described.error_code.value == 0, described
        assert all(p.error_code.value == 0 for p in described.partitions), described
        return sorted(p.partition_index for p in described.partitions if p.leader_id >= 0)

    for broker in range(3):
        name = f"{topic}-{broker}"
        with Wire(samsa_cluster.broker(broker).port) as wire:
            new = CreatableTopic(
                name=name, num_partitions=3, replication_factor=3, assignments=(), configs=()
            )
            create = CreateTopicsRequest(topics=(new,), timeout=wait, validate_only=False)
            created = wire.request(19, 3, create)
            assert created.topics[0].error_code.value == 0, created
            assert leaders(wire, name) == [0, 1, 2]
            more = CreatePartitionsTopic(name=name, count=6, assignments=None)
            grow = CreatePartitionsRequest(topics=(more,), timeout=wait, validate_only=False)
            grown = wire.request(37, 1, grow)
            assert grown.results[0].error_code.value == 0, grown
            assert leaders(wire, name) == [0, 1, 2, 3, 4, 5]


def test_a_missing_program_names_make_setup(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module example.com/never/built\n\ngo 1.26.0\n")
    (tmp_path / "go.sum").write_text("")
    (tmp_path / "main.go").write_text(f"package main\n\n// {time.time_ns()}\nfunc main() {{}}\n")
    with pytest.raises(programs.ProgramUnavailable, match=r"run `make setup`"):
        programs.go_program(tmp_path)
    (tmp_path / "package-lock.json").write_text("{}")
    with pytest.raises(programs.ProgramUnavailable, match=r"run `make setup`"):
        programs.node_program(tmp_path, "client.js")
