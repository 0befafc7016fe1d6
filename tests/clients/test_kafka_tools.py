"""Apache Kafka's command-line tools (Kafka 4.3) against the 3-broker Samsa cluster (RF 3,
min.insync.replicas 2), run as an operator would run them, with their printed output checked.

The tools run by their main classes in one JVM (java_support.ToolShell), one after another,
so the module pays for one JVM start rather than one for each of its tool runs.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from java_support import Tool, ToolShell
from kafka_support import wait_until


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolShell]:
    running = ToolShell(tmp_path_factory.mktemp("tools") / "tool-shell.log")
    yield running
    running.close()


@pytest.fixture
def tool(shell: ToolShell, bootstrap: str) -> Tool:
    """Run a tool with ``--bootstrap-server`` first; the completed run, its exit status
    unchecked."""

    def run(name: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return shell.run(name, ["--bootstrap-server", bootstrap, *args], input=input)

    return run


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (
        f"{done.args[0]} failed ({done.returncode}): {done.stdout}{done.stderr}"
    )
    return done.stdout


def partitions(tool: Tool, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """kafka-topics --describe: each partition's leader, replicas and ISR."""
    found = {}
    for line in ok(tool("kafka-topics", "--describe", "--topic", topic)).splitlines():
        row = re.search(
            r"Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]*)", line
        )
        if row:
            replicas = [int(b) for b in row[3].split(",")]
            isr = [int(b) for b in row[4].split(",") if b]
            found[int(row[1])] = (int(row[2]), replicas, isr)
    return found


def table(text: str) -> list[dict[str, str]]:
    """The rows of a table kafka-consumer-groups prints, by its column names."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    header = next(i for i, cells in enumerate(lines) if cells[:1] == ["GROUP"])
    return [dict(zip(lines[header], cells, strict=True)) for cells in lines[header + 1 :]]


def test_kafka_topics_create_list_describe_alter_and_delete(tool: Tool, topic: str) -> None:
    created = tool("kafka-topics", "--create", "--topic", topic, "--partitions", "3",
                   "--replication-factor", "3", "--config", "retention.ms=3600000")  # fmt: skip
    assert f"Created topic {topic}." in ok(created).splitlines()
    assert topic in ok(tool("kafka-topics", "--list")).split()
    described = partitions(tool, topic)
    assert sorted(described) == [0, 1, 2]
    for leader, replicas, isr in described.values():
        assert sorted(replicas) == [0, 1, 2] and sorted(isr) == [0, 1, 2]
        assert leader == replicas[0], "a new partition is led by its preferred replica"
    head = ok(tool("kafka-topics", "--describe", "--topic", topic)).splitlines()[0]
    assert "PartitionCount: 3" in head and "ReplicationFactor: 3" in head
    assert "retention.ms=3600000" in head

    again = tool("kafka-topics", "--create", "--topic", topic, "--partitions", "3")
    assert again.returncode == 1
    assert f"Topic '{topic}' already exists" in again.stdout + again.stderr

    ok(tool("kafka-topics", "--alter", "--topic", topic, "--partitions", "5"))
    wait_until(lambda: sorted(partitions(tool, topic)) == [0, 1, 2, 3, 4], what="5 partitions")
    fewer = tool("kafka-topics", "--alter", "--topic", topic, "--partitions", "2")
    assert fewer.returncode == 1
    assert "InvalidPartitionsException" in fewer.stdout + fewer.stderr

    ok(tool("kafka-topics", "--delete", "--topic", topic))
    wait_until(
        lambda: topic not in ok(tool("kafka-topics", "--list")).split(), what="the topic gone"
    )
    missing = tool("kafka-topics", "--describe", "--topic", topic)
    assert missing.returncode == 1
    assert f"Topic '{topic}' does not exist as expected" in missing.stdout + missing.stderr


def test_console_producer_and_consumer_and_consumer_groups_reset(
    tool: Tool, topic: str, group: str
) -> None:
    ok(tool("kafka-topics", "--create", "--topic", topic, "--partitions", "3"))
    lines = [f"k{i}:v{i}" for i in range(60)]
    produced = tool("kafka-console-producer", "--topic", topic, "--reader-property",
                    "parse.key=true", "--reader-property", "key.separator=:",
                    "--command-property", "acks=all", input="\n".join(lines) + "\n")  # fmt: skip
    ok(produced)

    def consume() -> list[str]:
        out = ok(tool("kafka-console-consumer", "--topic", topic, "--group", group,
                      "--from-beginning", "--max-messages", "60", "--timeout-ms", "30000",
                      "--formatter-property", "print.key=true",
                      "--formatter-property", "key.separator=:"))  # fmt: skip
        return out.splitlines()

    first = consume()
    assert Counter(first) == Counter(lines), "each record consumed once, key and value intact"

    described = table(ok(tool("kafka-consumer-groups", "--describe", "--group", group)))
    assert {r["PARTITION"] for r in described} == {"0", "1", "2"}
    assert all(r["TOPIC"] == topic and r["LAG"] == "0" for r in described), described
    assert sum(int(r["CURRENT-OFFSET"]) for r in described) == 60
    assert group in ok(tool("kafka-consumer-groups", "--list")).split()

    reset = ok(tool("kafka-consumer-groups", "--group", group, "--topic", topic,
                    "--reset-offsets", "--to-earliest", "--execute"))  # fmt: skip
    assert [r["NEW-OFFSET"] for r in table(reset)] == ["0", "0", "0"]
    described = table(ok(tool("kafka-consumer-groups", "--describe", "--group", group)))
    assert sum(int(r["LAG"]) for r in described) == 60
    assert Counter(consume()) == Counter(lines), "the group reads everything again"

    shifted = ok(tool("kafka-consumer-groups", "--group", group, "--topic", f"{topic}:0",
                      "--reset-offsets", "--shift-by", "-5", "--execute"))  # fmt: skip
    ((row,),) = [table(shifted)]
    end = next(int(r["LOG-END-OFFSET"]) for r in described if r["PARTITION"] == "0")
    assert (row["PARTITION"], int(row["NEW-OFFSET"])) == ("0", max(end - 5, 0))


def test_get_offsets_and_delete_records(tool: Tool, topic: str, tmp_path: Path) -> None:
    ok(tool("kafka-topics", "--create", "--topic", topic, "--partitions", "2"))
    ok(tool("kafka-console-producer", "--topic", topic, "--command-property", "acks=all",
            "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
            input="".join(f"{i % 2}:v{i}\n" for i in range(40))))  # fmt: skip

    def offsets(*args: str) -> dict[str, int]:
        out = ok(tool("kafka-get-offsets", "--topic", topic, *args))
        return {p: int(o) for p, o in (line.rsplit(":", 2)[1:] for line in out.split())}

    latest = offsets()
    assert sum(latest.values()) == 40 and set(latest) == {"0", "1"}
    assert offsets("--time", "-2") == {"0": 0, "1": 0}

    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "offset": 5},
        {"topic": topic, "partition": 1, "offset": -1},
    ]}))  # fmt: skip
    deleted = ok(tool("kafka-delete-records", "--offset-json-file", str(plan)))
    assert f"partition: {topic}-0\tlow_watermark: 5" in deleted
    assert f"partition: {topic}-1\tlow_watermark: {latest['1']}" in deleted, "-1: up to the end"
    assert offsets("--time", "-2") == {"0": 5, "1": latest["1"]}
    beyond = tmp_path / "beyond.json"
    beyond.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "offset": latest["0"] + 10},
    ]}))  # fmt: skip
    refused = ok(tool("kafka-delete-records", "--offset-json-file", str(beyond)))
    assert "OffsetOutOfRangeException" in refused


def test_kafka_configs_alter_describe_and_delete(tool: Tool, topic: str) -> None:
    ok(tool("kafka-topics", "--create", "--topic", topic, "--partitions", "1"))
    topic_entity = ("--entity-type", "topics", "--entity-name", topic)
    altered = tool("kafka-configs", *topic_entity, "--alter",
                   "--add-config", "retention.ms=3600000,max.message.bytes=2000000")  # fmt: skip
    assert ok(altered).strip() == f"Completed updating config for topic {topic}."
    described = ok(tool("kafka-configs", *topic_entity, "--describe"))
    assert (
        "retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000"
        in described
    )
    assert "max.message.bytes=2000000" in described

    ok(tool("kafka-configs", *topic_entity, "--alter", "--delete-config", "retention.ms"))
    described = ok(tool("kafka-configs", *topic_entity, "--describe"))
    assert "retention.ms" not in described and "max.message.bytes=2000000" in described

    bad = tool("kafka-configs", *topic_entity, "--alter", "--add-config", "retention.ms=soon")
    assert bad.returncode == 1
    assert "InvalidConfigurationException" in bad.stdout + bad.stderr or (
        "Invalid value soon for configuration retention.ms" in bad.stdout + bad.stderr
    )

    broker = ok(tool("kafka-configs", "--entity-type", "brokers", "--entity-name", "0",
                     "--describe", "--all"))  # fmt: skip
    # Set in the brokers' properties files (the cluster fixture's min.insync.replicas=2).
    assert re.search(
        r"min\.insync\.replicas=2 .*STATIC_BROKER_CONFIG:min\.insync\.replicas=2", broker
    )

    # The cluster-wide default (--entity-default) reaches every broker, and the topics.
    default = ("--entity-type", "brokers", "--entity-default")
    set_by_default = (
        "retention.ms=604800001 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG"
    )

    def every_config(*entity: str) -> str:
        return ok(tool("kafka-configs", *entity, "--describe", "--all"))

    ok(tool("kafka-configs", *default, "--alter", "--add-config", "log.retention.ms=604800001"))
    try:
        assert f"log.{set_by_default}" in ok(tool("kafka-configs", *default, "--describe"))
        for b in ("0", "1", "2"):
            wait_until(
                lambda b=b: (
                    f"log.{set_by_default}"
                    in every_config("--entity-type", "brokers", "--entity-name", b)
                ),
                what=f"the cluster default on broker {b}",
            )
        assert f"\n  {set_by_default}:log.retention.ms=604800001" in every_config(*topic_entity)
    finally:
        ok(tool("kafka-configs", *default, "--alter", "--delete-config", "log.retention.ms"))
    assert "log.retention.ms" not in ok(tool("kafka-configs", *default, "--describe"))


def test_reassign_partitions_generate_execute_verify_and_preferred_leader_election(
    tool: Tool, topic: str, tmp_path: Path
) -> None:
    ok(tool("kafka-topics", "--create", "--topic", topic, "--replica-assignment", "0:1,1:0"))
    values = [f"r{i}" for i in range(100)]
    ok(tool("kafka-console-producer", "--topic", topic, "--command-property", "acks=all",
            input="\n".join(values) + "\n"))  # fmt: skip
    wait_until(
        lambda: [isr for _, _, isr in partitions(tool, topic).values()] == [[0, 1], [1, 0]],
        what="both replicas in the ISR",
    )

    move = tmp_path / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    generated = ok(tool("kafka-reassign-partitions", "--topics-to-move-json-file", str(move),
                        "--broker-list", "1,2", "--generate"))  # fmt: skip
    assert "Current partition replica assignment" in generated
    proposed = generated.split("Proposed partition reassignment configuration")[1]
    assert '"partition":0' in proposed and "0," not in proposed.replace('"partition":0,', "")

    # Partition 0 moves from brokers 0 and 1 to 2 and 1; partition 1 keeps its brokers in a new
    # order, so that its preferred leader changes.
    plan = tmp_path / "plan.json"
    plan.write_text(
        '{"version": 1, "partitions": ['
        f'{{"topic": "{topic}", "partition": 0, "replicas": [2, 1]}},'
        f'{{"topic": "{topic}", "partition": 1, "replicas": [0, 1]}}]}}'
    )
    executed = ok(tool("kafka-reassign-partitions", "--reassignment-json-file", str(plan),
                       "--execute"))  # fmt: skip
    assert "Successfully started partition reassignments" in executed

    def verified() -> str | None:
        out = ok(tool("kafka-reassign-partitions", "--reassignment-json-file", str(plan),
                      "--verify"))  # fmt: skip
        return out if "is still in progress" not in out else None

    out = wait_until(verified, what="the reassignment complete")
    assert f"Reassignment of partition {topic}-0 is completed" in out
    assert f"Reassignment of partition {topic}-1 is completed" in out
    after = partitions(tool, topic)
    assert after[0][1] == [2, 1] and sorted(after[0][2]) == [1, 2]
    assert after[1][1] == [0, 1]
    assert after[1][0] == 1, "the leader stays where it was while it is a replica"

    elected = ok(tool("kafka-leader-election", "--election-type", "PREFERRED",
                      "--topic", topic, "--partition", "1"))  # fmt: skip
    assert f"Successfully completed leader election (PREFERRED) for partitions {topic}-1" in elected
    assert partitions(tool, topic)[1][0] == 0
    again = ok(tool("kafka-leader-election", "--election-type", "PREFERRED",
                    "--topic", topic, "--partition", "1"))  # fmt: skip
    assert f"Valid replica already elected for partitions {topic}-1" in again

    read = ok(tool("kafka-console-consumer", "--topic", topic, "--from-beginning",
                   "--max-messages", "100", "--timeout-ms", "30000"))  # fmt: skip
    assert sorted(read.split()) == sorted(values), "the moved replicas serve every record"


def test_producer_and_consumer_perf_tests(tool: Tool, topic: str) -> None:
    ok(tool("kafka-topics", "--create", "--topic", topic, "--partitions", "3"))
    produced = ok(tool("kafka-producer-perf-test", "--topic", topic, "--num-records", "20000",
                       "--record-size", "100", "--throughput", "-1",
                       "--command-property", "acks=all", "linger.ms=5"))  # fmt: skip
    summary = produced.strip().splitlines()[-1]
    assert re.match(r"20000 records sent, [\d.]+ records/sec", summary), summary
    consumed = ok(tool("kafka-consumer-perf-test", "--topic", topic, "--num-records", "20000",
                       "--timeout", "30000"))  # fmt: skip
    header, row = consumed.strip().splitlines()[-2:]
    names, values = header.split(","), row.split(",")
    fields = {n.strip(): v.strip() for n, v in zip(names, values, strict=True)}
    assert int(fields["data.consumed.in.nMsg"]) == 20000, fields


def test_kafka_acls_transactions_and_client_quotas(tool: Tool) -> None:
    """ACLs are served, and on this cluster, with no authorizer, kafka-acls gets what Kafka
    answers then. Transactions are served: kafka-transactions lists them. Client quotas are
    served: kafka-configs sets, describes and deletes a user's and a default client's."""
    began = time.monotonic()
    done = tool("kafka-acls", "--list")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "No Authorizer is configured on the broker" in done.stdout + done.stderr, done
    assert time.monotonic() - began < 15, f"kafka-acls took {time.monotonic() - began:.0f} s"
    listed = tool("kafka-transactions", "list")
    assert listed.returncode == 0, (listed.stdout, listed.stderr)
    assert "TransactionalId" in listed.stdout, listed
    user = ["--entity-type", "users", "--entity-name", "tools-alice"]
    ok(tool("kafka-configs", "--alter", "--add-config",
            "producer_byte_rate=1024,request_percentage=50", *user))  # fmt: skip
    ok(tool("kafka-configs", "--alter", "--add-config", "consumer_byte_rate=2048",
            "--entity-type", "clients", "--entity-default"))  # fmt: skip
    described = ok(tool("kafka-configs", "--describe", "--entity-type", "users"))
    assert (
        "Quota configs for user-principal 'tools-alice' are producer_byte_rate=1024.0, "
        "request_percentage=50.0"
    ) in described, described
    clients = ok(
        tool("kafka-configs", "--describe", "--entity-type", "clients", "--entity-default")
    )
    assert "Quota configs for the default client-id are consumer_byte_rate=2048.0" in clients
    refused = tool("kafka-configs", "--alter", "--add-config", "producer_byte_rate=1.5", *user)
    assert refused.returncode == 1, refused
    assert "producer_byte_rate cannot be a fractional value" in refused.stdout + refused.stderr
    ok(tool("kafka-configs", "--alter", "--delete-config",
            "producer_byte_rate,request_percentage", *user))  # fmt: skip
    ok(tool("kafka-configs", "--alter", "--delete-config", "consumer_byte_rate",
            "--entity-type", "clients", "--entity-default"))  # fmt: skip
    assert "tools-alice" not in ok(tool("kafka-configs", "--describe", "--entity-type", "users"))
