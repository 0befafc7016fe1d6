"""Record batches as a producer or a leader sends them: the produce path's validation
(lengths, magic, CRC, counts), then what the broker may read inside a valid batch (a leader's
record checks, which decompress with cramjam and parse each record: a compacted topic's keys,
and a topic codec's recompression, whose batches must be valid in turn; the transaction marker
reader; the full record decoder).  Each must accept the bytes or raise the broker's own record
errors (CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE).

The first byte of an input holds flags: whether the batches come from a client (one record
per offset), and whether to give each batch a correct CRC before validating, so that mutations
reach the decompressors and the record parsers behind the CRC check.
"""

from __future__ import annotations

import atheris

with atheris.instrument_imports(include=["samsa.protocol"]):
    from samsa.protocol.control import read_end_txn_marker
    from samsa.protocol.record_batch import (
        ATTRIBUTES_OFFSET,
        CRC_OFFSET,
        CorruptRecordError,
        RecordTooLargeError,
        decode_records,
        scan_batches,
        validate_batches,
    )
    from samsa.protocol.record_conversion import convert_batch  # noqa: F401 (instrumented)
    from samsa.protocol.record_filter import batch_body, parse_records

import contextlib
import struct

import crc32c

from fuzz.harness import main

# A leader's record checks: imported after the block, they run over the protocol modules it
# instrumented (atheris fails on some of samsa.log's modules).
from samsa.config.topic import LogConfig
from samsa.log.record_validation import RecordValidationError, validate_records

TARGET = "records"
FROM_CLIENT = 0x01
FIX_CRC = 0x02
MAX_BATCH = 1_000_000
# A compacted topic that also recompresses: both record checks of a leader's append.
TOPIC = LogConfig(cleanup_policy=("compact",), compression_type="zstd", max_message_bytes=1 << 30)
_CRC = struct.Struct(">I")
# The broker's clock: a batch whose max timestamp is over an hour past it has its records read
# and each one ahead named (most inputs: their timestamps are random).
NOW_MS = 1_700_000_000_000


def fix_crcs(buf: bytearray) -> None:
    for pos, h in scan_batches(buf):
        _CRC.pack_into(
            buf, pos + CRC_OFFSET, crc32c.crc32c(buf[pos + ATTRIBUTES_OFFSET : pos + h.size])
        )


def one_input(data: bytes) -> None:
    if not data:
        return
    flags, buf = data[0], bytearray(data[1:])
    if flags & FIX_CRC:
        fix_crcs(buf)
    from_client = bool(flags & FROM_CLIENT)
    try:
        headers = validate_batches(buf, MAX_BATCH, from_client=from_client)
    except (CorruptRecordError, RecordTooLargeError):
        return
    assert sum(h.size for h in headers) == len(buf)
    for config in (TOPIC, LogConfig(compression_type="gzip", max_message_bytes=1 << 30)):
        try:
            stored, _ = validate_records("t-0", bytes(buf), headers, config, NOW_MS)
        except (CorruptRecordError, RecordValidationError):
            continue
        # What a leader stores is valid in turn.
        validate_batches(stored, 1 << 30, from_client=from_client)
    view = memoryview(buf)
    for (pos, _), h in zip(scan_batches(view), headers, strict=True):
        try:
            if h.is_control:
                read_end_txn_marker(view, pos, h)
            else:
                parse_records(batch_body(view[pos : pos + h.size], h), h.records_count)
        except CorruptRecordError:
            pass
    with contextlib.suppress(CorruptRecordError):
        decode_records(buf)


if __name__ == "__main__":
    main(TARGET, one_input)
