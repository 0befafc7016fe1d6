"""Client quotas as a user sees them: a SCRAM user's producer_byte_rate set and described with
Kafka's kafka-configs, that user's producer held to its quota while another user's producer
on the same broker runs unthrottled, and librdkafka told of its throttling (KIP-219).

One in-process broker with a SASL_PLAINTEXT listener (SCRAM-SHA-256) beside the PLAINTEXT one
the tools use; what each producer got through is the broker's own count of bytes appended to
its topic (/metrics). The broker's rates count over 2 windows of 1 s (quota.window.num=2)
rather than Kafka's default 11: the arithmetic is the same (tests/unit/test_client_quota_rules.py
holds it to Kafka's), but the first burst Kafka allows, (quota.window.num - 1) windows' worth,
then weighs a twentieth of the run rather than half of it.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from java_support import ToolShell

from samsa.testing import InProcessBroker, free_port

QUOTA = 100 * 1024  # alice's producer_byte_rate, bytes a second
RUN_S = 20.0


class Env:
    def __init__(self, root: Path) -> None:
        self.ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
        config = {
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "quota.window.num": "2",
        }
        self.broker = InProcessBroker(
            root / "data", config, port=self.ports["PLAINTEXT"], http=True
        )
        self.plaintext = f"127.0.0.1:{self.ports['PLAINTEXT']}"

    def add_user(self, user: str) -> None:
        up = UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), f"{user}-pw".encode()
        )
        admin = AdminClient({"bootstrap.servers": self.plaintext})
        for future in admin.alter_user_scram_credentials([up]).values():
            future.result(10)

    def producer(self, user: str, throttled: list[float]) -> Producer:
        return Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{self.ports['SASL_PLAINTEXT']}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": user,
                "sasl.password": f"{user}-pw",
                "client.id": f"{user}-producer",
                "linger.ms": 5,
                "batch.size": 4096,
                "acks": 1,
                "throttle_cb": lambda event: throttled.append(event.throttle_time),
            }
        )

    def bytes_in(self) -> dict[str, float]:
        """Bytes appended per topic, as the broker's /metrics tells them."""
        with urllib.request.urlopen(f"{self.broker.http_url}/metrics", timeout=10) as r:
            text = r.read().decode()
        pattern = r'^kafka_server_broker_topic_metrics_bytes_in_total\{topic="([^"]+)"\} (\S+)$'
        return {m[1]: float(m[2]) for m in re.finditer(pattern, text, re.MULTILINE)}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    env = Env(tmp_path_factory.mktemp("quotas"))
    with env.broker:
        env.add_user("alice")
        env.add_user("bob")
        yield env


def _produce(producer: Producer, topic: str, until: float) -> None:
    """Produce 200-byte records as fast as the client takes them until ``until``."""
    value = b"x" * 200
    while time.monotonic() < until:
        try:
            producer.produce(topic, value)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    # What a throttled producer still holds is dropped, not waited for.
    producer.purge()
    producer.flush(10)


def _set_and_describe_quota(env: Env, log: Path) -> None:
    shell = ToolShell(log)
    try:
        tool = ["--bootstrap-server", env.plaintext]
        alice = ["--entity-type", "users", "--entity-name", "alice"]
        add = ["--alter", "--add-config", f"producer_byte_rate={QUOTA}"]
        done = shell.run("kafka-configs", [*tool, *add, *alice])
        assert done.returncode == 0, done
        described = shell.run("kafka-configs", [*tool, "--describe", "--entity-type", "users"])
        assert described.returncode == 0, described
        said = f"Quota configs for user-principal 'alice' are producer_byte_rate={QUOTA}.0"
        assert said in described.stdout, described.stdout
    finally:
        shell.close()


@pytest.mark.timeout(150)
def test_a_producer_over_its_quota_is_held_to_it_and_another_user_is_not(
    env: Env, tmp_path: Path
) -> None:
    _set_and_describe_quota(env, tmp_path / "tool-shell.log")
    admin = AdminClient({"bootstrap.servers": env.plaintext})
    for future in admin.create_topics([NewTopic(f"quota-{u}", 1, 1) for u in ("a", "b")]).values():
        future.result(30)

    throttled: dict[str, list[float]] = {"alice": [], "bob": []}
    producers = {u: env.producer(u, throttled[u]) for u in throttled}
    before = env.bytes_in()
    until = time.monotonic() + RUN_S
    threads = [
        threading.Thread(target=_produce, args=(producers[u], f"quota-{u[0]}", until))
        for u in throttled
    ]
    for t in threads:
        t.start()
    samples = []
    while time.monotonic() < until:
        samples.append(env.bytes_in())
        # A sample a second, for the failure message; the run lasts RUN_S whatever happens.
        time.sleep(min(1.0, max(0.0, until - time.monotonic())))
    after = env.bytes_in()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive()

    def rate(topic: str) -> float:
        return (after.get(topic, 0) - before.get(topic, 0)) / RUN_S

    per_second = [
        round((b.get("quota-a", 0) - a.get("quota-a", 0)) / QUOTA, 2)
        for a, b in itertools.pairwise(samples)
    ]
    assert QUOTA * 0.9 <= rate("quota-a") <= QUOTA * 1.1, (rate("quota-a") / QUOTA, per_second)
    assert throttled["alice"] and max(throttled["alice"]) > 0
    # Bob, with no quota, on the same broker at the same time: far past alice's quota, and
    # never throttled.
    assert rate("quota-b") > 5 * QUOTA, rate("quota-b") / QUOTA
    assert not [s for s in throttled["bob"] if s > 0]
