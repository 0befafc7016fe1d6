"""Kafka Streams (4.3.1, at-least-once) against the 3-broker Samsa cluster: the click-through
join of the example jobs as a Streams application (streams/ClickCampaignJoin.java): a KStream
of ad clicks re-keyed by campaign through a repartition topic, joined with a KTable of
campaigns, and counted per campaign. Its repartition and changelog topics are Samsa topics with
the configs Streams asks for. Killed with kill -9 and started again on an empty state
directory, it restores its stores from the changelogs: clicks that come after the restart are
joined with campaigns it saw only before, and the counts go on from where they were.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import kafka_support
import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka_support import consume, name_for_test, wait_until

from samsa.local_cluster.cluster import LocalCluster
from samsa_dev import jars
from samsa_dev.kafka import java_program
from samsa_spark.generator import CAMPAIGNS, Click, generate

PROGRAM = Path(__file__).resolve().parent / "streams" / "ClickCampaignJoin.java"
PARTITIONS = 3
# A JVM compiles the program and joins the group in 10-30 s on a loaded 2-core machine.
START_TIMEOUT = 120.0
FLOW_TIMEOUT = 60.0
ADVERTISERS = {c: f"advertiser-{i}" for i, c in enumerate(CAMPAIGNS)}


class StreamsApp:
    """The application in its own JVM; the JSON lines it prints are gathered as they come."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.events: list[dict[str, Any]] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr = log.open("a")
        self.process = subprocess.Popen(
            java_program(
                PROGRAM,
                args,
                jar_sets=("streams",),
                heap="384m",
                # Its run is short: the optimising compiler would cost more than it gives.
                jvm_options=("-XX:TieredStopAtLevel=1",),
            ),
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            self._lines.put(line)
        self._lines.put(None)

    def drain(self) -> list[dict[str, Any]]:
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return self.events
            if line is None:
                assert self.process.poll() is not None
                raise AssertionError(f"the application exited ({self.process.returncode})")
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def errors(self) -> list[str]:
        """Once it has exited: what made its stream threads die, each as a chain of causes."""
        while (line := self._lines.get(timeout=10)) is not None:
            if line.startswith("{"):
                self.events.append(json.loads(line))
        return [e["error"] for e in self.events if "error" in e]

    def running(self) -> bool:
        events = self.drain()
        assert not [e for e in events if "error" in e], events
        states = [e["state"] for e in events if "state" in e]
        return bool(states) and states[-1] == "RUNNING"

    def restored(self, store: str, changelog: str) -> int:
        """Records restored into the store from the changelog topic, over all its partitions
        (the latest restoration of each, should a rebalance make it restore one again)."""
        latest = {
            e["partition"]: e["records"]
            for e in self.drain()
            if e.get("restored") == store and e["topic"] == changelog
        }
        return sum(latest.values())

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._stderr.close()


def produce(bootstrap: str, topic: str, records: list[tuple[str, str]]) -> None:
    """Each (key, value) to the partition Java's producers would choose for its key: Streams'
    repartition topic puts a campaign's clicks where Java's murmur2 says, and the campaign
    itself must be in the same partition of its topic (co-partitioning)."""
    kafka_support.produce(
        bootstrap,
        topic,
        [v.encode() for _, v in records],
        keys=[k.encode() for k, _ in records],
        partition=None,
        acks="all",
        partitioner="murmur2_random",
    )


def read_all(bootstrap: str, topic: str) -> list[tuple[str, str]]:
    """Every record of the topic, as (key, value) text, each partition in order."""
    return [
        (r.key.decode(), r.value.decode())
        for p in range(PARTITIONS)
        for r in consume(bootstrap, topic, p)
        if r.key is not None and r.value is not None
    ]


def watermarks(bootstrap: str, topic: str) -> list[tuple[int, int]]:
    """Each partition's log start and end offsets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), 10, cached=False)
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


def all_committed(bootstrap: str, group: str, topics: list[str]) -> bool:
    """Whether the application's group has committed the end of every partition it reads."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group)
    result = admin.list_consumer_group_offsets([request])[group].result(10)
    committed = {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        for t in topics:
            for p in range(PARTITIONS):
                _, high = consumer.get_watermark_offsets(TopicPartition(t, p), 10)
                if high > 0 and committed.get((t, p), -1) != high:
                    return False
        return True
    finally:
        consumer.close()


def topic_shapes(bootstrap: str, topics: list[str]) -> dict[str, tuple[int, int, dict[str, str]]]:
    """Each topic's partition count, replication factor, and the configs it was created with."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=10)
    futures = admin.describe_configs([ConfigResource("topic", t) for t in topics])
    overrides = {
        r.name: {k: v.value for k, v in f.result(30).items() if v.source == 1}
        for r, f in futures.items()
    }
    return {
        t: (len(md.topics[t].partitions), len(md.topics[t].partitions[0].replicas), overrides[t])
        for t in topics
    }


def click_records(clicks: list[Click]) -> list[tuple[str, str]]:
    return [(c.user_id, json.dumps(asdict(c))) for c in clicks]


@dataclass
class Deployment:
    """The application's topics and its first run, once it has processed the first half of the
    clicks; shared by the module's tests (a JVM start costs 10-30 s here)."""

    bootstrap: str
    name: str
    directory: Path
    before: list[Click]
    after: list[Click]
    runs: list[StreamsApp] = field(default_factory=list)

    @property
    def application(self) -> str:
        return f"{self.name}-app"

    def topic(self, role: str) -> str:
        return f"{self.name}-{role}"

    @property
    def repartition(self) -> str:
        return f"{self.application}-clicks-by-campaign-repartition"

    @property
    def changelogs(self) -> list[str]:
        return [f"{self.application}-{store}-changelog" for store in ("campaigns", "click-counts")]

    def start(self, application: str, state_dir: str, *options: str) -> StreamsApp:
        """An instance of the application; `options`: the processing guarantee, then the
        group protocol."""
        roles = ("clicks", "campaigns", "enriched", "counts")
        args = [self.bootstrap, application, str(self.directory / state_dir)]
        app = StreamsApp([*args, *map(self.topic, roles), *options], self.directory / "app.log")
        self.runs.append(app)
        return app

    def run(self, state_dir: str) -> StreamsApp:
        app = self.start(self.application, state_dir)
        wait_until(app.running, START_TIMEOUT, 0.2, "the application RUNNING")
        return app

    def enriched(self) -> list[dict[str, Any]]:
        return [json.loads(v) for _, v in read_all(self.bootstrap, self.topic("enriched"))]

    def caught_up(self, clicks: list[Click]) -> bool:
        """Whether every click is in the enriched topic and counted in the counts topic."""
        counts = {k: int(v) for k, v in read_all(self.bootstrap, self.topic("counts"))}
        expected = dict(Counter(c.campaign_id for c in clicks))
        return len(self.enriched()) >= len(clicks) and counts == expected


@pytest.fixture(scope="module")
def deployment(
    tmp_path_factory: pytest.TempPathFactory, samsa_cluster: LocalCluster
) -> Iterator[Deployment]:
    try:
        jars.fetch("streams")
    except jars.JarsUnavailable as exc:
        pytest.fail(str(exc))
    _, clicks = generate(1200, seed=13)
    half = len(clicks) // 2
    d = Deployment(
        samsa_cluster.bootstrap_servers,
        name_for_test("click-campaign-join", "streams"),
        tmp_path_factory.mktemp("streams"),
        clicks[:half],
        clicks[half:],
    )
    admin = AdminClient({"bootstrap.servers": d.bootstrap})
    roles = ("clicks", "campaigns", "enriched", "counts")
    for f in admin.create_topics([NewTopic(d.topic(r), PARTITIONS, 3) for r in roles]).values():
        f.result(30)
    produce(
        d.bootstrap,
        d.topic("campaigns"),
        [(c, json.dumps({"campaign_id": c, "advertiser": a})) for c, a in ADVERTISERS.items()],
    )
    produce(d.bootstrap, d.topic("clicks"), click_records(d.before))
    try:
        d.run("state-1")
        wait_until(lambda: d.caught_up(d.before), FLOW_TIMEOUT, 0.5, "the first half of the clicks")
        yield d
    finally:
        for app in d.runs:
            app.stop()


def test_clicks_join_campaigns_through_repartition_and_changelog_topics_on_samsa(
    deployment: Deployment,
) -> None:
    d = deployment
    enriched = d.enriched()
    assert sorted(e["click_id"] for e in enriched) == sorted(c.click_id for c in d.before)
    assert all(e["advertiser"] == ADVERTISERS[e["campaign_id"]] for e in enriched)

    shapes = topic_shapes(d.bootstrap, [d.repartition, *d.changelogs])
    # As Streams creates them: a repartition topic that keeps its records until Streams purges
    # them, compacted changelogs; as many partitions as the input, the brokers' default RF.
    assert shapes[d.repartition] == (
        PARTITIONS,
        3,
        {
            "cleanup.policy": "delete",
            "retention.ms": "-1",
            "segment.bytes": "52428800",
            "message.timestamp.type": "CreateTime",
        },
    )
    for changelog in d.changelogs:
        assert shapes[changelog] == (
            PARTITIONS,
            3,
            {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"},
        )

    # Streams deletes what it has consumed and committed from the repartition topic
    # (DeleteRecords after a commit): each partition's log start moves on.
    def purged() -> bool:
        filled = [low for low, high in watermarks(d.bootstrap, d.repartition) if high]
        return bool(filled) and all(low > 0 for low in filled)

    wait_until(purged, FLOW_TIMEOUT, 0.5, "the repartition topic purged")


@pytest.mark.slow
def test_killed_and_restarted_on_empty_state_it_restores_from_the_changelogs(
    deployment: Deployment,
) -> None:
    d = deployment
    # Kill it only once it has committed all it read, so that the counts after the restart are
    # exact (at-least-once would count again what it had not committed).
    inputs = [d.topic("clicks"), d.topic("campaigns"), d.repartition]
    wait_until(
        lambda: all_committed(d.bootstrap, d.application, inputs),
        FLOW_TIMEOUT,
        0.5,
        "the application's offsets committed",
    )
    d.runs[-1].kill()
    produce(d.bootstrap, d.topic("clicks"), click_records(d.after))

    # An empty state directory: everything the stores hold must come from the changelogs.
    second = d.run("state-2")
    campaigns_log, counts_log = d.changelogs
    wait_until(
        lambda: second.restored("campaigns", campaigns_log) >= len(ADVERTISERS),
        FLOW_TIMEOUT,
        0.2,
        "the campaigns restored from their changelog",
    )
    assert second.restored("campaigns", campaigns_log) == len(ADVERTISERS)
    wait_until(
        lambda: second.restored("click-counts", counts_log) > 0,
        FLOW_TIMEOUT,
        0.2,
        "the counts restored from their changelog",
    )
    # The clicks after the restart are joined with campaigns only the changelog still knows,
    # and counted on top of the restored counts.
    clicks = d.before + d.after
    wait_until(lambda: d.caught_up(clicks), FLOW_TIMEOUT, 0.5, "the clicks after the restart")
    enriched = d.enriched()
    assert sorted(e["click_id"] for e in enriched) == sorted(c.click_id for c in clicks)
    assert all(e["advertiser"] == ADVERTISERS[e["campaign_id"]] for e in enriched)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        pytest.param(
            ("at_least_once", "streams"),
            "does not support the STREAMS group protocol",
            id="kip-1071-streams-groups",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_what_samsa_lacks_stops_the_application_at_once_with_a_named_error(
    deployment: Deployment, options: tuple[str, ...], named: str
) -> None:
    """KIP-1071's groups need the StreamsGroupHeartbeat API: Samsa lacks it, and the
    application is told so instead of hanging."""
    application = f"{deployment.application}-{options[-1]}"
    app = deployment.start(application, f"state-{options[-1]}", *options)
    wait_until(
        lambda: app.process.poll() is not None, START_TIMEOUT, 0.2, "the application to stop"
    )
    assert app.process.returncode == 1
    errors = app.errors()
    assert errors and named in errors[0], errors


def read_committed(bootstrap: str, topic: str) -> list[tuple[str, str]]:
    """Every committed record of the topic (isolation.level=read_committed), read to the end
    of every partition (its last stable offset)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": name_for_test("eos-reader", "g"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: list[tuple[str, str]] = []
    at_end: set[int] = set()

    def done() -> bool:
        msg = c.poll(0.5)
        if msg is None:
            return False
        if msg.error() is not None:
            at_end.add(msg.partition() or 0)
        elif msg.key() is not None and msg.value() is not None:
            at_end.discard(msg.partition() or 0)
            out.append(((msg.key() or b"").decode(), (msg.value() or b"").decode()))
        return len(at_end) == PARTITIONS

    try:
        wait_until(done, FLOW_TIMEOUT, 0, f"the end of {topic}")
    finally:
        c.close()
    return out


@pytest.mark.slow
def test_exactly_once_v2_survives_kill_9_with_exact_counts(
    tmp_path_factory: pytest.TempPathFactory, samsa_cluster: LocalCluster
) -> None:
    """processing.guarantee=exactly_once_v2: the application is killed with -9 while it
    processes, started again, and the committed output holds every click exactly once and
    the exact count per campaign (read_committed), however much it had done before."""
    try:
        jars.fetch("streams")
    except jars.JarsUnavailable as exc:
        pytest.fail(str(exc))
    _, clicks = generate(1200, seed=29)
    half = len(clicks) // 2
    d = Deployment(
        samsa_cluster.bootstrap_servers,
        name_for_test("eos-v2", "streams"),
        tmp_path_factory.mktemp("streams-eos"),
        clicks[:half],
        clicks[half:],
    )
    admin = AdminClient({"bootstrap.servers": d.bootstrap})
    roles = ("clicks", "campaigns", "enriched", "counts")
    for f in admin.create_topics([NewTopic(d.topic(r), PARTITIONS, 3) for r in roles]).values():
        f.result(30)
    produce(
        d.bootstrap,
        d.topic("campaigns"),
        [(c, json.dumps({"campaign_id": c, "advertiser": a})) for c, a in ADVERTISERS.items()],
    )
    produce(d.bootstrap, d.topic("clicks"), click_records(d.before))

    def caught_up(expected: list[Click]) -> bool:
        counts = {k: int(v) for k, v in read_committed(d.bootstrap, d.topic("counts"))}
        enriched = read_committed(d.bootstrap, d.topic("enriched"))
        return len(enriched) >= len(expected) and counts == dict(
            Counter(c.campaign_id for c in expected)
        )

    try:
        first = d.start(d.application, "state-1", "exactly_once_v2")
        wait_until(first.running, START_TIMEOUT, 0.2, "the application RUNNING")
        wait_until(lambda: caught_up(d.before), FLOW_TIMEOUT, 0.5, "the first half processed")
        # The second half arrives and the application dies while it processes it.
        produce(d.bootstrap, d.topic("clicks"), click_records(d.after))
        first.kill()
        second = d.start(d.application, "state-1", "exactly_once_v2")
        wait_until(second.running, START_TIMEOUT, 0.2, "the application RUNNING again")
        everything = d.before + d.after
        wait_until(lambda: caught_up(everything), FLOW_TIMEOUT, 0.5, "every click processed")
        enriched = [json.loads(v) for _, v in read_committed(d.bootstrap, d.topic("enriched"))]
        assert sorted(e["click_id"] for e in enriched) == sorted(c.click_id for c in everything)
    finally:
        for app in d.runs:
            app.stop()
