"""The log cleaner on tmp dirs: what a compacted log keeps, and when."""

from __future__ import annotations

import tempfile
from collections import defaultdict
from pathlib import Path

import pytest
from cleaner_support import (
    COMPACTED,
    Clock,
    assert_subset_of,
    compacted_log,
    read_all,
    read_batches,
    view,
    with_config,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.log import Log
from samsa.log.cleaner import CLEANER_OFFSET_CHECKPOINT
from samsa.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    build_batch,
    decode_records,
)

KEYS = [b"a", b"b", b"c", b"d", b"e", b"a-rather-long-key-" + b"x" * 60]


def put(plog: Log, key: bytes | None, value: bytes | None, ts: int = 1000, **kw: object) -> int:
    return plog.append_as_leader(
        build_batch([(key, value, [])], timestamp_ms=ts, **kw), 0
    ).first_offset  # type: ignore[arg-type]


def test_keeps_the_latest_value_of_each_key_at_its_offset(tmp_path: Path) -> None:
    clock = Clock()
    _, plog, cleaner = compacted_log(tmp_path, clock)
    for i in range(300):
        put(plog, KEYS[i % 5], b"value-%d" % i, ts=i)
    original = read_all(plog)
    boundary = plog.active_segment.base_offset
    size_before = plog.size_in_bytes
    assert cleaner.clean_filthiest_log_now()
    cleaned = read_all(plog)
    assert_subset_of(cleaned, original)
    assert view(cleaned) == view(original)
    below = [r for r in cleaned if r.offset < boundary]
    assert sorted(r.key for r in below) == sorted(KEYS[:5])  # one record per key
    assert [r for r in cleaned if r.offset >= boundary] == [
        r for r in original if r.offset >= boundary
    ]
    assert plog.size_in_bytes < size_before / 5
    checkpoint = (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text().split()
    assert checkpoint[-3:] == ["t", "0", str(boundary)]
    # Nothing new is dirty: nothing to clean.
    assert not cleaner.clean_filthiest_log_now()


def test_never_touches_the_active_segment(tmp_path: Path) -> None:
    clock = Clock()
    _, plog, cleaner = compacted_log(tmp_path, clock, with_config(segment_bytes=1 << 20))
    for i in range(50):
        put(plog, b"k", b"v%d" % i)
    before = plog.active_segment.log_path.read_bytes()
    assert not cleaner.clean_filthiest_log_now()
    assert plog.active_segment.log_path.read_bytes() == before
    plog.roll()
    assert cleaner.clean_filthiest_log_now()
    assert [r.value for r in read_all(plog)] == [b"v49"]


def test_tombstones_go_after_delete_retention(tmp_path: Path) -> None:
    clock = Clock()
    config = with_config(delete_retention_ms=10_000)
    _, plog, cleaner = compacted_log(tmp_path, clock, config)
    for i in range(40):
        put(plog, KEYS[i % 4], b"v%d" % i)
    put(plog, b"a", None)
    put(plog, b"b", None)
    plog.roll()
    assert cleaner.clean_filthiest_log_now()
    # Kept, and stamped with a delete horizon: now + delete.retention.ms.
    kept = read_all(plog)
    assert [(r.key, r.value) for r in kept if r.value is None] == [(b"a", None), (b"b", None)]
    stamped = [h for h, _ in read_batches(plog) if h.attributes & 0x40]
    assert stamped and {h.base_timestamp for h in stamped} == {clock.now + 10_000}

    clock.now += 9_999
    put(plog, b"c", b"later")
    plog.roll()
    assert cleaner.clean_filthiest_log_now()
    assert sum(r.value is None for r in read_all(plog)) == 2  # not yet

    clock.now += 2
    put(plog, b"d", b"later")
    plog.roll()
    assert cleaner.clean_filthiest_log_now()
    after = read_all(plog)
    assert all(r.value is not None for r in after)
    assert view(after) == view(kept) | {b"c": b"later", b"d": b"later"}


def test_min_cleanable_ratio_and_compaction_lags(tmp_path: Path) -> None:
    clock = Clock()
    config = with_config(min_cleanable_dirty_ratio=0.5)
    manager, plog, cleaner = compacted_log(tmp_path, clock, config)
    for i in range(100):
        put(plog, b"k%d" % i, b"v", ts=clock.now)  # all distinct: nothing to gain
    plog.roll()
    assert cleaner.clean_filthiest_log_now()  # a never-cleaned log is 100 % dirty
    for i in range(10):
        put(plog, b"k%d" % i, b"w", ts=clock.now)
    plog.roll()
    assert not cleaner.clean_filthiest_log_now()  # about 10 % dirty: below the ratio

    # max.compaction.lag.ms forces it once the oldest dirty record is old enough.
    manager.update_config("t", with_config(config, max_compaction_lag_ms=60_000))
    assert not cleaner.clean_filthiest_log_now()
    clock.now += 60_001
    assert cleaner.clean_filthiest_log_now()

    # min.compaction.lag.ms holds back segments with records newer than the lag.
    manager.update_config("t", with_config(min_compaction_lag_ms=30_000))
    for i in range(20):
        put(plog, b"k0", b"x%d" % i, ts=clock.now)
    plog.roll()
    assert not cleaner.clean_filthiest_log_now()
    clock.now += 30_001
    assert cleaner.clean_filthiest_log_now()
    assert [r.value for r in read_all(plog) if r.key == b"k0"] == [b"x19"]


def test_a_full_offset_map_cleans_in_several_rounds(tmp_path: Path) -> None:
    clock = Clock()
    # Room for about 50 keys.
    _, plog, cleaner = compacted_log(tmp_path, clock, dedupe_buffer_size=160 * 56)
    for i in range(600):
        put(plog, b"key-%03d" % (i % 150), b"v%d" % i)
    plog.roll()
    original = read_all(plog)
    rounds = 0
    while cleaner.clean_filthiest_log_now():
        rounds += 1
        assert rounds < 50
    assert rounds > 1
    cleaned = read_all(plog)
    assert_subset_of(cleaned, original)
    assert view(cleaned) == view(original)
    # Keys mapped in a later round dedupe what earlier rounds left in the clean section.
    assert len(cleaned) < len(original) / 2


def test_producer_last_batch_survives_as_an_empty_batch(tmp_path: Path) -> None:
    clock = Clock()
    _, plog, cleaner = compacted_log(tmp_path, clock)
    for seq in range(30):
        plog.append_as_leader(
            build_batch(
                [(b"k", b"p%d" % seq, [])], producer_id=7, producer_epoch=0, base_sequence=seq
            ),
            0,
        )
    last = plog.log_end_offset - 1
    for i in range(30):
        put(plog, b"k", b"plain-%d" % i)  # supersedes everything producer 7 wrote
    plog.roll()
    assert cleaner.clean_filthiest_log_now()
    batches = [h for h, _ in read_batches(plog)]
    mine = [h for h in batches if h.producer_id == 7]
    assert [(h.last_offset, h.records_count, h.base_sequence) for h in mine] == [(last, 0, 29)]
    assert [r.value for r in read_all(plog)] == [b"plain-29"]


def test_keyless_records_are_dropped(tmp_path: Path) -> None:
    clock = Clock()
    _, plog, cleaner = compacted_log(tmp_path, clock)
    for i in range(60):
        put(plog, None if i % 3 == 0 else b"k", b"v%d" % i)
    plog.roll()
    assert cleaner.clean_filthiest_log_now()
    assert [(r.key, r.value) for r in read_all(plog)] == [(b"k", b"v59")]
    assert cleaner.totals.last is not None and cleaner.totals.last.invalid_messages == 20


def test_compressed_batches_keep_their_codec(tmp_path: Path) -> None:
    clock = Clock()
    _, plog, cleaner = compacted_log(tmp_path, clock, with_config(segment_bytes=4096))
    codecs = [COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]
    for i in range(40):
        records = [(b"k%d" % j, b"v%d-%d" % (i, j) * 5, []) for j in range(i % 4, i % 4 + 5)]
        plog.append_as_leader(build_batch(records, compression=codecs[i % 4]), 0)
    plog.roll()
    original = read_all(plog)
    assert cleaner.clean_filthiest_log_now()
    assert view(read_all(plog)) == view(original)
    assert {h.compression for h, _ in read_batches(plog)} <= set(codecs)


def test_a_clean_aborts_when_its_segments_go_meanwhile(tmp_path: Path) -> None:
    clock = Clock()
    config = with_config(cleanup_policy=("compact", "delete"), retention_bytes=3000)
    manager, plog, cleaner = compacted_log(tmp_path, clock, config)
    for i in range(200):
        put(plog, b"k%d" % (i % 3), b"v%d" % i)
    plog.roll()
    steps = cleaner.clean_filthiest_log_steps()
    assert next(steps) is None  # mid-way through the offset map
    assert manager.cleanup_logs() > 0  # retention deletes segments under the cleaner
    expected = read_all(plog)
    with pytest.raises(StopIteration) as done:
        steps.send(True)  # "other work ran": the cleaner checks, and gives up
    assert done.value.value is False
    assert cleaner.totals.aborted == 1
    assert not list(plog.dir.glob("*.cleaned"))
    assert read_all(plog) == expected
    assert cleaner.clean_filthiest_log_now()  # the next round works on what is left


def test_a_read_across_a_swap_only_moves_forward(tmp_path: Path) -> None:
    clock = Clock()
    _, plog, cleaner = compacted_log(tmp_path, clock, with_config(segment_bytes=64 * 1024))
    for i in range(3000):
        put(plog, b"k%d" % (i % 40), b"value-%d-" % i + b"x" * 40)
    plog.roll()
    original = read_all(plog)
    # A fetch handed out (zero copy, as to a socket) before the clean...
    before = plog.read(0, 40_000, zero_copy=True)
    region = before.records
    assert not isinstance(region, bytes)
    assert cleaner.clean_filthiest_log_now()
    # ...still sends the bytes it named, though their segment was replaced meanwhile.
    first = decode_records(region.read())
    assert first == original[: len(first)]
    region.close()
    # The consumer goes on from where it was: what follows is newer, and the latest.
    rest = [r for r in read_all(plog) if r.offset > first[-1].offset]
    assert rest and all(r.offset > first[-1].offset for r in rest)
    assert view(first + rest) == view(original)


@pytest.mark.parametrize("phase", [1, 230])  # while mapping keys, while rewriting segments
def test_a_truncation_under_the_cleaner_stops_the_clean(tmp_path: Path, phase: int) -> None:
    clock = Clock()
    _, plog, cleaner = compacted_log(tmp_path, clock)
    for i in range(200):
        put(plog, b"k%d" % (i % 3), b"v%d" % i)
    plog.roll()
    steps = cleaner.clean_filthiest_log_steps()
    # Drive it as the broker does (each step's work done) until its `phase`-th batch.
    pauses = 0
    reply = None
    while pauses < phase:
        step = steps.send(reply)
        reply = step.fn() if step is not None else False
        pauses += step is None
    stats = cleaner.cleaner.current
    assert stats is not None and (stats.bytes_read > 0) == (phase > 1)
    # A follower truncates into the cleanable range, then takes new records at those
    # offsets and rolls: the cut segment is no longer the last, only shorter.
    cut = plog.segments[-2]
    plog.truncate_to(cut.base_offset + 2)
    for i in range(40):
        put(plog, b"k%d" % (i % 3), b"new-%d" % i)
    plog.roll()
    expected = read_all(plog)
    with pytest.raises(StopIteration) as done:
        steps.send(True)
    assert done.value.value is False and cleaner.totals.aborted == 1
    assert read_all(plog) == expected
    assert not list(plog.dir.glob("*.cleaned"))
    assert cleaner.clean_filthiest_log_now()
    assert view(read_all(plog)) == view(expected)


def test_a_truncation_rewinds_the_cleaner_checkpoint(tmp_path: Path) -> None:
    clock = Clock()
    _, plog, cleaner = compacted_log(tmp_path, clock, with_config(segment_bytes=2048))
    put(plog, b"rare", b"old")
    for i in range(299):
        put(plog, b"k%d" % (i % 3), b"v%d" % i)
    plog.roll()
    assert cleaner.clean_filthiest_log_now()
    checkpoint = tmp_path / CLEANER_OFFSET_CHECKPOINT
    assert checkpoint.read_text().split()[-3:] == ["t", "0", "300"]
    # A follower's truncation below the checkpoint: what it writes there again is dirty.
    plog.truncate_to(250)
    assert checkpoint.read_text().split()[-3:] == ["t", "0", "250"]
    put(plog, b"rare", b"new")  # offset 250, below the old checkpoint
    for i in range(300):
        put(plog, b"k%d" % (i % 3), b"again-%d" % i)
    plog.roll()
    assert cleaner.clean_filthiest_log_now()
    assert [r.value for r in read_all(plog) if r.key == b"rare"] == [b"new"]


def test_abort_and_pause(tmp_path: Path) -> None:
    clock = Clock()
    _, plog, cleaner = compacted_log(tmp_path, clock)
    for i in range(200):
        put(plog, b"k", b"v%d" % i)
    plog.roll()
    steps = cleaner.clean_filthiest_log_steps()
    next(steps)
    cleaner.abort_and_pause("t", 0)
    with pytest.raises(StopIteration):
        steps.send(True)
    assert not cleaner.clean_filthiest_log_now()  # paused
    cleaner.resume("t", 0)
    assert cleaner.clean_filthiest_log_now()


CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]

record_st = st.tuples(
    st.sampled_from([*KEYS, None]),
    st.one_of(st.none(), st.binary(min_size=1, max_size=60)),
)
batch_st = st.tuples(
    st.lists(record_st, min_size=1, max_size=6),
    st.sampled_from(CODECS),
    st.sampled_from([None, None, 1, 2]),  # producer id
    st.booleans(),  # roll after this batch
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(batches=st.lists(batch_st, min_size=1, max_size=40), roll_at_end=st.booleans())
def test_any_history_keeps_latest_per_key_at_unchanged_offsets(
    batches: list, roll_at_end: bool
) -> None:
    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        _, plog, cleaner = compacted_log(Path(tmp), clock, with_config(segment_bytes=600))
        sequences: dict[int, int] = defaultdict(int)
        last_of: dict[int, int] = {}
        for records, codec, pid, roll in batches:
            kw = {}
            if pid is not None:
                kw = {"producer_id": pid, "producer_epoch": 0, "base_sequence": sequences[pid]}
                sequences[pid] += len(records)
            info = plog.append_as_leader(
                build_batch(
                    [(k, v, [("h", k)]) for k, v in records],
                    timestamp_ms=clock.now,
                    compression=codec,
                    **kw,
                ),
                0,
            )
            if pid is not None:
                last_of[pid] = info.last_offset
            clock.now += 1
            if roll:
                plog.roll()
        if roll_at_end:
            plog.roll()
        original = read_all(plog)
        boundary = plog.active_segment.base_offset

        cleaner.clean_filthiest_log_now()
        cleaned = read_all(plog)
        assert_subset_of(cleaned, original)
        assert view(cleaned) == view(original)
        # Below the active segment: exactly the last record of each key (tombstones are
        # kept: their delete horizon has not passed); keyless records go.
        last_below = {
            r.key: r.offset for r in original if r.offset < boundary and r.key is not None
        }
        assert sorted(r.offset for r in cleaned if r.offset < boundary) == sorted(
            last_below.values()
        )
        assert [r for r in cleaned if r.offset >= boundary] == [
            r for r in original if r.offset >= boundary
        ]
        # Each producer's last batch is still there (maybe empty), offsets intact.
        ends = {h.producer_id: h.last_offset for h, _ in read_batches(plog) if h.producer_id >= 0}
        assert ends == last_of

        # Past the delete horizon, the next clean drops the tombstones the first one kept
        # (those it sees for the first time only get their horizon now).
        clock.now += COMPACTED.delete_retention_ms + 1
        put(plog, b"z", b"z", ts=clock.now)
        plog.roll()
        assert cleaner.clean_filthiest_log_now()
        final = read_all(plog)
        assert_subset_of(final, original + [r for r in final if r.key == b"z"])
        assert view(final) == view(original) | {b"z": b"z"}
        assert not [r for r in final if r.value is None and r.offset < boundary]


def test_aborted_transactions_are_cleaned_away_and_markers_go_after_the_horizon(
    tmp_path: Path,
) -> None:
    from samsa.log.producer_state import AppendOrigin
    from samsa.protocol.control import build_end_txn_marker, read_end_txn_marker
    from samsa.protocol.record_filter import delete_horizon

    clock = Clock()
    _, plog, cleaner = compacted_log(tmp_path, clock)

    def txn(pid: int, seq: int, key: bytes, value: bytes) -> int:
        batch = build_batch(
            [(key, value, [])],
            timestamp_ms=1000,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            transactional=True,
        )
        return plog.append_as_leader(batch, 0).first_offset

    def end(pid: int, committed: bool) -> int:
        marker = build_end_txn_marker(pid, 0, committed, 0, 1000)
        return plog.append_as_leader(marker, 0, origin=AppendOrigin.COORDINATOR).first_offset

    def filler(n: int = 60) -> None:
        for i in range(n):
            put(plog, b"filler-%d" % (i % 3), b"x" * 20)

    def markers() -> dict[int, tuple[bool, int | None]]:
        out = {}
        for h, b in read_batches(plog):
            if h.is_control and h.records_count:
                m = read_end_txn_marker(b, 0, h)
                assert m is not None
                out[h.base_offset] = (m.committed, delete_horizon(h))
        return out

    txn(1, 0, b"a", b"committed")
    commit_at = end(1, True)
    aborted_at = txn(2, 0, b"a", b"aborted")
    txn(2, 1, b"b", b"aborted")
    abort_at = end(2, False)
    txn(3, 0, b"c", b"other")
    end(3, True)
    # Producer 2 writes on, so its aborted batch is not its last (which would stay, empty,
    # and keep its marker with it, as in Kafka).
    txn(2, 2, b"d", b"later")
    end(2, True)
    filler()
    entries = plog.collect_aborted_txns(0, plog.log_end_offset)
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in entries] == [
        (2, aborted_at, abort_at)
    ]
    assert cleaner.clean_filthiest_log_now()
    batches = read_batches(plog)
    data = [r for h, b in batches if not h.is_control for r in decode_records(b)]
    assert view(data)[b"a"] == b"committed", "an aborted value never wins over a committed one"
    assert b"aborted" not in {r.value for r in data}
    # The transactions' batches were read in this clean: every marker stays as it was.
    assert set(markers().values()) == {(True, None), (False, None)}
    assert len(markers()) == 4
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == entries

    # Next clean: the aborted transaction has no batch left, so its marker gets a horizon;
    # the committed ones still have records ("a", "c"), so theirs stay as they are.
    filler()
    assert cleaner.clean_filthiest_log_now()
    assert markers()[abort_at] == (False, clock.now + COMPACTED.delete_retention_ms)
    assert markers()[commit_at] == (True, None)
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == entries

    # After the horizon the abort marker goes, and its index entry with it.
    clock.now += COMPACTED.delete_retention_ms + 1
    filler()
    assert cleaner.clean_filthiest_log_now()
    assert abort_at not in markers() and commit_at in markers()
    assert plog.collect_aborted_txns(0, plog.log_end_offset) == []
