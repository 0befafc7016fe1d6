"""Log recovery from arbitrary bytes: a real partition directory (two segments with their
offset, time and transaction indexes, a producer snapshot and a leader-epoch checkpoint) with
one of its files replaced by the fuzzed bytes, opened as the broker opens it after a crash or
a clean shutdown.  Opening must truncate what does not hold together and go on, never fail;
the log it leaves must read back from its start to its end and take a new append.

An input is: one byte choosing the file (and, in its high bit, a clean shutdown), then the
file's new content.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["samsa.protocol"]):
    from samsa.protocol.record_batch import build_batch, decode_records

from fuzz.harness import instrument_modules, main, scratch_dir
from samsa.config.topic import LogConfig
from samsa.log import Log
from samsa.log.producer_state import AppendOrigin
from samsa.protocol.control import build_end_txn_marker

# atheris's import hook cannot rewrite samsa.log.log: the recovery path is instrumented
# function by function instead.
instrument_modules(
    "samsa.log.loader",
    "samsa.log.segment",
    "samsa.log.segment_recovery",
    "samsa.log.file_records",
    "samsa.log.index",
    "samsa.log.txn_index",
    "samsa.log.producer_snapshot",
    "samsa.log.producer_state_manager",
    "samsa.log.checkpoint",
    "samsa.log.epoch",
    "samsa.log.swap",
)

TARGET = "recovery"
# Recovery warns about every file it truncates or rebuilds: millions of lines, none news.
logging.disable(logging.WARNING)
PARTITION = "t-0"
CONFIG = LogConfig(
    segment_bytes=1200, index_interval_bytes=100, segment_index_bytes=4096, retention_ms=-1
)
CLEAN = 0x80
NOW_MS = 1_700_000_000_000


def _build(dir: Path) -> dict[str, bytes]:
    """A partition as a crashed broker leaves it: every file's bytes, by name."""
    plog = Log.open(dir, CONFIG, now_ms=lambda: NOW_MS)
    for i in range(12):
        records = [(b"k%d" % i, b"v" * (10 + i), [("h", b"x")])] * 3
        batch = build_batch(
            records, timestamp_ms=NOW_MS + i, producer_id=5, producer_epoch=0, base_sequence=i * 3
        )
        plog.append_as_leader(batch, leader_epoch=i // 4)
    txn = build_batch(
        [(b"t", b"in a transaction", [])],
        producer_id=6,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
        timestamp_ms=NOW_MS,
    )
    plog.append_as_leader(txn, leader_epoch=3)
    plog.append_as_leader(
        build_end_txn_marker(6, 0, False, 1, NOW_MS), 3, origin=AppendOrigin.COORDINATOR
    )
    plog.roll()
    plog.flush()
    plog.producer_state.take_snapshot()
    plog.close()
    return {p.name: p.read_bytes() for p in sorted(dir.iterdir()) if p.is_file()}


_BUILT = scratch_dir("samsa-fuzz-recovery-")
BASE = _build(_BUILT / PARTITION)
BASE_FILES = sorted(BASE)
shutil.rmtree(_BUILT)
_WORK = scratch_dir("samsa-fuzz-recovery-")


def seed_input(index: int, clean: bool) -> bytes:
    return bytes([index | (CLEAN if clean else 0)]) + BASE[BASE_FILES[index]]


def _read_back(plog: Log) -> None:
    """Every batch from the log start to the end, where a segment emptied by recovery is
    passed over as Kafka's reads pass over it."""
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        stored = plog.read(offset, 1 << 20).records
        assert isinstance(stored, bytes)  # a FileRegion only for a zero-copy read
        records = decode_records(stored)
        if records:
            offset = records[-1].offset + 1
            continue
        later = [s.base_offset for s in plog.segments if s.base_offset > offset]
        assert later, f"nothing readable from {offset} below {plog.log_end_offset}"
        offset = later[0]


def one_input(data: bytes) -> None:
    if not data:
        return
    name = BASE_FILES[(data[0] & ~CLEAN) % len(BASE_FILES)]
    dir = _WORK / PARTITION
    shutil.rmtree(dir, ignore_errors=True)
    dir.mkdir()
    for file, content in BASE.items():
        (dir / file).write_bytes(data[1:] if file == name else content)
    clean = bool(data[0] & CLEAN)
    plog = Log.open(dir, CONFIG, now_ms=lambda: NOW_MS, clean_shutdown=clean)
    try:
        assert plog.log_start_offset <= plog.log_end_offset
        end = plog.log_end_offset
        appended = plog.append_as_leader(build_batch([(b"k", b"after", [])]), leader_epoch=9)
        assert appended.first_offset == end
        # After a clean shutdown the segments are trusted without being read, as Kafka trusts
        # them: a file damaged since is not looked for, so only a recovery must read back.
        if not clean:
            _read_back(plog)
    finally:
        plog.close()


if __name__ == "__main__":
    main(TARGET, one_input)
