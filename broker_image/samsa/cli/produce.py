"""`samsa produce`: send lines from stdin or a file to a topic, one record per line."""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, BinaryIO

import typer
from confluent_kafka import KafkaError, Message, Producer

from samsa.cli.errors import fail, warn
from samsa.cli.kafka import DEFAULT_BOOTSTRAP, Bootstrap, Cluster, Properties, describe

DELIVERY_TIMEOUT_MS = 30_000  # librdkafka's 5 minutes is too long to keep a person waiting


class Acks(enum.StrEnum):
    none = "0"
    leader = "1"
    all = "all"


class Compression(enum.StrEnum):
    none = "none"
    gzip = "gzip"
    snappy = "snappy"
    lz4 = "lz4"
    zstd = "zstd"


def register(app: typer.Typer) -> None:
    app.command("produce")(produce)


def parse_headers(values: list[str] | None) -> list[tuple[str, bytes]]:
    """`k=v` headers in order; repeated keys are kept, as Kafka allows."""
    headers = []
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--header")
        headers.append((key, value.encode()))
    return headers


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    for raw in stream:
        line = raw[:-1] if raw.endswith(b"\n") else raw
        yield line[:-1] if line.endswith(b"\r") else line


class _Deliveries:
    """Counts what the broker acknowledged, and keeps the first failure to show."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0
        self.first_error: KafkaError | None = None

    def __call__(self, err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            self.delivered += 1
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = err


def _send(producer: Producer, topic: str, send: dict[str, object]) -> None:
    while True:
        try:
            producer.produce(topic, **send)  # type: ignore[arg-type]
        except BufferError:
            # The local queue is full: let deliveries drain it, then try again.
            producer.poll(0.1)
            continue
        producer.poll(0)
        return


def produce(
    topic: Annotated[str, typer.Argument(help="The topic to write to.")],
    key_separator: Annotated[
        str | None,
        typer.Option(
            "--key-separator",
            "-K",
            metavar="SEP",
            help="Split each line at the first SEP: key before it, value after.",
        ),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header", "-H", metavar="KEY=VALUE", help="A header on every record (repeatable)."
        ),
    ] = None,
    partition: Annotated[
        int | None,
        typer.Option("--partition", "-p", min=0, help="Partition to write to (default: by key)."),
    ] = None,
    acks: Annotated[
        Acks, typer.Option("--acks", help="Acknowledgements to wait for: 0, 1 or all.")
    ] = Acks.all,
    compression: Annotated[
        Compression, typer.Option("--compression", "-z", help="Batch compression codec.")
    ] = Compression.none,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file", "-f", dir_okay=False, help="Read lines from this file instead of stdin."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Write lines as records: one per line, read from stdin (or --file) until its end.

    The topic must exist (see `samsa topics create`). Everything is flushed before exiting;
    the exit status is non-zero if any record was not delivered.
    """
    if key_separator == "":
        raise typer.BadParameter("must not be empty", param_hint="--key-separator")
    headers = parse_headers(header)
    sep = key_separator.encode() if key_separator is not None else None
    cluster = Cluster(bootstrap, properties)
    producer = cluster.producer(
        **{
            "acks": acks.value,
            "compression.type": compression.value,
            "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
        }
    )
    md = cluster.metadata(producer)
    auto_create = cluster.properties.get("allow.auto.create.topics", "").lower() == "true"
    if topic not in md.topics and not auto_create:
        fail(f"topic '{topic}' does not exist")
    if partition is not None and topic in md.topics:
        count = len(md.topics[topic].partitions)
        if partition >= count:
            fail(f"topic '{topic}' has no partition {partition} (it has {count})")

    stream: BinaryIO
    own_stream = file is not None and str(file) != "-"
    if not own_stream:
        stream = sys.stdin.buffer
        if not quiet and stream.isatty():
            typer.echo("Type one record per line; Ctrl-D to finish.", err=True)
    else:
        assert file is not None
        try:
            stream = file.open("rb")
        except OSError as exc:
            fail(f"cannot read {file}: {exc.strerror or exc}")

    deliveries = _Deliveries()
    sent = no_key = 0
    interrupted = False
    try:
        for line in _lines(stream):
            send: dict[str, object] = {"value": line, "on_delivery": deliveries}
            if sep is not None:
                key, found, value = line.partition(sep)
                if found:
                    send["key"], send["value"] = key, value
                else:
                    no_key += 1
            if headers:
                send["headers"] = headers
            if partition is not None:
                send["partition"] = partition
            _send(producer, topic, send)
            sent += 1
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if own_stream:
            stream.close()
    try:
        producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 5)
    except KeyboardInterrupt:
        interrupted = True
    _report(topic, sent, no_key, deliveries, quiet, key_separator)
    if interrupted:
        raise typer.Exit(130)
    if deliveries.failed or deliveries.delivered < sent:
        raise typer.Exit(1)


def _report(
    topic: str,
    sent: int,
    no_key: int,
    deliveries: _Deliveries,
    quiet: bool,
    key_separator: str | None,
) -> None:
    if no_key:
        warn(f"{no_key} line(s) had no {key_separator!r} and were sent without a key")
    if deliveries.failed or deliveries.delivered < sent:
        undelivered = sent - deliveries.delivered
        reason = describe(deliveries.first_error) if deliveries.first_error else "not acknowledged"
        typer.echo(
            f"error: {undelivered} of {sent} records were not delivered to '{topic}': {reason}",
            err=True,
        )
    elif not quiet:
        plural = "" if deliveries.delivered == 1 else "s"
        typer.echo(f"Delivered {deliveries.delivered} record{plural} to '{topic}'.", err=True)
