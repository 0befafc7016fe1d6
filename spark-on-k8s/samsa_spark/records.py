"""Kafka v2 record batches (the records field of a Fetch response) decoded into Arrow columns.

Pure logic, no I/O: bytes in, a pyarrow RecordBatch of the source's schema out. Batch headers
are read in Python (one per batch), compressed sections are inflated with cramjam, and the
varint-framed records are walked by two small numba-compiled loops that write positions and
lengths into numpy arrays; keys, values and headers are then gathered into Arrow buffers.
No Python object is made per record.

Why numba: a record's position depends on the previous record's length varint, so the walk
is a chain that numpy cannot vectorise without decoding a varint at every byte (about ten
array passes over the data, slower than the rest of the read put together).

Kafka's consumer rules are kept: control batches are skipped, and under read_committed so is
the data of aborted transactions (the Fetch response's aborted list, consumed as Kafka's
fetcher does); records below `start` (inside a batch that began earlier) and at or past `end`
are dropped, and offsets missing from the log (compaction) are simply absent.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import cramjam
import numpy as np
import pyarrow as pa

from samsa_spark.compiled import compiled
from samsa_spark.schema import arrow_schema

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
_HEADER_SIZE = 61
_LOG_OVERHEAD = 12  # baseOffset and batchLength, not counted by batchLength
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic, version, compatible version
_I32 = struct.Struct(">i")
_ABORT_MARKER = 0  # control record key: version int16, type int16 (0 abort, 1 commit)


class CorruptBatchError(ValueError):
    """Bytes that are not valid v2 record batches."""


@dataclass(frozen=True)
class Decoded:
    """The rows of one fetched records field, and where the next fetch starts."""

    batch: pa.RecordBatch
    # Past the last whole batch read (control and skipped batches included), or the fetch
    # offset if no whole batch came back.
    next_offset: int


class _Section(NamedTuple):
    """One batch's records section: the row of `_walk`'s inputs."""

    start: int
    end: int
    records: int
    base_offset: int
    timestamp: int  # the base timestamp, or the batch's max timestamp under LogAppendTime
    log_append: int
    codec: int


def _snappy(data: memoryview) -> bytes:
    # Kafka's Java producer writes xerial-framed snappy; others write a raw block.
    if bytes(data[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(data))
    parts = []
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        (length,) = _I32.unpack_from(data, pos)
        pos += 4
        parts.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + length])))
        pos += length
    return b"".join(parts)


_INFLATE = {
    1: lambda d: bytes(cramjam.gzip.decompress(d)),
    2: _snappy,
    3: lambda d: bytes(cramjam.lz4.decompress(d)),  # Kafka's LZ4 is the LZ4 frame format
    4: lambda d: bytes(cramjam.zstd.decompress(d)),
}


def _inflate(codec: int, data: memoryview) -> bytes:
    try:
        return _INFLATE[codec](data)
    except KeyError:
        raise CorruptBatchError(f"unknown compression codec {codec}") from None
    except (cramjam.DecompressionError, struct.error) as e:
        raise CorruptBatchError(f"cannot decompress codec {codec}: {e}") from None


class _Aborted:
    """Kafka's fetcher: producers whose open transaction was aborted, as the log goes by."""

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        # (first_offset, producer_id), soonest first
        self.pending = [(first, pid) for pid, first in aborted]
        heapq.heapify(self.pending)
        self.producers: set[int] = set()

    def skip(self, pid: int, last_offset: int, control: bool, marker: memoryview | None) -> bool:
        """Whether the batch is left out; `marker` is a control batch's records."""
        while self.pending and self.pending[0][0] <= last_offset:
            self.producers.add(heapq.heappop(self.pending)[1])
        if control:
            if pid in self.producers and marker is not None and _is_abort_marker(marker):
                self.producers.discard(pid)
            return True
        return pid in self.producers


def _is_abort_marker(records: memoryview) -> bool:
    # A control batch holds one record whose key is (version int16, type int16).
    data = np.frombuffer(records, np.uint8)
    data.flags.writeable = False
    return bool(_walk_one_key(data) == _ABORT_MARKER)


@compiled
def _varint(data, pos, limit):
    """A zigzag varint at `pos`: (value, position after it)."""
    result = np.uint64(0)
    shift = np.uint64(0)
    while True:
        if pos >= limit:
            raise ValueError("record truncated inside a varint")
        b = data[pos]
        pos += 1
        result |= np.uint64(b & 0x7F) << shift
        if b < 0x80:
            break
        shift += np.uint64(7)
        if shift > np.uint64(63):
            raise ValueError("varint longer than 10 bytes")
    half = np.int64(result >> np.uint64(1))
    if result & np.uint64(1):
        return -half - 1, pos
    return half, pos


@compiled
def _span(data, p, end):
    """A length-prefixed field at `p`: (start, length or -1 for null, position after it)."""
    n, p = _varint(data, p, end)
    start = p
    if n > 0:
        p += n
    if p > end:
        raise ValueError("record field runs past the end of its record")
    return start, n, p


@compiled
def _walk_one_key(data):
    """The type field of a control record's key (-1 if it has none)."""
    n = len(data)
    length, p = _varint(data, 0, n)
    end = p + length
    p += 1
    _, p = _varint(data, p, end)
    _, p = _varint(data, p, end)
    klen, p = _varint(data, p, end)
    if klen < 4:
        return -1
    return (np.int64(data[p + 2]) << 8) | np.int64(data[p + 3])


@compiled
def _walk(data, starts, ends, counts, base_offsets, timestamps, log_append):
    """Every record of the batch sections [starts[b], ends[b]) of `data`: offset, timestamp,
    key and value positions and lengths (-1 for null), and where its headers begin."""
    total = 0
    for b in range(len(counts)):
        total += counts[b]
    offsets = np.empty(total, np.int64)
    ts = np.empty(total, np.int64)
    key_pos = np.empty(total, np.int64)
    key_len = np.empty(total, np.int64)
    val_pos = np.empty(total, np.int64)
    val_len = np.empty(total, np.int64)
    hdr_pos = np.empty(total, np.int64)
    hdr_end = np.empty(total, np.int64)
    hdr_count = np.empty(total, np.int64)
    k = 0
    for b in range(len(counts)):
        pos = starts[b]
        limit = ends[b]
        for _ in range(counts[b]):
            length, p = _varint(data, pos, limit)
            end = p + length
            if length < 0 or end > limit:
                raise ValueError("record runs past the end of its batch")
            p += 1  # record attributes, unused in v2
            ts_delta, p = _varint(data, p, end)
            offset_delta, p = _varint(data, p, end)
            key_pos[k], key_len[k], p = _span(data, p, end)
            val_pos[k], val_len[k], p = _span(data, p, end)
            hcount, p = _varint(data, p, end)
            if hcount < 0:
                raise ValueError("negative header count")
            hdr_pos[k] = p
            hdr_end[k] = end
            hdr_count[k] = hcount
            offsets[k] = base_offsets[b] + offset_delta
            ts[k] = timestamps[b] if log_append[b] else timestamps[b] + ts_delta
            pos = end
            k += 1
    return offsets, ts, key_pos, key_len, val_pos, val_len, hdr_pos, hdr_end, hdr_count


@compiled
def _walk_headers(data, hdr_pos, hdr_end, hdr_count):
    """Positions and lengths of every header key and value of the given records."""
    total = 0
    for i in range(len(hdr_count)):
        total += hdr_count[i]
    kp = np.empty(total, np.int64)
    kl = np.empty(total, np.int64)
    vp = np.empty(total, np.int64)
    vl = np.empty(total, np.int64)
    j = 0
    for i in range(len(hdr_count)):
        p = hdr_pos[i]
        end = hdr_end[i]
        for _ in range(hdr_count[i]):
            kp[j], n, p = _span(data, p, end)
            kl[j] = max(n, 0)  # a null header key reads as ""
            vp[j], vl[j], p = _span(data, p, end)
            j += 1
        if p != end:
            raise ValueError("record length does not match its contents")
    return kp, kl, vp, vl


@compiled
def _gather(data, pos, length):
    """Arrow binary offsets and data for the byte ranges (pos, length); -1 is null."""
    n = len(pos)
    offs = np.empty(n + 1, np.int32)
    total = 0
    for i in range(n):
        offs[i] = total
        if length[i] > 0:
            total += length[i]
            if total > 0x7FFFFFFF:
                raise ValueError("more than 2 GiB of bytes in one column")
    offs[n] = total
    out = np.empty(total, np.uint8)
    for i in range(n):
        n_i = length[i]
        if n_i > 0:
            o = offs[i]
            p = pos[i]
            out[o : o + n_i] = data[p : p + n_i]
    return offs, out


def _binary(data: np.ndarray, pos: np.ndarray, length: np.ndarray, typ: pa.DataType) -> pa.Array:
    offs, out = _gather(data, pos, length)
    nulls = int(np.count_nonzero(length < 0))
    validity = None
    if nulls:
        validity = pa.py_buffer(np.packbits(length >= 0, bitorder="little"))
    return pa.Array.from_buffers(
        typ, len(pos), [validity, pa.py_buffer(offs), pa.py_buffer(out)], null_count=nulls
    )


def _constant_string(value: str, n: int) -> pa.Array:
    raw = value.encode()
    offs = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offs), pa.py_buffer(raw * n)], null_count=0
    )


def decode(
    records: bytes | memoryview,
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    include_headers: bool = False,
    read_committed: bool = False,
    aborted: Iterable[tuple[int, int]] = (),
) -> Decoded:
    """The records with offsets in [start, end) of a Fetch response's records field.

    `aborted` is the response's aborted transactions as (producer_id, first_offset); it only
    matters under read_committed. A batch cut short at the end of the field is left for the
    next fetch, as Kafka's consumer does.
    """
    view = memoryview(records).cast("B")
    size = len(view)
    txns = _Aborted(aborted) if read_committed else None
    next_offset = start
    sections: list[_Section] = []
    compressed = False
    pos = 0
    while pos + _LOG_OVERHEAD <= size:
        (base, length) = struct.unpack_from(">qi", view, pos)
        batch_end = pos + _LOG_OVERHEAD + length
        if batch_end > size:
            break  # a partial batch: the broker cut the response at its size limit
        if length < _HEADER_SIZE - _LOG_OVERHEAD:
            raise CorruptBatchError(f"batch at byte {pos} is shorter than its header")
        (_, _, _, magic, _, attrs, last_delta, base_ts, max_ts, pid, _, _, count) = (
            _HEADER.unpack_from(view, pos)
        )
        if magic != 2:
            raise CorruptBatchError(f"unsupported record batch magic v{magic}")
        last = base + last_delta
        body = (pos + _HEADER_SIZE, batch_end)
        pos = batch_end
        control = bool(attrs & _CONTROL)
        # A batch below `start` still moves the aborted transactions on (an abort marker there
        # ends one), as in Kafka's fetcher, which looks at every batch before skipping records.
        skipped = control
        if txns is not None and (attrs & _TRANSACTIONAL or control) and base < end:
            marker = None
            if control:
                codec = attrs & _CODEC_MASK
                section = view[body[0] : body[1]]
                marker = memoryview(_inflate(codec, section)) if codec else section
            skipped = txns.skip(pid, last, control, marker)
        if last < start:
            continue
        next_offset = max(next_offset, last + 1)
        if base >= end or skipped:
            continue
        log_append = attrs & _LOG_APPEND_TIME
        ts = max_ts if log_append else base_ts
        sections.append(
            _Section(*body, count, base, ts, 1 if log_append else 0, attrs & _CODEC_MASK)
        )
        compressed = compressed or bool(attrs & _CODEC_MASK)
    return Decoded(
        _columns(view, sections, compressed, topic, partition, start, end, include_headers),
        next_offset,
    )


def _columns(
    view: memoryview,
    sections: list[_Section],
    compressed: bool,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
) -> pa.RecordBatch:
    schema = arrow_schema(include_headers)
    if not sections:
        return pa.RecordBatch.from_pylist([], schema)
    meta = np.array(sections, np.int64)
    if compressed:
        # One buffer holding every section, inflated where needed.
        parts: list[bytes | memoryview] = []
        at = 0
        for row, sec in zip(meta, sections, strict=True):
            part = (
                _inflate(sec.codec, view[sec.start : sec.end])
                if sec.codec
                else view[sec.start : sec.end]
            )
            parts.append(part)
            row[0], row[1] = at, at + len(part)
            at += len(part)
        data = np.frombuffer(b"".join(parts), np.uint8)
    else:
        data = np.frombuffer(view, np.uint8)
    # One compiled specialisation for bytes and bytearray alike: numba types read-only apart.
    data.flags.writeable = False
    try:
        cols = _walk(
            data, meta[:, 0], meta[:, 1], meta[:, 2], meta[:, 3], meta[:, 4], meta[:, 5] != 0
        )
    except ValueError as e:
        raise CorruptBatchError(str(e)) from None
    ts_types = np.repeat(meta[:, 5].astype(np.int32), meta[:, 2])
    offsets = cols[0]
    keep = (offsets >= start) & (offsets < end)
    if not keep.all():
        cols = tuple(a[keep] for a in cols)
        ts_types = ts_types[keep]
    offsets, ts, kp, kl, vp, vl, hp, he, hc = cols
    n = len(offsets)
    arrays = [
        _binary(data, kp, kl, pa.binary()),
        _binary(data, vp, vl, pa.binary()),
        _constant_string(topic, n),
        pa.array(np.full(n, partition, np.int32)),
        pa.array(offsets),
        pa.array(ts * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(ts_types),
    ]
    if include_headers:
        arrays.append(_headers(data, hp, he, hc, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _headers(
    data: np.ndarray, pos: np.ndarray, end: np.ndarray, count: np.ndarray, typ: pa.DataType
) -> pa.Array:
    try:
        kp, kl, vp, vl = _walk_headers(data, pos, end, count)
    except ValueError as e:
        raise CorruptBatchError(str(e)) from None
    keys = _binary(data, kp, kl, pa.string())
    keys.validate(full=True)  # header keys are UTF-8 strings in Kafka
    values = _binary(data, vp, vl, pa.binary())
    entries = pa.StructArray.from_arrays([keys, values], fields=list(typ.value_type))
    list_offsets = np.zeros(len(count) + 1, np.int32)
    np.cumsum(count, out=list_offsets[1:])
    return pa.ListArray.from_arrays(pa.array(list_offsets), entries, type=typ)


def warm() -> None:
    """Compile (or load from numba's on-disk cache) every loop above, on a tiny fetch.

    Run once where Python workers will start (the image build, a local session), so that no
    task pays the compilation, which takes tens of seconds on a busy machine.
    """
    # A record with a key, a value and a header; a transaction's data and its abort marker.
    record = bytes([24, 0, 0, 0, 2, 107, 2, 118, 2, 2, 104, 2, 120])
    marker = bytes([32, 0, 0, 0, 8, 0, 0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0])

    def batch(base: int, attrs: int, body: bytes) -> bytes:
        return _HEADER.pack(base, 49 + len(body), 0, 2, 0, attrs, 0, 0, 0, 7, 0, 0, 1) + body

    decode(batch(0, 0, record), "t", 0, 0, 1, include_headers=True)
    txn = batch(0, _TRANSACTIONAL, record) + batch(1, _TRANSACTIONAL | _CONTROL, marker)
    decode(txn, "t", 0, 0, 2, read_committed=True, aborted=[(7, 0)])
