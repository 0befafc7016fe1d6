"""The sink's columnar encoder against the broker's record reference (samsa.protocol.record_batch):
Hypothesis rows with null keys and values, headers and an added header, every codec, sliced
and large-typed Arrow columns; and Kafka's murmur2 key partitioner on Kafka's own test vectors."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.protocol import record_batch as ref
from samsa_spark.encode import CODECS, Columns, batch

_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_bytes = st.one_of(st.none(), st.binary(max_size=300))
_row = st.tuples(_bytes, _bytes, st.lists(st.tuples(st.text(max_size=8), _bytes), max_size=3))


def _columns(rows, large: bool = False, pad: int = 0) -> Columns:
    """The rows as Arrow columns; `pad` rows in front are sliced off, as Spark's batches are."""
    rows = [(b"pad", b"pad", [("p", b"p")])] * pad + list(rows)
    binary = pa.large_binary() if large else pa.binary()
    key = pa.array([k for k, _v, _h in rows], binary)
    value = pa.array([v for _k, v, _h in rows], binary)
    headers = pa.array([[{"key": k, "value": v} for k, v in h] for _k, _v, h in rows], _HEADERS)
    return Columns.of(key[pad:], value[pad:], headers[pad:])


def _reference(rows, extra, **kwargs) -> bytes:
    more = [(extra[0], extra[1])] if extra else []
    return ref.build_batch([(k, v, list(h) + more) for k, v, h in rows], **kwargs)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(_row, min_size=1, max_size=30),
    codec=st.sampled_from(sorted(CODECS.values())),
    extra=st.one_of(st.none(), st.tuples(st.text(max_size=20), st.binary(max_size=20))),
    ts=st.integers(0, 2**41),
    large=st.booleans(),
    pad=st.integers(0, 3),
)
def test_batches_are_byte_for_byte_the_reference(rows, codec, extra, ts, large, pad) -> None:
    ids = dict(producer_id=7, producer_epoch=1, base_sequence=42)
    header = (extra[0].encode(), extra[1]) if extra else None
    cols = _columns(rows, large, pad)
    got = batch(cols.records(np.arange(len(rows)), header), len(rows), ts, codec=codec, **ids)
    assert got == _reference(rows, extra, timestamp_ms=ts, compression=codec, **ids)


@settings(max_examples=50, deadline=None)
@given(rows=st.lists(_row, min_size=1, max_size=20), data=st.data())
def test_a_subset_of_rows_in_any_order(rows, data) -> None:
    picked = data.draw(st.lists(st.integers(0, len(rows) - 1), min_size=1, max_size=20))
    got = batch(_columns(rows).records(np.array(picked), None), len(picked), 5)
    assert got == _reference([rows[i] for i in picked], None, timestamp_ms=5)


def test_absent_key_and_headers_columns_are_null_keys_and_no_headers() -> None:
    cols = Columns.of(None, pa.array([b"a", None], pa.binary()), None)
    got = batch(cols.records(np.arange(2), None), 2, 9)
    assert got == ref.build_batch([(None, b"a", []), (None, None, [])], timestamp_ms=9)


def test_string_keys_partition_as_kafkas_murmur2() -> None:
    # Kafka's UtilsTest.testMurmur2 vectors, taken positive and modulo a partition count.
    vectors = {
        "21": -973932308,
        "foobar": -790332482,
        "a-little-bit-long-string": -985981536,
        "a-little-bit-longer-string": -1486304829,
        "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        "abc": 479470107,
    }
    keys = pa.array([*vectors, None], pa.string())
    cols = Columns.of(keys, pa.array([b"v"] * len(keys), pa.binary()), None)
    for count in (1, 6, 7, 1000):
        want = [(h & 0x7FFFFFFF) % count for h in vectors.values()] + [-1]
        assert cols.partitions(count).tolist() == want


@settings(max_examples=50, deadline=None)
@given(rows=st.lists(_row, min_size=2, max_size=20), data=st.data())
def test_sections_concatenate_into_one_batch(rows, data) -> None:
    cut = data.draw(st.integers(1, len(rows) - 1))
    cols = _columns(rows)
    first = cols.records(np.arange(cut), (b"t", b"1"))
    rest = cols.records(np.arange(cut, len(rows)), (b"t", b"1"), first_delta=cut)
    got = batch(first + rest, len(rows), 3)
    assert got == _reference(rows, ("t", b"1"), timestamp_ms=3)
