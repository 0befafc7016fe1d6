"""LogSegment: appending batches, reading whole batches back, indexing, roll conditions."""

from __future__ import annotations

from pathlib import Path

from samsa.config.topic import LogConfig
from samsa.log import LogSegment
from samsa.protocol.record_batch import BatchHeader, build_batch, decode_records, validate_batches


def batch(base: int, n: int = 2, ts: int = 1000, size: int = 40) -> tuple[bytes, BatchHeader]:
    data = build_batch([(None, b"x" * size, [])] * n, base_offset=base, timestamp_ms=ts)
    return data, validate_batches(data, 1 << 20)[0]


def filled(tmp_path: Path, count: int = 20, **config: int) -> LogSegment:
    cfg = LogConfig(index_interval_bytes=config.pop("index_interval_bytes", 150), **config)
    segment = LogSegment.create(tmp_path, 100, cfg, now_ms=0)
    for i in range(count):
        data, h = batch(100 + i * 2, ts=1000 + i)
        segment.append(data, [h])
    return segment


def test_append_and_read_back(tmp_path: Path) -> None:
    segment = filled(tmp_path)
    assert segment.next_offset == 140
    assert segment.size == segment.log_path.stat().st_size
    assert segment.offset_index.entries > 3
    for offset in range(100, 140):
        info = segment.read(offset, 1 << 20)
        assert info is not None
        records = decode_records(info.records)
        assert records[0].offset <= offset <= records[1].offset
        assert info.first_batch_offset == offset - offset % 2
        assert [r.offset for r in records] == list(range(info.first_batch_offset, 140))
    assert segment.read(140, 1000) is None


def test_read_returns_whole_batches_within_max_bytes(tmp_path: Path) -> None:
    segment = filled(tmp_path)
    one = batch(0)[1].size
    for max_bytes in range(one - 1, one * 5 + 3):
        info = segment.read(104, max_bytes, min_one_message=False)
        assert info is not None
        assert len(info.records) == (max_bytes // one) * one
        validate_batches(info.records, 1 << 20) if info.records else None
    info = segment.read(104, 1, min_one_message=True)
    assert info is not None and len(info.records) == one
    info = segment.read(104, 0, min_one_message=False)
    assert info is not None and info.records == b""


def test_read_stops_before_max_offset(tmp_path: Path) -> None:
    segment = filled(tmp_path)
    info = segment.read(100, 1 << 20, max_offset=110)
    assert info is not None
    assert [r.offset for r in decode_records(info.records)] == list(range(100, 110))
    # The batch holding max_offset is left out entirely.
    info = segment.read(100, 1 << 20, max_offset=111)
    assert info is not None
    assert decode_records(info.records)[-1].offset == 109
    info = segment.read(110, 1 << 20, max_offset=111)
    assert info is not None and info.records == b""


def test_timestamp_lookup(tmp_path: Path) -> None:
    segment = filled(tmp_path)
    assert segment.max_timestamp_so_far == 1019
    assert segment.offset_of_max_timestamp_so_far == 139
    assert segment.find_offset_by_timestamp(0, 100) == (100, 1000)
    assert segment.find_offset_by_timestamp(1007, 100) == (114, 1007)
    assert segment.find_offset_by_timestamp(1007, 115) == (115, 1007)
    assert segment.find_offset_by_timestamp(1020, 100) is None
    assert segment.find_max_timestamp_record() == (138, 1019)


def test_seal_trims_indexes_and_reads_through_mmap(tmp_path: Path) -> None:
    segment = filled(tmp_path)
    entries = segment.offset_index.entries
    segment.seal()
    assert segment.offset_index.path.stat().st_size == entries * 8
    assert segment.time_index.path.stat().st_size == segment.time_index.entries * 12
    assert not segment.offset_index.mutable
    info = segment.read(121, 1 << 20)
    assert info is not None and info.first_batch_offset == 120
    segment.close()


def test_should_roll(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1000, segment_ms=10_000, segment_index_bytes=8 * 4)
    segment = LogSegment.create(tmp_path, 0, cfg, now_ms=500)
    # Empty: never by size or age, even for a batch larger than segment.bytes.
    assert not segment.should_roll(5000, 10**9, 0, 10**9, cfg)
    assert segment.should_roll(10, 0, 2**31, 0, cfg)  # relative offset overflow
    data, h = batch(0, ts=-1)
    segment.append(data, [h])
    assert not segment.should_roll(1000 - segment.size, -1, 5, 500, cfg)
    assert segment.should_roll(1000 - segment.size + 1, -1, 5, 500, cfg)
    # No timestamps: age by creation time.
    assert not segment.should_roll(1, -1, 5, 10_500, cfg)
    assert segment.should_roll(1, -1, 5, 10_501, cfg)
    # With timestamps: age by the incoming batch against the first batch's timestamp.
    stamped = LogSegment.create(tmp_path, 1000, cfg, now_ms=0)
    data, h = batch(1000, ts=50_000)
    stamped.append(data, [h])
    assert not stamped.should_roll(1, 60_000, 1005, 10**12, cfg)
    assert stamped.should_roll(1, 60_001, 1005, 0, cfg)


def test_roll_when_index_full(tmp_path: Path) -> None:
    cfg = LogConfig(segment_index_bytes=16, index_interval_bytes=0)
    segment = LogSegment.create(tmp_path, 0, cfg, now_ms=0)
    base = 0
    while not segment.should_roll(10, 0, base, 0, cfg):
        data, h = batch(base)
        segment.append(data, [h])
        base += 2
    assert segment.offset_index.is_full or segment.time_index.is_full


def test_truncate_to(tmp_path: Path) -> None:
    segment = filled(tmp_path)
    size_at_120 = segment.translate_offset(120)
    assert size_at_120 is not None
    dropped = segment.truncate_to(121)  # mid-batch: the whole batch 120-121 goes
    assert segment.size == size_at_120[0]
    assert dropped > 0
    assert segment.next_offset == 120
    assert segment.max_timestamp_so_far == 1009
    assert segment.offset_index.last_offset < 120
    data, h = batch(120, ts=2000)
    segment.append(data, [h])
    info = segment.read(120, 1 << 20)
    assert info is not None
    assert [r.timestamp for r in decode_records(info.records)] == [2000, 2000]


def test_reads_at_the_tail_find_what_a_walk_of_the_file_finds(tmp_path: Path) -> None:
    """The batches kept from the last appends answer reads as the index and a walk of the
    headers do, across index entries, a truncation and the appends after it."""
    segment = filled(tmp_path, count=40, index_interval_bytes=300)

    def answers() -> list[object]:
        out: list[object] = []
        end = segment.next_offset
        for offset in range(90, end + 3):
            found = segment.translate_offset(offset)
            out.append(None if found is None else (found[0], found[1].base_offset))
            for bound in (end - 3, end):
                info = segment.read(offset, 1 << 20, max_offset=bound)
                out.append(None if info is None else (bytes(info.records), info.next_offset))
        return out

    def checked() -> None:
        assert segment._tail, "appends keep a tail"
        with_tail = answers()
        kept, segment._tail = segment._tail, []  # the index and the walk alone
        assert answers() == with_tail
        segment._tail = kept

    checked()
    segment.truncate_to(151)
    assert segment.next_offset == 150
    assert segment.translate_offset(150) is None
    for i in range(25, 60):
        data, h = batch(100 + i * 2, n=2)
        segment.append(data, [h])
    checked()
