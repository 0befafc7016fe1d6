"""The columnar decoder against the broker's record reference (samsa.protocol.record_batch), on
Hypothesis-made fetch responses: every codec, headers, null keys and values, LogAppendTime,
control batches, compacted gaps, aborted transactions and a batch cut short at the end."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.protocol import record_batch as ref
from samsa_spark.records import CorruptBatchError, decode

_bytes = st.one_of(st.none(), st.binary(max_size=40))
_record = st.tuples(
    _bytes,
    _bytes,
    st.lists(st.tuples(st.text(max_size=8), _bytes), max_size=3),
)


def _gapped_batch(records: list, deltas: list[int], base: int, ts: int, codec: int) -> bytes:
    """A batch as the log cleaner leaves it: some offsets gone, lastOffsetDelta kept."""
    body = bytearray()
    for (key, value, headers), delta in zip(records, deltas, strict=True):
        rec = bytearray([0])
        ref._put_varint(rec, delta)  # timestamp delta
        ref._put_varint(rec, delta)
        ref._put_bytes(rec, key)
        ref._put_bytes(rec, value)
        ref._put_varint(rec, len(headers))
        for k, v in headers:
            ref._put_bytes(rec, k.encode())
            ref._put_bytes(rec, v)
        ref._put_varint(body, len(rec))
        body += rec
    last = (deltas[-1] if deltas else 0) + 2
    return ref.assemble_batch(
        base_offset=base,
        partition_leader_epoch=0,
        attributes=codec,
        last_offset_delta=last,
        base_timestamp=ts,
        max_timestamp=ts + last,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=len(records),
        records=ref.compress(codec, bytes(body)),
    )


def _marker(base: int, pid: int, commit: bool) -> bytes:
    body = bytearray([0])
    ref._put_varint(body, 0)
    ref._put_varint(body, 0)
    ref._put_bytes(body, struct.pack(">hh", 0, 1 if commit else 0))
    ref._put_bytes(body, struct.pack(">hi", 0, 0))
    ref._put_varint(body, 0)
    rec = bytearray()
    ref._put_varint(rec, len(body))
    return ref.assemble_batch(
        base_offset=base,
        partition_leader_epoch=0,
        attributes=ref.CONTROL_MASK | ref.TRANSACTIONAL_MASK,
        last_offset_delta=0,
        base_timestamp=0,
        max_timestamp=0,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=-1,
        records_count=1,
        records=bytes(rec + body),
    )


@dataclass
class Fetch:
    data: bytes
    aborted: list[tuple[int, int]]
    visible: list[bytes]  # the batches a read_committed consumer returns rows from
    uncommitted: list[bytes]  # ... and a read_uncommitted one
    end_of_whole: int  # offset after the last whole batch


@st.composite
def fetches(draw: st.DrawFn) -> Fetch:
    offset = draw(st.integers(0, 1000))
    parts: list[bytes] = []
    visible: list[bytes] = []
    uncommitted: list[bytes] = []
    aborted: list[tuple[int, int]] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["plain", "gapped", "log_append", "txn_commit", "txn_abort"]))
        codec = draw(st.sampled_from([0, 1, 2, 3, 4]))
        recs = draw(st.lists(_record, min_size=1, max_size=12))
        offset += draw(st.integers(0, 3))  # compacted-away batches
        ts = draw(st.integers(0, 2**41))
        if kind == "gapped":
            deltas = sorted(draw(st.sets(st.integers(0, 40), max_size=len(recs))))
            batch = _gapped_batch(recs[: len(deltas)], deltas, offset, ts, codec)
        elif kind.startswith("txn"):
            pid = draw(st.integers(0, 3))
            batch = ref.build_batch(
                recs,
                offset,
                ts,
                compression=codec,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=0,
                transactional=True,
            )
        else:
            batch = ref.build_batch(recs, offset, ts, compression=codec)
            if kind == "log_append":
                buf = bytearray(batch)
                ref.set_log_append_time(buf, 0, draw(st.integers(0, 2**41)))
                batch = bytes(buf)
        header = ref.read_batch_header(batch)
        parts.append(batch)
        uncommitted.append(batch)
        if kind == "txn_abort":
            aborted.append((pid, offset))
        else:
            visible.append(batch)
        offset = header.last_offset + 1
        if kind.startswith("txn"):
            parts.append(_marker(offset, pid, commit=kind == "txn_commit"))
            offset += 1
    data = b"".join(parts)
    end_of_whole = offset
    if draw(st.booleans()):
        extra = ref.build_batch([(None, b"cut", [])], offset)
        data += extra[: draw(st.integers(1, len(extra) - 1))]
    return Fetch(data, aborted, visible, uncommitted, end_of_whole)


def _expected(batches: list[bytes], start: int, end: int) -> list[dict]:
    return [
        {
            "key": r.key,
            "value": r.value,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "timestampType": ref.read_batch_header(b).timestamp_type,
            "headers": [{"key": k, "value": v} for k, v in r.headers],
        }
        for b in batches
        for r in ref.decode_records(b)
        if start <= r.offset < end
    ]


@settings(max_examples=100, deadline=None)
@given(
    fetch=fetches(),
    read_committed=st.booleans(),
    cut=st.tuples(st.integers(0, 1200), st.integers(0, 400)),
)
def test_decoded_rows_match_the_reference(fetch: Fetch, read_committed: bool, cut) -> None:
    start, width = cut
    end = start + width
    got = decode(
        fetch.data,
        "topic-a",
        3,
        start,
        end,
        include_headers=True,
        read_committed=read_committed,
        aborted=fetch.aborted,
    )
    batch = got.batch
    want = _expected(fetch.visible if read_committed else fetch.uncommitted, start, end)
    assert batch.column("topic").to_pylist() == ["topic-a"] * len(want)
    assert batch.column("partition").to_pylist() == [3] * len(want)
    ts_ms = batch.column("timestamp").cast("int64").to_pylist()
    rows = [
        {
            "key": r["key"],
            "value": r["value"],
            "offset": r["offset"],
            "timestamp": t // 1000,
            "timestampType": r["timestampType"],
            "headers": r["headers"],
        }
        for r, t in zip(batch.to_pylist(), ts_ms, strict=True)
    ]
    assert rows == want
    assert (
        got.next_offset == max(start, fetch.end_of_whole)
        if fetch.end_of_whole > start
        else got.next_offset == start
    )


def test_headers_column_is_left_out_unless_asked() -> None:
    data = ref.build_batch([(b"k", b"v", [("h", b"x")])], 7)
    got = decode(data, "t", 0, 0, 100)
    assert got.batch.schema.names[-1] == "timestampType"
    assert got.batch.to_pylist()[0]["offset"] == 7
    assert got.next_offset == 8


def test_corrupt_records_raise() -> None:
    data = bytearray(ref.build_batch([(b"k", b"v" * 20, [])], 0))
    data[ref.BATCH_HEADER_SIZE] = 0x7E  # the record's length varint now runs past its batch
    with pytest.raises(CorruptBatchError):
        decode(bytes(data), "t", 0, 0, 10)


def test_an_abort_marker_below_start_ends_the_aborted_transaction() -> None:
    """Found by the property above: a fetch from offset 2, where the producer's transaction at
    0 was aborted by the marker at 1 and its next one, at 2, committed. The marker lies below
    the fetch offset, but it still ends the aborted transaction, as in Kafka's fetcher."""

    def txn(offset: int, value: bytes) -> bytes:
        return ref.build_batch(
            [(None, value, [])],
            offset,
            0,
            producer_id=0,
            producer_epoch=0,
            base_sequence=offset,
            transactional=True,
        )

    data = txn(0, b"aborted") + _marker(1, 0, commit=False)
    data += txn(2, b"committed") + _marker(3, 0, commit=True)
    got = decode(data, "t", 0, 2, 10, read_committed=True, aborted=[(0, 0)])
    assert got.batch.column("value").to_pylist() == [b"committed"]
    assert got.next_offset == 4


def test_a_loop_numba_cannot_cache_still_compiles_and_runs() -> None:
    """Where numba has no folder to write its cache in (a container's non-root user, a
    read-only install; here a function with no source file), the loop compiles in the
    process instead of failing the import."""
    from samsa_spark.compiled import compiled

    scope: dict[str, object] = {}
    exec("def add(a, b):\n    return a + b\n", scope)
    assert compiled(scope["add"])(2, 3) == 5
