"""`samsa consume`: print a topic's records, from a chosen position, in a chosen format."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, BinaryIO

import typer
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_STORED,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from samsa.cli.errors import fail, warn
from samsa.cli.kafka import (
    DEFAULT_BOOTSTRAP,
    REQUEST_TIMEOUT,
    Bootstrap,
    Cluster,
    Properties,
    describe,
)

OFFSET_TAIL_BASE = -2000  # librdkafka's RD_KAFKA_OFFSET_TAIL(n) is this minus n
DEFAULT_FORMAT = "%s\\n"
POLL_INTERVAL = 0.2  # seconds: how quickly Ctrl-C, --timeout and --end are noticed

# Errors after which waiting longer cannot help.
_FATAL_CODES = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.INVALID_GROUP_ID,
}

_DURATION = re.compile(r"^-(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def register(app: typer.Typer) -> None:
    app.command("consume")(consume)


def parse_timestamp(text: str, now: float | None = None) -> int:
    """Milliseconds since the epoch from ms, ISO 8601 (naive means local time) or -15m style."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    rel = _DURATION.match(text)
    if rel:
        seconds = float(rel.group(1)) * _UNITS[rel.group(2)]
        return int(((time.time() if now is None else now) - seconds) * 1000)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            "expected ISO 8601 (2024-05-01T12:00:00Z), milliseconds since the epoch, "
            "or a time ago like -15m, -2h, -1d",
            param_hint="--from-timestamp",
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()
    return int(parsed.timestamp() * 1000)


# --- formatting -------------------------------------------------------------------------

Field = Callable[[Message], bytes]
_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", "0": b"\0"}


def _header_pairs(msg: Message) -> list[tuple[str, bytes | None]]:
    headers = msg.headers() or []
    pairs = headers.items() if isinstance(headers, dict) else headers
    return [(k, v.encode() if isinstance(v, str) else v) for k, v in pairs]


def _headers_text(msg: Message) -> bytes:
    parts = []
    for key, value in _header_pairs(msg):
        parts.append(key.encode() if value is None else key.encode() + b"=" + value)
    return b",".join(parts)


def _timestamp(msg: Message) -> int:
    kind, ts = msg.timestamp()
    return -1 if kind == TIMESTAMP_NOT_AVAILABLE else int(ts)


_FIELDS: dict[str, Field] = {
    "t": lambda m: (m.topic() or "").encode(),
    "p": lambda m: str(m.partition()).encode(),
    "o": lambda m: str(m.offset()).encode(),
    "k": lambda m: m.key() or b"",
    "s": lambda m: m.value() or b"",
    "K": lambda m: str(len(m.key() or b"")).encode(),
    "S": lambda m: str(len(m.value() or b"")).encode(),
    "T": lambda m: str(_timestamp(m)).encode(),
    "h": _headers_text,
}


def compile_format(fmt: str) -> Callable[[Message], bytes]:
    """kcat-style -f: %t %p %o %k %s %K %S %T %h %% and \\n \\t \\r \\\\ escapes."""
    pieces: list[bytes | Field] = []
    literal = bytearray()
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        nxt = fmt[i + 1] if i + 1 < len(fmt) else ""
        if ch == "%":
            if nxt == "%":
                literal += b"%"
            elif nxt in _FIELDS:
                if literal:
                    pieces.append(bytes(literal))
                    literal.clear()
                pieces.append(_FIELDS[nxt])
            else:
                raise typer.BadParameter(
                    f"unknown field %{nxt} (known: %t %p %o %k %s %K %S %T %h %%)",
                    param_hint="--format",
                )
            i += 2
        elif ch == "\\" and nxt in _ESCAPES:
            literal += _ESCAPES[nxt]
            i += 2
        else:
            literal += ch.encode()
            i += 1
    if b"\n" not in literal and not any(isinstance(p, bytes) and b"\n" in p for p in pieces):
        # One record per line unless the format says otherwise.
        literal += b"\n"
    if literal:
        pieces.append(bytes(literal))

    def render(msg: Message) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(msg) for p in pieces)

    return render


def _text(data: bytes | str | None) -> str | None:
    if data is None:
        return None
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


def render_json(msg: Message) -> bytes:
    kind, ts = msg.timestamp()
    record: dict[str, Any] = {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": None if kind == TIMESTAMP_NOT_AVAILABLE else ts,
        "timestamp_type": "log_append" if kind == TIMESTAMP_LOG_APPEND_TIME else "create",
        "key": _text(msg.key()),
        "value": _text(msg.value()),
        # Pairs, not an object: Kafka allows a header key more than once.
        "headers": [[k, _text(v)] for k, v in _header_pairs(msg)],
    }
    if kind == TIMESTAMP_NOT_AVAILABLE:
        record["timestamp_type"] = None
    return json.dumps(record, ensure_ascii=False).encode() + b"\n"


# --- positions --------------------------------------------------------------------------


def _start_positions(
    cluster: Cluster,
    consumer: Consumer,
    topic: str,
    partitions: list[int],
    from_beginning: bool,
    offset: int | None,
    from_ms: int | None,
    group: str | None,
) -> list[TopicPartition]:
    if from_ms is not None:
        wanted = [TopicPartition(topic, p, from_ms) for p in partitions]
        try:
            found = consumer.offsets_for_times(wanted, timeout=REQUEST_TIMEOUT)
        except KafkaException as exc:
            cluster.fail_with(exc, "look up offsets by timestamp", topic=topic)
        for tp in found:
            if tp.error is not None:
                cluster.fail_with(tp.error, "look up offsets by timestamp", topic=topic)
        # No record at or after the time: librdkafka answers -1, which assign reads as the end.
        return found
    if offset is not None:
        start = offset if offset >= 0 else OFFSET_TAIL_BASE + offset
        return [TopicPartition(topic, p, start) for p in partitions]
    if from_beginning:
        return [TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions]
    # A group resumes where it left off; a one-off reader shows what arrives from now on.
    return [TopicPartition(topic, p, OFFSET_STORED if group else OFFSET_END) for p in partitions]


# --- the loop ---------------------------------------------------------------------------


def _silence_broken_pipe(out: BinaryIO) -> None:
    # The reader went away (| head): point stdout at /dev/null so exit does not complain.
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, out.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


def consume(
    topic: Annotated[str, typer.Argument(help="The topic to read.")],
    from_beginning: Annotated[
        bool, typer.Option("--from-beginning", help="Start at the oldest record.")
    ] = False,
    offset: Annotated[
        int | None,
        typer.Option(
            "--offset",
            metavar="N",
            help="Start at offset N of each partition; negative: the last -N records.",
        ),
    ] = None,
    from_timestamp: Annotated[
        str | None,
        typer.Option(
            "--from-timestamp",
            metavar="TIME",
            help="Start at the first record at or after TIME: ISO 8601, epoch ms, or -15m.",
        ),
    ] = None,
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", min=0, help="Read only this partition.")
    ] = None,
    count: Annotated[
        int | None, typer.Option("--count", "-c", min=1, help="Stop after N records.")
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(
            "--group", "-g", help="Consume as this group, committing offsets (default: none)."
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT",
            help="'json', or a kcat-style format: %t topic, %p partition, %o offset, %k key, "
            "%s value, %T timestamp (ms), %h headers, %K/%S key/value size.",
        ),
    ] = DEFAULT_FORMAT,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout", min=0.0, metavar="SECONDS", help="Stop after this long with no record."
        ),
    ] = None,
    end: Annotated[
        bool, typer.Option("--end", "-e", help="Stop at the end of every partition.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")] = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    properties: Properties = None,
) -> None:
    """Print records as they arrive, until Ctrl-C, --count, --timeout or --end.

    Without --group, partitions are assigned directly and nothing is committed; the default
    start is the end of each partition (new records only).
    """
    starts = [from_beginning, offset is not None, from_timestamp is not None]
    if sum(starts) > 1:
        raise typer.BadParameter(
            "choose one of --from-beginning, --offset, --from-timestamp", param_hint="options"
        )
    from_ms = parse_timestamp(from_timestamp) if from_timestamp is not None else None
    render = render_json if fmt == "json" else compile_format(fmt)

    cluster = Cluster(bootstrap, properties)
    consumer = cluster.consumer(
        **{
            # librdkafka needs a group id even to assign; a throwaway one commits nothing.
            "group.id": group or f"samsa-cli-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": group is not None,
            "auto.offset.reset": "earliest" if from_beginning else "latest",
            "enable.partition.eof": True,
        }
    )
    reader = _Reader(cluster, consumer, topic, render)
    try:
        reader.start(partition, group, from_beginning, offset, from_ms)
        reader.run(count, timeout, end)
    except KeyboardInterrupt:
        reader.finish(quiet)
        raise typer.Exit(130) from None
    reader.finish(quiet)


class _Reader:
    """One consumer on one topic: where it starts, what it prints, and when it stops."""

    def __init__(
        self, cluster: Cluster, consumer: Consumer, topic: str, render: Callable[[Message], bytes]
    ) -> None:
        self.cluster = cluster
        self.consumer = consumer
        self.topic = topic
        self.render = render
        self.out: BinaryIO = sys.stdout.buffer
        self.seen = 0

    def start(
        self,
        partition: int | None,
        group: str | None,
        from_beginning: bool,
        offset: int | None,
        from_ms: int | None,
    ) -> None:
        topic = self.topic
        md = self.cluster.metadata(self.consumer)
        if topic not in md.topics:
            fail(f"topic '{topic}' does not exist")
        all_partitions = sorted(md.topics[topic].partitions)
        if partition is not None and partition not in all_partitions:
            fail(f"topic '{topic}' has no partition {partition} (it has {len(all_partitions)})")
        partitions = [partition] if partition is not None else all_partitions
        explicit = offset is not None or from_ms is not None or partition is not None
        if group and not explicit:
            self.consumer.subscribe([topic])
            return
        self.consumer.assign(
            _start_positions(
                self.cluster,
                self.consumer,
                topic,
                partitions,
                from_beginning,
                offset,
                from_ms,
                group,
            )
        )

    def run(self, count: int | None, timeout: float | None, end: bool) -> None:
        interactive = self.out.isatty()
        at_end: set[int] = set()
        warned: set[int] = set()
        last_activity = time.monotonic()
        try:
            while count is None or self.seen < count:
                msg = self.consumer.poll(POLL_INTERVAL)
                now = time.monotonic()
                if msg is None:
                    self.out.flush()
                    if timeout is not None and now - last_activity >= timeout:
                        break
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition() or 0)
                        if end and self._all_at_end(at_end):
                            break
                        continue
                    if err.fatal() or err.code() in _FATAL_CODES:
                        self.cluster.fail_with(err, f"consume from '{self.topic}'", self.topic)
                    if err.code() not in warned:
                        warned.add(err.code())
                        warn(f"{describe(err)}; still trying")
                    continue
                at_end.discard(msg.partition() or 0)
                last_activity = now
                self.out.write(self.render(msg))
                self.seen += 1
                if interactive:
                    self.out.flush()
            self.out.flush()
        except BrokenPipeError:
            _silence_broken_pipe(self.out)

    def _all_at_end(self, at_end: set[int]) -> bool:
        assigned = {tp.partition for tp in self.consumer.assignment()}
        return bool(assigned) and assigned <= at_end

    def finish(self, quiet: bool) -> None:
        try:
            self.out.flush()
        except BrokenPipeError:
            _silence_broken_pipe(self.out)
        with contextlib.suppress(KafkaException, RuntimeError, KeyboardInterrupt):
            self.consumer.close()
        if not quiet:
            plural = "" if self.seen == 1 else "s"
            typer.echo(f"Consumed {self.seen} record{plural}.", err=True)
