"""Damaged files in the data directory: the broker starts anyway, says which file it found
damaged, keeps every record before the damage, and appends after it at contiguous offsets.

Each test stops a broker, damages its files, and starts it again.  "crash" variants also
remove the clean-shutdown marker, as a SIGKILL or power cut would have left the directory.
"""

from __future__ import annotations

import json
import logging
import random
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from kafka_support import (
    NONE,
    assert_contiguous,
    consume,
    consumer,
    create_topic,
    log_end,
    log_start,
    partition_count,
    produce,
    topic_error,
    wait_until,
)

from samsa.testing import InProcessBroker

TOPIC = "damaged"
MULTI = "spread"
COUNT = 236  # batches of 4: the last segment holds 3 of them, with index entries
BASE_TS = 1_700_000_000_000
VALUES = [f"rec-{i:04d}-".encode() + b"p" * 40 for i in range(COUNT)]
MULTI_VALUES = {p: [f"m{p}-{i}".encode() for i in range(30)] for p in range(3)}
CLEAN_MARKER = ".kafka_cleanshutdown"


@dataclass
class Damaged:
    broker: InProcessBroker
    data_dir: Path
    part_dir: Path
    caplog: pytest.LogCaptureFixture
    clean: bool

    def segments(self) -> list[Path]:
        return sorted(self.part_dir.glob("*.log"))

    def restart(self) -> None:
        self.caplog.clear()
        with self.caplog.at_level(logging.INFO):
            self.broker.start()

    def warnings_naming(self, *paths: Path) -> list[str]:
        names = [n for p in paths for n in (str(p), f"{p.parent.name}/{p.name}")]
        return [
            r.getMessage()
            for r in self.caplog.records
            if r.levelno >= logging.WARNING and any(n in r.getMessage() for n in names)
        ]

    def assert_warned(self, *paths: Path) -> None:
        """A warning (or worse) names one of `paths`."""
        found = self.warnings_naming(*paths)
        logged = [f"{r.levelname} {r.getMessage()}" for r in self.caplog.records]
        assert found, f"no warning names {paths}; the broker logged: {logged}"

    def assert_no_traceback(self) -> None:
        tracebacks = [r.getMessage() for r in self.caplog.records if r.exc_info]
        assert not tracebacks, f"the broker logged exceptions while starting: {tracebacks}"


def _batches(path: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of each complete batch in a .log file, read by hand."""
    data = path.read_bytes()
    out = []
    pos = 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            break
        out.append((pos, 12 + length, base))
        pos += 12 + length
    return out


@pytest.fixture(params=["clean", "crash"])
def damaged(
    request: pytest.FixtureRequest,
    start_broker: Callable[..., InProcessBroker],
    caplog: pytest.LogCaptureFixture,
) -> Iterator[Damaged]:
    """A stopped broker whose topic holds VALUES in several small segments with indexes."""
    broker = start_broker()
    create_topic(
        broker.bootstrap_servers,
        TOPIC,
        config={"segment.bytes": "2048", "index.interval.bytes": "128"},
    )
    create_topic(broker.bootstrap_servers, MULTI, partitions=3)
    produce(
        broker.bootstrap_servers,
        TOPIC,
        VALUES,
        timestamps=[BASE_TS + 1000 * i for i in range(COUNT)],
        batch_of=4,
    )
    for p, values in MULTI_VALUES.items():
        produce(broker.bootstrap_servers, MULTI, values, partition=p)
    broker.stop()
    data_dir = Path(broker.data_dir)
    if request.param == "crash":
        (data_dir / CLEAN_MARKER).unlink()
    state = Damaged(broker, data_dir, data_dir / f"{TOPIC}-0", caplog, request.param == "clean")
    segments = state.segments()
    assert len(segments) >= 4, "the topic should span several segments"
    assert segments[-1].stat().st_size >= 512, "the active segment should hold index entries"
    yield state


def _read_at(bootstrap: str, offsets: list[int]) -> dict[int, bytes | None]:
    """The record a consumer assigned at each offset gets first (its index lookups)."""
    c = consumer(bootstrap)
    got: dict[int, bytes | None] = {}
    try:
        for offset in offsets:
            c.assign([TopicPartition(TOPIC, 0, offset)])

            def first(o: int = offset) -> bool:
                for m in c.consume(1, 0.5):
                    assert m.error() is None, m.error()
                    assert m.offset() == o, f"assigned at {o}, got {m.offset()} first"
                    got[o] = m.value()
                    return True
                return False

            wait_until(first, 20, what=f"the record at {offset}")
    finally:
        c.close()
    return got


def _offsets_for_times(bootstrap: str, timestamps: list[int]) -> list[int]:
    """ListOffsets by timestamp (the time index), one lookup per request."""
    c = consumer(bootstrap)
    try:
        return [
            c.offsets_for_times([TopicPartition(TOPIC, 0, ts)], 10)[0].offset for ts in timestamps
        ]
    finally:
        c.close()


def _check_survivors(state: Damaged, survivors: int) -> None:
    """Records 0..survivors-1 are all there, reachable by offset and by timestamp, and new
    records follow them at contiguous offsets."""
    broker = state.broker
    assert log_start(broker.port, TOPIC) == 0
    assert log_end(broker.port, TOPIC) == survivors
    records = consume(broker.bootstrap_servers, TOPIC)
    assert_contiguous(records)
    assert [r.value for r in records] == VALUES[:survivors]
    assert [r.timestamp for r in records] == [BASE_TS + 1000 * i for i in range(survivors)]
    probes = sorted({0, 1, survivors // 3, survivors // 2, 2 * survivors // 3, survivors - 1})
    assert _read_at(broker.bootstrap_servers, probes) == {o: VALUES[o] for o in probes}
    probe_ts = [BASE_TS + 1000 * o - 500 for o in probes]
    assert _offsets_for_times(broker.bootstrap_servers, probe_ts) == probes
    fresh = [f"fresh-{i}".encode() for i in range(5)]
    delivered = produce(broker.bootstrap_servers, TOPIC, fresh)
    assert [d.offset for d in delivered] == list(range(survivors, survivors + 5))
    records = consume(broker.bootstrap_servers, TOPIC)
    assert_contiguous(records)
    assert [r.value for r in records] == [*VALUES[:survivors], *fresh]
    # The other topic was not touched by any of this.
    for p, values in MULTI_VALUES.items():
        assert [r.value for r in consume(broker.bootstrap_servers, MULTI, p)] == values


# -- .log files ------------------------------------------------------------------------------


def test_last_segment_cut_inside_its_last_batch(damaged: Damaged) -> None:
    last = damaged.segments()[-1]
    pos, size, base = _batches(last)[-1]
    with open(last, "r+b") as f:
        f.truncate(pos + size // 2)
    damaged.restart()
    _check_survivors(damaged, base)
    damaged.assert_warned(last)
    damaged.assert_no_traceback()


def test_last_segment_cut_inside_a_batch_header(damaged: Damaged) -> None:
    last = damaged.segments()[-1]
    pos, _, base = _batches(last)[-1]
    with open(last, "r+b") as f:
        f.truncate(pos + 30)
    damaged.restart()
    _check_survivors(damaged, base)
    damaged.assert_warned(last)
    damaged.assert_no_traceback()


@pytest.mark.parametrize(
    "garbage",
    [
        random.Random(1).randbytes(100),
        b"\x00" * 64,
        # Looks like a batch header with a huge length.
        struct.pack(">qi", COUNT, 50_000) + b"\x00" * 49,
    ],
    ids=["random", "zeros", "fake-header"],
)
def test_garbage_appended_to_the_last_segment(damaged: Damaged, garbage: bytes) -> None:
    last = damaged.segments()[-1]
    with open(last, "ab") as f:
        f.write(garbage)
    damaged.restart()
    _check_survivors(damaged, COUNT)
    damaged.assert_warned(last)
    damaged.assert_no_traceback()


# After a clean shutdown Kafka trusts its segments and does not check them: these damages
# are found only by a crash's recovery, so they are made only after a crash.
AFTER_A_CRASH = pytest.mark.parametrize("damaged", ["crash"], indirect=True)


@AFTER_A_CRASH
def test_bit_flip_in_the_last_batch_is_cut_off_after_a_crash(damaged: Damaged) -> None:
    """A batch whose CRC fails is not served: recovery truncates the log before it."""
    last = damaged.segments()[-1]
    pos, size, base = _batches(last)[-1]
    data = bytearray(last.read_bytes())
    data[pos + size - 3] ^= 0x55
    last.write_bytes(bytes(data))
    damaged.restart()
    _check_survivors(damaged, base)
    damaged.assert_warned(last)
    damaged.assert_no_traceback()


@AFTER_A_CRASH
@pytest.mark.parametrize("damage", ["cut", "bit-flip", "zeroed-tail"])
def test_damage_inside_an_older_segment_with_full_recovery(damaged: Damaged, damage: str) -> None:
    """A crash with nothing flushed (no recovery point): every segment is checked, so damage
    in the second segment is found there.  As in Kafka, the log is cut at the first bad batch
    and the segments after it go; everything before it stays."""
    (damaged.data_dir / "recovery-point-offset-checkpoint").unlink()
    second = damaged.segments()[1]
    batches = _batches(second)
    pos, size, base = batches[len(batches) // 2]
    data = bytearray(second.read_bytes())
    if damage == "cut":
        data = data[: pos + size // 2]
    elif damage == "bit-flip":
        data[pos + size - 5] ^= 0x10
    else:  # a torn write: the tail of the file reads back as zeros
        data[pos:] = bytes(len(data) - pos)
    second.write_bytes(bytes(data))
    damaged.restart()
    _check_survivors(damaged, base)
    damaged.assert_warned(second)
    damaged.assert_no_traceback()


# -- indexes ---------------------------------------------------------------------------------


def _index(damaged: Damaged, which: int, suffix: str) -> Path:
    return damaged.segments()[which].with_suffix(suffix)


INDEX_DAMAGE: dict[str, Callable[[Path], None]] = {
    # 13 bytes: not a whole number of 8-byte entries, whatever the file held.
    "truncated-odd": lambda p: p.write_bytes((p.read_bytes() + bytes(13))[:13]),
    "garbage": lambda p: p.write_bytes(b"\xff" * 48),
    "out-of-order": lambda p: p.write_bytes(
        b"".join(struct.pack(">ii", rel, pos) for rel, pos in [(40, 900), (3, 100), (1, 10)])
    ),
    "deleted": lambda p: p.unlink(),
}

TIME_INDEX_DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated-odd": lambda p: p.write_bytes((p.read_bytes() + bytes(7))[:7]),
    "garbage": lambda p: p.write_bytes(b"\xff" * 48),
    "out-of-order": lambda p: p.write_bytes(
        b"".join(
            struct.pack(">qi", ts, rel)
            for ts, rel in [(BASE_TS + 90_000, 40), (BASE_TS, 3), (BASE_TS - 9, 1)]
        )
    ),
    "deleted": lambda p: p.unlink(),
}


def _index_damage_is_reported(damaged: Damaged, damage: str, which: int) -> bool:
    """Whether Kafka would log this damage at start (its LogLoader sanity-checks every
    segment's indexes: a size that is not a whole number of entries, or a last entry outside
    the segment, is reported; a missing index only below the recovery point).  Entries out of
    order behind a plausible last entry pass that check, in Kafka too: for those only the
    records served count."""
    if damage in ("truncated-odd", "garbage"):
        return True
    if damage == "deleted":
        return damaged.clean or which == 0
    return False


@pytest.mark.parametrize("which", [0, -1], ids=["first-segment", "active-segment"])
@pytest.mark.parametrize("damage", sorted(INDEX_DAMAGE))
def test_damaged_offset_index_is_rebuilt(damaged: Damaged, damage: str, which: int) -> None:
    path = _index(damaged, which, ".index")
    INDEX_DAMAGE[damage](path)
    damaged.restart()
    _check_survivors(damaged, COUNT)
    if _index_damage_is_reported(damaged, damage, which):
        damaged.assert_warned(path, path.with_suffix(".log"))
    damaged.assert_no_traceback()


@pytest.mark.parametrize("which", [0, -1], ids=["first-segment", "active-segment"])
@pytest.mark.parametrize("damage", sorted(TIME_INDEX_DAMAGE))
def test_damaged_time_index_is_rebuilt(damaged: Damaged, damage: str, which: int) -> None:
    path = _index(damaged, which, ".timeindex")
    TIME_INDEX_DAMAGE[damage](path)
    damaged.restart()
    _check_survivors(damaged, COUNT)
    if _index_damage_is_reported(damaged, damage, which):
        damaged.assert_warned(path, path.with_suffix(".log"))
    damaged.assert_no_traceback()


# -- checkpoints -----------------------------------------------------------------------------


def test_missing_recovery_point_checkpoint(damaged: Damaged) -> None:
    path = damaged.data_dir / "recovery-point-offset-checkpoint"
    path.unlink()
    damaged.restart()
    _check_survivors(damaged, COUNT)
    damaged.assert_warned(path)
    damaged.assert_no_traceback()


CHECKPOINT_GARBAGE = {
    "binary": random.Random(5).randbytes(64),
    "wrong-version": b"7\n1\ndamaged 0 200\n",
    "not-a-number": b"0\n1\ndamaged 0 lots\n",
    "empty": b"",
}


@pytest.mark.parametrize(
    "name",
    ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "leader-epoch-checkpoint"],
)
@pytest.mark.parametrize("garbage", sorted(CHECKPOINT_GARBAGE))
def test_garbage_checkpoint_file(damaged: Damaged, name: str, garbage: str) -> None:
    directory = damaged.part_dir if name == "leader-epoch-checkpoint" else damaged.data_dir
    path = directory / name
    assert path.exists()
    path.write_bytes(CHECKPOINT_GARBAGE[garbage])
    damaged.restart()
    _check_survivors(damaged, COUNT)
    damaged.assert_warned(path)
    damaged.assert_no_traceback()


# -- the standalone metadata file ------------------------------------------------------------


METADATA_DAMAGE: dict[str, Callable[[Path], None]] = {
    "not-json": lambda p: p.write_text("{ this is not json"),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "empty": lambda p: p.write_bytes(b""),
    "wrong-shape": lambda p: p.write_text(json.dumps({"version": 1, "topics": 5})),
    "deleted": lambda p: p.unlink(),
}


@pytest.mark.parametrize("damage", sorted(METADATA_DAMAGE))
def test_corrupt_metadata_file_recovers_topics_from_the_logs(damaged: Damaged, damage: str) -> None:
    path = damaged.data_dir / "samsa-metadata.json"
    METADATA_DAMAGE[damage](path)
    damaged.restart()
    port = damaged.broker.port
    assert topic_error(port, TOPIC) == NONE, "the topic on disk was forgotten"
    assert partition_count(port, TOPIC) == 1
    assert partition_count(port, MULTI) == 3
    _check_survivors(damaged, COUNT)
    if damage != "deleted":
        damaged.assert_warned(path)
    damaged.assert_no_traceback()
    # What the broker recovered is written back: the next start needs no recovery of it.
    damaged.broker.stop()
    damaged.restart()
    assert damaged.warnings_naming(path) == []
    assert partition_count(port, MULTI) == 3
    assert log_end(port, TOPIC) == COUNT + 5
