"""A compressed records section is decompressed only up to a bound: a producer's zstd batch
of a few kilobytes can hold gigabytes of zeros, and the broker reads a compacted topic's
batches whole (the key check on produce, the cleaner).  Above the bound the batch is
CORRUPT_MESSAGE, refused before the memory is taken.

The bomb is decompressed in a child process whose address space is capped below its size,
so that a regression shows as that process failing, not as the machine swapping."""

from __future__ import annotations

import subprocess
import sys

import pytest

from samsa.config.topic import LogConfig
from samsa.log.record_validation import validate_records
from samsa.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    CorruptRecordError,
    _put_varint,
    assemble_batch,
    build_batch,
    compress,
    decode_records,
    decompress,
    validate_batches,
)

COMPACTED = LogConfig(cleanup_policy=("compact",))
CODECS = [COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]

_BOMB = """
import resource
from samsa.protocol.record_batch import COMPRESSION_ZSTD, CorruptRecordError, compress, decompress
from samsa.protocol.record_batch import assemble_batch, validate_batches
from samsa.config.topic import LogConfig
from samsa.log.record_validation import validate_records

# 64 MiB of zeros in one zstd frame of a few kilobytes; 40 frames: 2.5 GiB of records section.
section = compress(COMPRESSION_ZSTD, bytes(64 << 20)) * 40
batch = assemble_batch(
    base_offset=0, partition_leader_epoch=-1, attributes=COMPRESSION_ZSTD, last_offset_delta=0,
    base_timestamp=0, max_timestamp=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
    records_count=1, records=section,
)
print("batch bytes", len(batch))
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
headers = validate_batches(batch, 1_000_000)
try:
    # what a produce to a compacted topic runs
    validate_records("t-0", batch, headers, LogConfig(cleanup_policy=("compact",)), 0)
except CorruptRecordError as exc:
    print("refused:", exc)
"""


def test_a_zstd_bomb_sent_to_a_compacted_topic_is_refused_without_taking_the_memory() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _BOMB], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout and "more than" in done.stdout, done.stdout


@pytest.mark.parametrize("codec", CODECS)
def test_sections_up_to_the_bound_decompress_and_past_it_are_refused(codec: int) -> None:
    body = b"record " * 50_000  # 350 kB, compressing far better than 8:1
    packed = compress(codec, body)
    assert decompress(codec, packed) == body
    assert decompress(codec, packed, limit=len(body)) == body
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(codec, packed, limit=len(body) - 1)


def test_a_compacted_topics_key_check_still_reads_ordinary_batches() -> None:
    for codec in CODECS:
        batch = build_batch([(b"k", b"v" * 1000, [])] * 50, compression=codec)
        headers = validate_batches(batch, 1_000_000)
        assert validate_records("t-0", batch, headers, COMPACTED, 0)[0] is batch


def test_a_record_declaring_more_headers_than_it_holds_is_refused_at_the_count() -> None:
    """Found by fuzz/records.py (a hang: over ten seconds on one input): 113 bytes of zstd
    whose one record declares 2^20 headers in a megabyte of section, each read in a loop
    before the record's end was checked.  The count is refused as it is read."""
    records = bytearray()
    record = bytearray(b"\x00\x00\x00\x01")  # attributes, timestamp and offset deltas, null key
    record += b"\x01"  # null value
    record += b"\x80\x80\x80\x01"  # 2^20 headers (zigzag varint)
    record += b"\x01" * (1 << 20)  # a megabyte of null keys
    _put_varint(records, len(record))
    records += record
    batch = assemble_batch(
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=COMPRESSION_ZSTD,
        last_offset_delta=0,
        base_timestamp=0,
        max_timestamp=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=1,
        records=compress(COMPRESSION_ZSTD, bytes(records)),
    )
    assert len(batch) < 1000
    with pytest.raises(CorruptRecordError, match="declares 1048576 headers"):
        decode_records(batch)
