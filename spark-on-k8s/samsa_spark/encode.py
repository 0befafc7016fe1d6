"""Arrow columns encoded into Kafka v2 record batches, and Kafka's key partitioner, for the sink.

Pure logic, no I/O: the rows of one (topic, partition) of a pyarrow RecordBatch in, the bytes of
one record batch out. Two small numba-compiled loops size and then write every record straight
from the Arrow buffers (key, value, the headers column and an extra header shared by every
row); no Python object is made per record. The batch header, its CRC-32C and compression are
done once per batch in Python.

Keys are partitioned as Kafka's Java producer does (murmur2 of the key bytes, made positive,
modulo the partition count), which is also what Spark's own Kafka sink does, so a key lands in
the same partition through either format.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import cramjam
import crc32c
import numpy as np
import pyarrow as pa

from samsa_spark.compiled import compiled

# Kafka's compression.type names and the codec ids of the attributes field.
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc
_PRE_CRC = struct.Struct(">qiibI")
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordsCount
_POST_CRC = struct.Struct(">hiqqqhii")
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


@compiled
def _zigzag(v):
    return (np.uint64(v) << np.uint64(1)) ^ np.uint64(v >> 63)


@compiled
def _varint_size(v):
    z = _zigzag(v)
    n = 1
    while z >= np.uint64(0x80):
        z >>= np.uint64(7)
        n += 1
    return n


@compiled
def _put_varint(out, pos, v):
    z = _zigzag(v)
    while z >= np.uint64(0x80):
        out[pos] = np.uint8((z & np.uint64(0x7F)) | np.uint64(0x80))
        z >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(z)
    return pos + 1


@compiled
def _put_field(out, pos, data, start, length):
    """A length-prefixed field; length -1 is null."""
    pos = _put_varint(out, pos, length)
    for i in range(max(length, 0)):
        out[pos + i] = data[start + i]
    return pos + max(length, 0)


@compiled
def _field_size(length):
    return _varint_size(length) + max(length, 0)


@compiled
def _encode(
    rows,
    k_off,
    k_len,
    k_data,
    v_off,
    v_len,
    v_data,
    h_first,
    h_count,
    hk_off,
    hk_len,
    hk_data,
    hv_off,
    hv_len,
    hv_data,
    x_key,
    x_value,
    with_extra,
    first_delta,
):
    """The records section of a batch holding `rows` (indices into the columns), offset
    deltas from `first_delta` on and timestamp deltas 0. Lengths of -1 are nulls; the header
    entries of row r are h_first[r] .. h_first[r] + h_count[r] - 1; `x_key`/`x_value` is a
    header added to every record when `with_extra`."""
    n = len(rows)
    body = np.empty(n, np.int64)
    total = 0
    extra = 0
    if with_extra:
        extra = _field_size(len(x_key)) + _field_size(len(x_value))
    for i in range(n):
        r = rows[i]
        size = 1 + 1 + _varint_size(first_delta + i)  # attributes, timestamp delta, offset delta
        size += _field_size(k_len[r]) + _field_size(v_len[r])
        hc = h_count[r] + (1 if with_extra else 0)
        size += _varint_size(hc) + extra
        for j in range(h_first[r], h_first[r] + h_count[r]):
            size += _field_size(hk_len[j]) + _field_size(hv_len[j])
        body[i] = size
        total += _varint_size(size) + size
    out = np.empty(total, np.uint8)
    pos = 0
    for i in range(n):
        r = rows[i]
        pos = _put_varint(out, pos, body[i])
        out[pos] = 0  # record attributes
        out[pos + 1] = 0  # timestamp delta
        pos = _put_varint(out, pos + 2, first_delta + i)
        pos = _put_field(out, pos, k_data, k_off[r], k_len[r])
        pos = _put_field(out, pos, v_data, v_off[r], v_len[r])
        pos = _put_varint(out, pos, h_count[r] + (1 if with_extra else 0))
        for j in range(h_first[r], h_first[r] + h_count[r]):
            pos = _put_field(out, pos, hk_data, hk_off[j], hk_len[j])
            pos = _put_field(out, pos, hv_data, hv_off[j], hv_len[j])
        if with_extra:
            pos = _put_field(out, pos, x_key, 0, len(x_key))
            pos = _put_field(out, pos, x_value, 0, len(x_value))
    return out


@compiled
def _murmur2_partitions(k_off, k_len, k_data, partitions):
    """Kafka's Utils.murmur2 of each key, made positive, modulo `partitions`; -1 for null
    keys, which the caller places."""
    n = len(k_len)
    out = np.empty(n, np.int32)
    mask = np.uint64(0xFFFFFFFF)
    m = np.uint64(0x5BD1E995)
    for i in range(n):
        length = k_len[i]
        if length < 0:
            out[i] = -1
            continue
        start = k_off[i]
        h = (np.uint64(0x9747B28C) ^ np.uint64(length)) & mask
        for q in range(length // 4):
            p = start + 4 * q
            k = (
                np.uint64(k_data[p])
                | (np.uint64(k_data[p + 1]) << np.uint64(8))
                | (np.uint64(k_data[p + 2]) << np.uint64(16))
                | (np.uint64(k_data[p + 3]) << np.uint64(24))
            )
            k = (k * m) & mask
            k ^= k >> np.uint64(24)
            k = (k * m) & mask
            h = (h * m) & mask
            h ^= k
        tail = start + (length & ~3)
        rest = length % 4
        if rest == 3:
            h ^= np.uint64(k_data[tail + 2]) << np.uint64(16)
        if rest >= 2:
            h ^= np.uint64(k_data[tail + 1]) << np.uint64(8)
        if rest >= 1:
            h ^= np.uint64(k_data[tail])
            h = (h * m) & mask
        h ^= h >> np.uint64(13)
        h = (h * m) & mask
        h ^= h >> np.uint64(15)
        out[i] = np.int32((h & np.uint64(0x7FFFFFFF)) % np.uint64(partitions))
    return out


_EMPTY_I64 = np.zeros(0, np.int64)
# Byte arrays are always read-only (Arrow's buffers are): one compiled specialisation.
_EMPTY_U8 = np.zeros(0, np.uint8)
_EMPTY_U8.flags.writeable = False


def _spans(arr: pa.Array | None, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, length or -1 for null, data) of each value of a binary or string array; all
    null when the column is absent."""
    if arr is None:
        return np.zeros(n, np.int64), np.full(n, -1, np.int64), _EMPTY_U8
    if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
        width: type = np.int64
    else:
        width = np.int32
    _validity, offs_buf, data_buf = arr.buffers()
    offs = np.frombuffer(offs_buf, width)[arr.offset : arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else _EMPTY_U8
    data.flags.writeable = False  # whichever way Arrow exposed it: one specialisation
    lengths = np.diff(offs)
    if arr.null_count:
        lengths[arr.is_null().to_numpy(zero_copy_only=False)] = -1
    return offs[:-1], lengths, data


@dataclass(frozen=True)
class Columns:
    """A RecordBatch's key, value and headers as the numpy views the loops read."""

    n: int
    key: tuple[np.ndarray, np.ndarray, np.ndarray]
    value: tuple[np.ndarray, np.ndarray, np.ndarray]
    h_first: np.ndarray
    h_count: np.ndarray
    h_key: tuple[np.ndarray, np.ndarray, np.ndarray]
    h_value: tuple[np.ndarray, np.ndarray, np.ndarray]

    @classmethod
    def of(cls, key: pa.Array | None, value: pa.Array | None, headers: pa.Array | None) -> Columns:
        """`headers` is Spark's array<struct<key: string, value: binary>>, or None."""
        n = len(value) if value is not None else len(key) if key is not None else 0
        if headers is None or len(headers) == 0:
            h_first = np.zeros(n, np.int64)
            h_count = np.zeros(n, np.int64)
            h_key = h_value = (_EMPTY_I64, _EMPTY_I64, _EMPTY_U8)
        else:
            list_offs = headers.offsets.to_numpy().astype(np.int64)
            h_first = list_offs[:-1]
            h_count = np.diff(list_offs)
            if headers.null_count:
                h_count[headers.is_null().to_numpy(zero_copy_only=False)] = 0
            entries = headers.values
            m = len(entries)
            hk = _spans(entries.field(0), m)
            # Kafka's header keys are never null: a null one is written as "".
            hk[1][hk[1] < 0] = 0
            h_key = hk
            h_value = _spans(entries.field(1), m)
        return cls(n, _spans(key, n), _spans(value, n), h_first, h_count, h_key, h_value)

    def partitions(self, count: int) -> np.ndarray:
        """Kafka's default partition of each row's key; -1 where the key is null."""
        start, length, data = self.key
        return _murmur2_partitions(start, length, data, count)

    def records(
        self, rows: np.ndarray, extra_header: tuple[bytes, bytes] | None, first_delta: int = 0
    ) -> bytes:
        """The uncompressed records section for `rows`, in that order, their offset deltas
        counting from `first_delta` (sections of one batch are concatenated)."""
        xk, xv = extra_header if extra_header is not None else (b"", b"")
        out = _encode(
            rows.astype(np.int64, copy=False),
            *self.key,
            *self.value,
            self.h_first,
            self.h_count,
            *self.h_key,
            *self.h_value,
            np.frombuffer(xk, np.uint8),
            np.frombuffer(xv, np.uint8),
            extra_header is not None,
            first_delta,
        )
        return out.tobytes()


def compress(codec: int, data: bytes) -> bytes:
    """A records section compressed as Kafka's Java producer frames it."""
    if codec == 0:
        return data
    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        out = bytearray(_XERIAL_HEADER)
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == 3:
        # Kafka's Java reader decompresses LZ4 frame blocks one by one: no linked blocks.
        c = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        c.compress(data)
        return bytes(c.finish())
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def batch(
    records: bytes,
    count: int,
    timestamp_ms: int,
    *,
    codec: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """One CreateTime v2 batch at base offset 0 around an uncompressed records section of
    `count` records, every record at `timestamp_ms`."""
    post = _POST_CRC.pack(
        codec,
        count - 1,
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) + compress(codec, records)
    # batchLength also covers partitionLeaderEpoch, magic and crc: 9 bytes.
    return _PRE_CRC.pack(0, len(post) + 9, -1, 2, crc32c.crc32c(post)) + post


def warm() -> None:
    """Compile (or load from numba's cache) the loops above on a tiny batch."""
    key = pa.array([b"k", None], pa.binary())
    value = pa.array([b"v", b"w"], pa.binary())
    headers = pa.array(
        [[{"key": "h", "value": b"x"}], None],
        pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
    )
    cols = Columns.of(key, value, headers)
    cols.partitions(3)
    cols.records(np.arange(2), (b"t", b"1"))
