"""`samsa produce`: send lines from stdin or a file to a topic, one record per line."""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterator
from dataclasses import dataclass
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
    shape = _RecordShape(
        key_separator.encode() if key_separator is not None else None,
        parse_headers(header),
        partition,
    )
    cluster = Cluster(bootstrap, properties)
    producer = cluster.producer(
        **{
            "acks": acks.value,
            "compression.type": compression.value,
            "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
        }
    )
    _check_topic(cluster, producer, topic, partition)
    stream, own_stream = _open_input(file, quiet)
    deliveries = _Deliveries()
    sent, no_key, interrupted = _send_lines(producer, topic, stream, own_stream, shape, deliveries)
    try:
        producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 5)
    except KeyboardInterrupt:
        interrupted = True
    _report(topic, sent, no_key, deliveries, quiet, key_separator)
    if interrupted:
        raise typer.Exit(130)
    if deliveries.failed or deliveries.delivered < sent:
        raise typer.Exit(1)


def _check_topic(cluster: Cluster, producer: Producer, topic: str, partition: int | None) -> None:
    """The topic must exist (unless the client may create it) and have the partition asked for."""
    md = cluster.metadata(producer)
    auto_create = cluster.properties.get("allow.auto.create.topics", "").lower() == "true"
    if topic not in md.topics and not auto_create:
        fail(f"topic '{topic}' does not exist")
    if partition is not None and topic in md.topics:
        count = len(md.topics[topic].partitions)
        if partition >= count:
            fail(f"topic '{topic}' has no partition {partition} (it has {count})")


def _open_input(file: Path | None, quiet: bool) -> tuple[BinaryIO, bool]:
    """The lines' stream, and whether it is ours to close (a file, not stdin or `-`)."""
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
    return stream, own_stream


@dataclass(frozen=True)
class _RecordShape:
    """How a line becomes a record: its key (the line split at the separator), its headers
    and its partition."""

    separator: bytes | None
    headers: list[tuple[str, bytes]]
    partition: int | None

    def record(self, line: bytes) -> dict[str, object]:
        """The producer's arguments for the line: without a key if the separator is not in it."""
        send: dict[str, object] = {"value": line}
        if self.separator is not None:
            key, found, value = line.partition(self.separator)
            if found:
                send["key"], send["value"] = key, value
        if self.headers:
            send["headers"] = self.headers
        if self.partition is not None:
            send["partition"] = self.partition
        return send


def _send_lines(
    producer: Producer,
    topic: str,
    stream: BinaryIO,
    own_stream: bool,
    shape: _RecordShape,
    deliveries: _Deliveries,
) -> tuple[int, int, bool]:
    """Send each line as a record until the stream ends or Ctrl-C: how many were sent, how
    many of them had no key, and whether it was interrupted."""
    sent = no_key = 0
    interrupted = False
    try:
        for line in _lines(stream):
            send = shape.record(line)
            if shape.separator is not None and "key" not in send:
                no_key += 1
            send["on_delivery"] = deliveries
            _send(producer, topic, send)
            sent += 1
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if own_stream:
            stream.close()
    return sent, no_key, interrupted


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
