"""Kafka clients for the CLI tools: shared options, client config, reachability, error wording."""

from __future__ import annotations

import enum
import json
import sys
import time
from collections.abc import Iterable
from typing import Annotated, Any, NoReturn

import typer
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata
from rich.console import Console

from samsa.cli.errors import fail

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CONNECT_TIMEOUT = 10.0  # seconds to get a first metadata answer before calling a broker unreachable
REQUEST_TIMEOUT = 30.0  # seconds for one admin request once connected

Bootstrap = Annotated[
    str,
    typer.Option(
        "--bootstrap-server",
        "-b",
        envvar="SAMSA_BOOTSTRAP_SERVER",
        metavar="HOST:PORT",
        help="Broker(s) to connect to, comma-separated.",
    ),
]
Properties = Annotated[
    list[str] | None,
    typer.Option(
        "--property",
        "-X",
        metavar="KEY=VALUE",
        help="Extra librdkafka client property (repeatable), e.g. -X security.protocol=SSL.",
    ),
]


class Output(enum.StrEnum):
    table = "table"
    json = "json"


OutputOpt = Annotated[
    Output, typer.Option("--output", "-o", help="table for people, json for machines.")
]

# Connection failures say "the broker is not there", not "the request was wrong".
_UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE}


def parse_pairs(values: Iterable[str] | None, option: str) -> dict[str, str]:
    """`key=value` arguments as a dict, in order; a bad one is a usage error."""
    pairs: dict[str, str] = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        pairs[key.strip()] = value
    return pairs


class Cluster:
    """One cluster as seen by this command: the client config, and whether it can be reached."""

    def __init__(self, bootstrap: str, properties: Iterable[str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.properties = parse_pairs(properties, "--property")
        self.all_brokers_down = False
        self.connect_failed = False
        self.connected = False  # once a broker has answered, a lost connection is not "unreachable"

    def _on_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.all_brokers_down = True
        elif err.code() == KafkaError._RESOLVE or "Connect to" in err.str():
            self.connect_failed = True

    def config(self, **extra: Any) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "client.id": "samsa-cli",
            # librdkafka's own log lines would break the one-line-error promise.
            "log_level": 0,
            "error_cb": self._on_error,
            # A typo in a topic name must not create a topic on brokers that auto-create.
            "allow.auto.create.topics": False,
        }
        conf.update(extra)
        conf.update(self.properties)
        return conf

    def admin(self) -> AdminClient:
        return AdminClient(self.config())

    def producer(self, **extra: Any) -> Producer:
        return Producer(self.config(**extra))

    def consumer(self, **extra: Any) -> Consumer:
        return Consumer(self.config(**extra))

    def metadata(self, client: AdminClient | Producer | Consumer) -> ClusterMetadata:
        """All topics' metadata, failing with one line if no broker answers within the bound."""
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.unreachable()
            try:
                md = client.list_topics(timeout=min(0.5, remaining))
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() not in _UNREACHABLE | {KafkaError._TIMED_OUT}:
                    fail(f"cannot read the cluster's metadata: {describe(err)}")
            else:
                self.connected = True
                return md
            # error_cb runs only from poll; an all-down report means refused everywhere,
            # so there is no point waiting out the whole bound.
            client.poll(0)
            if self.all_brokers_down:
                self.unreachable()

    def unreachable(self) -> NoReturn:
        if self.all_brokers_down and not self.connect_failed:
            # librdkafka reports no connect failure when the broker hangs up after accepting.
            fail(f"the broker at {self.bootstrap} accepted the connection, then closed it")
        fail(f"cannot reach the broker at {self.bootstrap}")

    def fail_with(self, error: KafkaError | BaseException, doing: str, topic: str = "") -> NoReturn:
        """One line for a failed Kafka call, in the words of the broker where it gave any."""
        err = error.args[0] if isinstance(error, KafkaException) else error
        if not isinstance(err, KafkaError):
            fail(f"cannot {doing}: {err}")
        code = err.code()
        if code in _UNREACHABLE and not self.connected:
            self.unreachable()
        if code in _UNREACHABLE:
            fail(f"cannot {doing}: lost the connection to the broker at {self.bootstrap}")
        if code == KafkaError._TIMED_OUT:
            fail(f"cannot {doing}: the broker at {self.bootstrap} did not answer in time")
        if topic and code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            fail(f"topic '{topic}' does not exist")
        if topic and code == KafkaError.TOPIC_ALREADY_EXISTS:
            fail(f"topic '{topic}' already exists")
        fail(f"cannot {doing}: {describe(err)}")


def connect(
    bootstrap: str, properties: Iterable[str] | None
) -> tuple[Cluster, AdminClient, ClusterMetadata]:
    """An admin client of a cluster that has answered, and its metadata (or a one-line exit)."""
    cluster = Cluster(bootstrap, properties)
    admin = cluster.admin()
    return cluster, admin, cluster.metadata(admin)


def describe(err: KafkaError) -> str:
    """The broker's message, with the error name when the message alone would be vague."""
    text = err.str()
    name = err.name()
    if text.startswith(("Broker: ", "Local: ")) or not text:
        return f"{text.split(': ', 1)[-1] or name} ({name})"
    return f"{text} ({name})"


def console() -> Console:
    # Piped output is read by scripts and tests: do not fold long names at 80 columns.
    if sys.stdout.isatty():
        return Console(highlight=False)
    return Console(highlight=False, width=200, no_color=True)


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=False))
