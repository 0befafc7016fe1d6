"""Samsa as a system under test: one standalone broker today, `samsa local up` when it exists.

The cluster variant is detected, not configured: if the `samsa local up` command is there, the
harness runs 3 brokers with ZooKeeper, RF=3 and min.insync.replicas=2; otherwise one standalone
broker (RF=1), and the tables say so.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import ClassVar

from confluent_kafka.admin import AdminClient, NewTopic

from bench.procs import Server, free_port, pid_listening_on, port_open
from bench.system import System

SAMSA = [sys.executable, "-m", "samsa.cli"]
# Large segments keep segment rolls out of a 1 GB backlog, as a tuned Kafka would.
BROKER_OVERRIDES = {"log.segment.bytes": str(512 << 20)}
CLUSTER_OVERRIDES = {**BROKER_OVERRIDES, "zookeeper.session.timeout.ms": "6000"}
_BOOTSTRAP_LINE = re.compile(r"^\s*([\w.-]+:\d+(?:,[\w.-]+:\d+)*)\s*$")


def local_cluster_available() -> bool:
    """Whether this Samsa has the `samsa local up` command (the 3-broker launcher)."""
    res = subprocess.run(
        [*SAMSA, "local", "up", "--help"], capture_output=True, timeout=60, check=False
    )
    return res.returncode == 0


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10_000})


def create_topic(bootstrap: str, name: str, partitions: int, rf: int, config: dict) -> None:
    admin = _admin(bootstrap)
    deadline = time.monotonic() + 60
    while True:
        fut = admin.create_topics([NewTopic(name, partitions, rf, config=config)])[name]
        try:
            fut.result(30)
            break
        except Exception:
            # Brokers may still be registering (a cluster just up): retry until the deadline.
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    # Writes succeed only once every partition has a leader that knows it leads.
    while time.monotonic() < deadline:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} has no leaders after 60s")


def ready_group_coordinator(bootstrap: str, timeout: float = 180.0) -> None:
    """Until a consumer group can commit: the first group of a fresh cluster makes the brokers
    create __consumer_offsets (50 partitions, RF=3 here), which on two busy cores takes seconds
    to a minute, and would otherwise be timed as the first latency run's end-to-end latency."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    create_topic(bootstrap, "bench-group-ready", 1, 1, {})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-group-ready",
            "enable.auto.commit": False,
        }
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                consumer.commit(
                    offsets=[TopicPartition("bench-group-ready", 0, 0)], asynchronous=False
                )
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


class SamsaStandalone(System):
    key = "samsa"
    name = "Samsa"
    topology = "1 standalone broker, RF=1"
    recovery = "restart"
    client = "confluent-kafka (librdkafka), batched"
    kafka_protocol = True

    def start(self) -> None:
        port = free_port()
        self.broker = Server(
            "samsa broker",
            [
                *SAMSA,
                "broker",
                "--data-dir",
                str(self.workdir / "data"),
                "--listen",
                f"127.0.0.1:{port}",
                "--log-level",
                "WARNING",
                *[arg for k, v in BROKER_OVERRIDES.items() for arg in ("--override", f"{k}={v}")],
            ],
            self.workdir / "broker.log",
            port,
        )
        self.broker.start()
        self.endpoint = f"127.0.0.1:{port}"

    def create_stream(self, name: str, partitions: int) -> None:
        create_topic(self.endpoint, name, partitions, 1, {})

    def kill_leader(self, stream: str) -> None:
        self.broker.kill()
        self.broker.start()

    def server_pids(self) -> list[int]:
        return [self.broker.pid] if self.broker.alive else []

    def _stop_servers(self) -> list[int]:
        broker = getattr(self, "broker", None)
        code = broker.stop() if broker is not None else None
        return [] if code is None else [code]


class SamsaCluster(System):
    """`samsa local up --brokers 3`: ZooKeeper and three brokers, RF=3, min.insync.replicas=2.

    A killed broker is noticed when the controller's probes find nothing listening on its port
    (or, with the probes off, when its ZooKeeper session expires: 6 s here, Kafka's default
    before 2.5, rather than today's 18 s, as a cluster tuned for fast failover would run).
    """

    #: properties over CLUSTER_OVERRIDES, for variants
    overrides: ClassVar[dict[str, str]] = {}

    key = "samsa"
    name = "Samsa"
    topology = (
        "3 brokers, RF=3, min.insync.replicas=2, ZooKeeper session timeout 6 s, "
        "liveness probes every 250 ms"
    )
    recovery = "failover"
    client = "confluent-kafka (librdkafka), batched"
    kafka_protocol = True

    def start(self) -> None:
        self._up = subprocess.Popen(
            [
                *SAMSA,
                "local",
                "up",
                "--brokers",
                "3",
                "--data-dir",
                str(self.workdir / "data"),
                *[
                    arg
                    for k, v in {**CLUSTER_OVERRIDES, **self.overrides}.items()
                    for arg in ("--override", f"{k}={v}")
                ],
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        found: list[str] = []
        ready = threading.Event()
        log = (self.workdir / "local-up.log").open("w")

        def drain() -> None:
            # `up` may return once the brokers run, or stay in the foreground: drain it either way.
            assert self._up.stdout is not None
            for line in self._up.stdout:
                log.write(line)
                log.flush()
                match = _BOOTSTRAP_LINE.match(line)
                if match and not found:
                    found.append(match.group(1))
                    ready.set()
            ready.set()
            log.close()

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(120) or not found:
            raise RuntimeError(
                f"samsa local up printed no bootstrap servers; see {self.workdir / 'local-up.log'}"
            )
        self.endpoint = found[0]
        ready_group_coordinator(self.endpoint)

    def create_stream(self, name: str, partitions: int) -> None:
        create_topic(self.endpoint, name, partitions, 3, {"min.insync.replicas": "2"})

    def _broker_ports(self) -> list[int]:
        return [int(hp.rsplit(":", 1)[1]) for hp in self.endpoint.split(",")]

    def kill_leader(self, stream: str, sig: int = signal.SIGKILL) -> None:
        """Signal the leader of the stream's first partition (and say whether it was the
        controller too: then a new controller must be elected first)."""
        meta = _admin(self.endpoint).list_topics(stream, timeout=10)
        leader = meta.topics[stream].partitions[0].leader
        self.stopped_broker = leader
        self.stopped_controller = leader == meta.controller_id
        port = int(meta.brokers[leader].port)
        pid = pid_listening_on(port)
        if pid is None:
            raise RuntimeError(f"no process listens on the leader's port {port}")
        os.kill(pid, sig)

    def server_pids(self) -> list[int]:
        meta = _admin(self.endpoint).list_topics(timeout=10)
        pids = [pid_listening_on(int(b.port)) for b in meta.brokers.values()]
        return [p for p in pids if p is not None]

    def _stop_servers(self) -> list[int]:
        up = getattr(self, "_up", None)
        if up is None:
            return []
        down = subprocess.run(
            [*SAMSA, "local", "down", "--data-dir", str(self.workdir / "data")],
            capture_output=True,
            timeout=120,
            check=False,
        )
        if up.poll() is None:
            up.terminate()
            try:
                up.wait(60)
            except subprocess.TimeoutExpired:
                up.kill()
                up.wait()
        ports = self._broker_ports() if self.endpoint else []
        deadline = time.monotonic() + 30
        while any(port_open(p) for p in ports) and time.monotonic() < deadline:
            time.sleep(0.1)
        return [down.returncode]


def samsa_system(mode: str = "auto") -> type[System]:
    """`cluster`, `standalone`, or `auto`: the cluster when `samsa local up` exists."""
    if mode == "cluster" or (mode == "auto" and local_cluster_available()):
        return SamsaCluster
    return SamsaStandalone
