"""Kafka magic v2 record batches as bytes: headers, produce-path validation, in-place patching.

The broker stores and serves batches exactly as producers sent them, so the hot path only
ever reads the 61-byte batch header and patches fields in place.  `build_batch` and
`decode_records` encode and decode individual records; they are for tests, tools and the
rare ListOffsets lookup, never for produce or fetch.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import cramjam
import crc32c

# Field positions inside a batch (Kafka's DefaultRecordBatch).
BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
BATCH_HEADER_SIZE = 61

# baseOffset + batchLength: the bytes not counted by batchLength (Kafka's LOG_OVERHEAD).
LOG_OVERHEAD = 12
# A batchLength smaller than this cannot even hold the header.
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
MAGIC_V2 = 2

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
# KIP-534: set by the log cleaner on batches holding tombstones; baseTimestamp is then the
# time after which those tombstones may be removed (the delete horizon).
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == BATCH_HEADER_SIZE
_unpack_header = _HEADER.unpack_from
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_BATCH_LENGTH = struct.Struct(">i")
# Everything covered by the CRC that precedes the records: attributes .. recordsCount.
_POST_CRC = struct.Struct(">hiqqqhii")
_PRE_CRC = struct.Struct(">qiibI")


class CorruptRecordError(ValueError):
    """Bytes that are not a sequence of complete, valid v2 record batches (CORRUPT_MESSAGE)."""


class InvalidRecordError(CorruptRecordError):
    """Not exactly one whole v2 batch where a producer must send one (INVALID_RECORD, as
    Kafka's ProduceRequest.validateRecords): nothing, a truncated batch, or magic v0/v1."""


def _bad_magic(magic: int, pos: int) -> CorruptRecordError:
    error = InvalidRecordError if magic in (0, 1) else CorruptRecordError
    return error(
        f"unsupported record magic v{magic} at byte {pos} (only v2 record batches are accepted)"
    )


class RecordTooLargeError(ValueError):
    """A batch larger than the topic's max.message.bytes (MESSAGE_TOO_LARGE)."""


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of one v2 record batch, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


_new_header = tuple.__new__


def read_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos`; the caller guarantees 61 bytes are there."""
    return _new_header(BatchHeader, _unpack_header(buf, pos))


def validate_batches(
    buf: bytes | bytearray | memoryview, max_batch_size: int, *, from_client: bool = True
) -> list[BatchHeader]:
    """Check the records of one partition of a produce request; return each batch's header.

    Header-only checks plus one CRC-32C per batch: nothing here looks at individual records.
    `from_client` adds Kafka's rule that a producer's batch has one record per offset
    (replicated batches may have gaps left by compaction).
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(mv)
    if end == 0:
        raise InvalidRecordError("empty record set")
    headers: list[BatchHeader] = []
    append = headers.append
    pos = 0
    while pos < end:
        remaining = end - pos
        if remaining < BATCH_HEADER_SIZE:
            if remaining > MAGIC_OFFSET and mv[pos + MAGIC_OFFSET] != MAGIC_V2:
                raise _bad_magic(mv[pos + MAGIC_OFFSET], pos)
            raise InvalidRecordError(
                f"truncated record batch at byte {pos}: {remaining} bytes left, "
                f"a batch header needs {BATCH_HEADER_SIZE}"
            )
        h: BatchHeader = _new_header(BatchHeader, _unpack_header(mv, pos))
        if h.magic != MAGIC_V2:
            raise _bad_magic(h.magic, pos)
        if h.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {h.batch_length} at byte {pos} is too small")
        size = h.batch_length + LOG_OVERHEAD
        if size > remaining:
            raise InvalidRecordError(
                f"truncated record batch at byte {pos}: {size} bytes declared, {remaining} present"
            )
        if size > max_batch_size:
            raise RecordTooLargeError(
                f"record batch of {size} bytes exceeds the maximum of {max_batch_size}"
            )
        if crc32c.crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size]) != h.crc:
            raise CorruptRecordError(f"record batch at byte {pos} fails its CRC check")
        if h.records_count < 1 or h.last_offset_delta < 0:
            raise CorruptRecordError(
                f"record batch at byte {pos} has {h.records_count} records and "
                f"last offset delta {h.last_offset_delta}"
            )
        if from_client and h.records_count != h.last_offset_delta + 1:
            raise CorruptRecordError(
                f"record batch at byte {pos}: {h.records_count} records "
                f"but last offset delta {h.last_offset_delta}"
            )
        append(h)
        pos += size
    return headers


def scan_batches(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each complete batch, stopping at the first incomplete one.

    Only framing is checked (length and bounds); magic and CRC are the caller's business.
    """
    if end is None:
        end = len(buf)
    while end - pos >= BATCH_HEADER_SIZE:
        h: BatchHeader = _new_header(BatchHeader, _unpack_header(buf, pos))
        if h.batch_length < MIN_BATCH_LENGTH:
            return
        size = h.batch_length + LOG_OVERHEAD
        if pos + size > end:
            return
        yield pos, h
        pos += size


def batch_crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    """Whether the batch at `pos` matches its stored CRC-32C."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    return crc32c.crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + header.size]) == header.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign the batch's offsets; baseOffset is outside the CRC, so nothing else changes."""
    _I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch; partitionLeaderEpoch is outside the CRC."""
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with maxTimestamp = `timestamp_ms`, then redo the CRC.

    As in Kafka, only maxTimestamp changes: consumers take it as every record's timestamp
    when the timestamp type is LogAppendTime.
    """
    size = _BATCH_LENGTH.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0] + LOG_OVERHEAD
    attributes = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    _U32.pack_into(buf, pos + CRC_OFFSET, crc32c.crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size]))


# --- individual records: tests, tools, ListOffsets only ---------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with its absolute offset and effective timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


RecordInput = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]

# Kafka reads a compressed batch's records through a streaming decompressor, one at a time;
# the broker decompresses a whole records section (for a compacted topic's key check, the
# cleaner, transaction markers), so its size is bounded: 1 MB of zstd can hold 30 GB of
# zeros, and decompressing that at once exhausts the machine. No producer's batch comes near.
MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024
_FIRST_OUTPUT_GUESS = 64 * 1024

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _put_varint(out: bytearray, value: int) -> None:
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _put_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _put_varint(out, -1)
    else:
        _put_varint(out, len(data))
        out += data


def _get_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at `pos`: (value, position after it).  Most are one byte."""
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        result = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return (result >> 1) ^ -(result & 1), pos
            shift += 7
            if shift > 63:
                raise CorruptRecordError("varint longer than 10 bytes")
    except IndexError:
        raise CorruptRecordError("record truncated inside a varint") from None


def _get_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _get_varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > len(buf):
        raise CorruptRecordError("record field runs past the end of the batch")
    return buf[pos : pos + length], pos + length


# gzip level -1 is zlib's default (Java's Deflater.DEFAULT_COMPRESSION), which is 6.
_GZIP_DEFAULT_LEVEL = 6
# Kafka compresses lz4 at its default level 9 with lz4's fast compressor (lz4's level 0), at
# any other level with the high-compression one (Lz4BlockOutputStream).
_LZ4_KAFKA_DEFAULT_LEVEL = 9
_LZ4_FAST = 0


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """Compress a batch's records section the way Kafka's Java producer frames it, at the
    codec's KIP-390 `level` (Kafka's meaning of it) or, if None, the library's default."""
    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        if level == -1:
            level = _GZIP_DEFAULT_LEVEL
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == COMPRESSION_SNAPPY:
        # Java clients write xerial-framed snappy; every client reads it.
        out = bytearray(_XERIAL_HEADER)
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
            out += _I32.pack(len(block))
            out += block
        return bytes(out)
    if codec == COMPRESSION_LZ4:
        # Kafka's Java reader decompresses frame blocks one by one: blocks must be independent.
        compressor = cramjam.lz4.Compressor(
            level=_LZ4_FAST if level == _LZ4_KAFKA_DEFAULT_LEVEL else level,
            content_checksum=False,
            block_linked=False,
        )
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes, limit: int = MAX_DECOMPRESSED_SIZE) -> bytes:
    """Inverse of `compress`; snappy accepts both xerial framing and a raw block.

    A records section that would decompress to more than `limit` bytes is refused
    (CorruptRecordError) before that memory is taken.
    """
    if codec == COMPRESSION_NONE:
        return data
    try:
        if codec == COMPRESSION_GZIP:
            return _bounded(cramjam.gzip.decompress_into, data, limit)
        if codec == COMPRESSION_SNAPPY:
            if not data.startswith(_XERIAL_MAGIC):
                return _snappy_block(data, limit)
            out = bytearray()
            pos = len(_XERIAL_HEADER)
            while pos < len(data):
                (length,) = _I32.unpack_from(data, pos)
                pos += 4
                out += _snappy_block(data[pos : pos + length], limit - len(out))
                pos += length
            return bytes(out)
        if codec == COMPRESSION_LZ4:
            return _bounded(cramjam.lz4.decompress_into, data, limit)
        if codec == COMPRESSION_ZSTD:
            return _bounded(cramjam.zstd.decompress_into, data, limit)
    except (cramjam.DecompressionError, struct.error) as exc:
        raise CorruptRecordError(f"cannot decompress {COMPRESSION_NAMES[codec]}: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _too_large(limit: int) -> CorruptRecordError:
    return CorruptRecordError(f"a records section decompresses to more than {limit} bytes")


def _bounded(decompress_into: Callable[[bytes, bytearray], int], data: bytes, limit: int) -> bytes:
    """Decompress into a buffer that grows up to `limit` (cramjam refuses to overrun one)."""
    size = min(limit, max(_FIRST_OUTPUT_GUESS, len(data) * 8))
    while True:
        out = bytearray(size)
        try:
            written = decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if "whole buffer" not in str(exc):
                raise
            if size >= limit:
                raise _too_large(limit) from None
            size = min(limit, size * 4)
            continue
        del out[written:]
        return bytes(out)


def _snappy_block(block: bytes, limit: int) -> bytes:
    # A raw block states its decompressed length up front.
    if cramjam.snappy.decompress_raw_len(block) > limit:
        raise _too_large(limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def build_batch(
    records: Sequence[RecordInput],
    base_offset: int = 0,
    timestamp_ms: int = 0,
    *,
    timestamps: Sequence[int] | None = None,
    compression: int = COMPRESSION_NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    transactional: bool = False,
) -> bytes:
    """Encode one CreateTime v2 batch; `timestamps` gives each record its own timestamp."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    if timestamps is None:
        timestamps = [timestamp_ms] * len(records)
    elif len(timestamps) != len(records):
        raise ValueError("one timestamp per record")
    first_ts = timestamps[0]
    body = bytearray()
    record = bytearray()
    for delta, ((key, value, headers), ts) in enumerate(zip(records, timestamps, strict=True)):
        record.clear()
        record.append(0)
        _put_varint(record, ts - first_ts)
        _put_varint(record, delta)
        _put_bytes(record, key)
        _put_bytes(record, value)
        _put_varint(record, len(headers))
        for hkey, hvalue in headers:
            _put_bytes(record, hkey.encode())
            _put_bytes(record, hvalue)
        _put_varint(body, len(record))
        body += record
    return assemble_batch(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=compression | (TRANSACTIONAL_MASK if transactional else 0),
        last_offset_delta=len(records) - 1,
        base_timestamp=first_ts,
        max_timestamp=max(timestamps),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
        records=compress(compression, bytes(body)),
    )


def assemble_batch(
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
    records: bytes,
) -> bytes:
    """A v2 batch from its header fields and its (already compressed) records section."""
    post = (
        _POST_CRC.pack(
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count,
        )
        + records
    )
    crc = crc32c.crc32c(post)
    # batchLength also covers partitionLeaderEpoch, magic and crc: 9 bytes.
    return _PRE_CRC.pack(base_offset, len(post) + 9, partition_leader_epoch, MAGIC_V2, crc) + post


def decode_records(buf: bytes | bytearray | memoryview) -> list[Record]:
    """Decode every record of the concatenated batches in `buf` (CRC checked)."""
    data = bytes(buf)
    out: list[Record] = []
    for pos, h in scan_batches(data):
        if h.magic != MAGIC_V2:
            raise CorruptRecordError(f"unsupported record magic v{h.magic}")
        if not batch_crc_ok(data, pos, h):
            raise CorruptRecordError(f"record batch at byte {pos} fails its CRC check")
        body = decompress(h.compression, data[pos + BATCH_HEADER_SIZE : pos + h.size])
        log_append = h.timestamp_type == LOG_APPEND_TIME
        rpos = 0
        for _ in range(h.records_count):
            length, rpos = _get_varint(body, rpos)
            end = rpos + length
            if end > len(body):
                raise CorruptRecordError("record runs past the end of the batch")
            rpos += 1  # record attributes: unused by v2
            ts_delta, rpos = _get_varint(body, rpos)
            offset_delta, rpos = _get_varint(body, rpos)
            key, rpos = _get_bytes(body, rpos)
            value, rpos = _get_bytes(body, rpos)
            count, rpos = _get_varint(body, rpos)
            # A header takes two bytes at least (its key's and its value's lengths): a count
            # the record cannot hold is refused before a loop over it (Kafka's readHeaders
            # refuses a negative one; found by fuzz/records.py, a million headers declared).
            if count < 0 or 2 * count > end - rpos:
                raise CorruptRecordError(
                    f"record at offset delta {offset_delta} declares {count} headers in "
                    f"{end - rpos} bytes"
                )
            headers: list[tuple[str, bytes | None]] = []
            for _ in range(count):
                hkey, rpos = _get_bytes(body, rpos)
                hvalue, rpos = _get_bytes(body, rpos)
                headers.append(((hkey or b"").decode(errors="replace"), hvalue))
            if rpos != end:
                raise CorruptRecordError("record length does not match its contents")
            timestamp = h.max_timestamp if log_append else h.base_timestamp + ts_delta
            out.append(Record(h.base_offset + offset_delta, timestamp, key, value, tuple(headers)))
    return out
