"""Log: offsets, reads across segments, timestamps, retention, truncation, reopening."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.config.topic import LogConfig
from samsa.log import Log, OffsetOutOfRangeError, UnexpectedAppendOffsetError
from samsa.protocol.record_batch import (
    COMPRESSION_LZ4,
    LOG_APPEND_TIME,
    build_batch,
    decode_records,
    read_batch_header,
    scan_batches,
    validate_batches,
)

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=200)


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(n: int = 3, ts: int = 1000, size: int = 30, **kwargs: object) -> bytes:
    return build_batch([(None, b"v" * size, [])] * n, timestamp_ms=ts, **kwargs)


def open_log(tmp_path: Path, config: LogConfig = SMALL, **kwargs: object) -> Log:
    return Log.open(tmp_path / "my-topic-7", config, **kwargs)


def fill(plog: Log, batches: int, n: int = 3, ts: int = 1000) -> None:
    for i in range(batches):
        plog.append_as_leader(batch(n, ts + i), leader_epoch=0)


def offsets_of(data: bytes) -> list[int]:
    return [r.offset for r in decode_records(data)]


def test_partition_dir_name(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    assert (plog.topic, plog.partition) == ("my-topic", 7)
    assert plog.dir == tmp_path / "my-topic-7"
    assert [s.base_offset for s in plog.segments] == [0]
    assert plog.log_end_offset == plog.log_start_offset == 0
    with pytest.raises(ValueError):
        Log.open(tmp_path / "no_partition", SMALL)


def test_offsets_are_consecutive_across_segments(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    expected_first = 0
    for i in range(60):
        data = batch(1 + i % 4)
        headers = validate_batches(data, SMALL.max_message_bytes)
        info = plog.append_as_leader(data, leader_epoch=2, headers=headers)
        assert info.first_offset == expected_first
        assert info.num_messages == 1 + i % 4
        assert info.last_offset == expected_first + info.num_messages - 1
        assert info.valid_bytes == len(data)
        assert info.log_append_time == -1
        expected_first += info.num_messages
    assert plog.log_end_offset == expected_first
    assert len(plog.segments) > 5
    bases = [s.base_offset for s in plog.segments]
    assert bases == sorted(bases) and bases[0] == 0
    assert all(s.size <= 1024 for s in plog.segments)
    for name in ("00000000000000000000.log", "00000000000000000000.index"):
        assert (plog.dir / name).exists()
    # Every stored batch has its offsets and the leader epoch stamped in.
    seen: list[int] = []
    for segment in plog.segments:
        data = segment.log_path.read_bytes()
        for _, h in scan_batches(data):
            assert h.partition_leader_epoch == 2
        seen += offsets_of(data)
    assert seen == list(range(expected_first))
    assert plog.size_in_bytes == sum(s.log_path.stat().st_size for s in plog.segments)


def test_read_from_every_offset(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 40)
    end = plog.log_end_offset
    for offset in range(end):
        info = plog.read(offset, 300)
        got = offsets_of(info.records)
        assert got, offset
        # The batch holding the fetch offset comes first; nothing wholly below it.
        assert got[0] <= offset <= got[2]
        assert info.first_batch_offset == got[0]
        assert len(info.records) <= 300
        for _, h in scan_batches(info.records):
            assert h.last_offset >= offset
    assert plog.read(end, 100).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(end + 1, 100)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(-1, 100)


def test_sequential_consumption(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 50)
    offset, seen = 0, []
    while offset < plog.log_end_offset:
        got = offsets_of(plog.read(offset, 500).records)
        seen += [o for o in got if o >= offset]
        offset = got[-1] + 1
    assert seen == list(range(150))


def test_read_respects_max_offset_max_bytes_and_min_one_message(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig())
    fill(plog, 10)
    size = read_batch_header(plog.read(0, 10**6).records).size
    assert offsets_of(plog.read(0, 10**6, max_offset=9).records) == list(range(9))
    assert offsets_of(plog.read(3, 10**6, max_offset=10).records) == list(range(3, 9))
    assert plog.read(9, 10**6, max_offset=9).records == b""
    assert len(plog.read(0, size * 3 + 5).records) == size * 3
    assert len(plog.read(0, size - 1, min_one_message=True).records) == size
    assert plog.read(0, size - 1, min_one_message=False).records == b""
    big = batch(2, size=5000)
    plog.append_as_leader(big, 0)
    assert len(plog.read(30, 100).records) == len(big)
    assert plog.read(30, 100, min_one_message=False).records == b""


def test_read_skips_to_the_next_segment(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 5)
    plog.roll()
    plog.roll()  # an empty active segment is reused, not rolled again
    assert len(plog.segments) == 2
    fill(plog, 5)
    info = plog.read(15, 10**6)
    assert info.segment_base_offset == 15
    assert offsets_of(info.records)[0] == 15
    # A read stays within one segment.
    assert offsets_of(plog.read(0, 10**6).records) == list(range(15))


def test_offset_for_timestamp_finds_the_exact_record(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(30):
        # Timestamps rise across batches but not monotonically within one.
        ts = [10_000 + i * 10 + d for d in (5, 0, 9, 3)]
        plog.append_as_leader(
            build_batch([(None, b"x" * 20, [])] * 4, timestamps=ts, compression=COMPRESSION_LZ4),
            0,
        )
    assert len(plog.segments) > 2
    assert plog.offset_for_timestamp(0) == (0, 10_005)
    assert plog.offset_for_timestamp(10_006) == (2, 10_009)
    assert plog.offset_for_timestamp(10_010) == (4, 10_015)
    assert plog.offset_for_timestamp(10_012) == (4, 10_015)
    assert plog.offset_for_timestamp(10_150) == (60, 10_155)
    assert plog.offset_for_timestamp(10_299) == (118, 10_299)
    assert plog.offset_for_timestamp(10_300) is None
    assert plog.latest_timestamp_offset() == (118, 10_299)


def test_log_append_time(tmp_path: Path) -> None:
    clock = Clock(77_000)
    plog = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"), now_ms=clock)
    info = plog.append_as_leader(batch(3, ts=5), 0)
    assert info.log_append_time == 77_000
    assert info.max_timestamp == 77_000
    assert info.offset_of_max_timestamp == 0
    clock.now = 78_000
    plog.append_as_leader(batch(2, ts=5), 0)
    data = plog.read(0, 10**6).records
    validate_batches(data, 10**6)
    headers = [h for _, h in scan_batches(data)]
    assert [h.timestamp_type for h in headers] == [LOG_APPEND_TIME] * 2
    assert [r.timestamp for r in decode_records(data)] == [77_000] * 3 + [78_000] * 2
    assert plog.offset_for_timestamp(77_500) == (3, 78_000)
    assert plog.latest_timestamp_offset() == (3, 78_000)


def test_retention_by_size(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(segment_bytes=1024, retention_bytes=2500, retention_ms=-1))
    fill(plog, 60)
    sizes = [s.size for s in plog.segments]
    total = sum(sizes)
    deleted = plog.delete_old_segments()
    assert deleted > 0
    # Kafka deletes only while the log stays at or above retention.bytes.
    assert plog.size_in_bytes - plog.segments[0].size < 2500 <= plog.size_in_bytes
    assert plog.size_in_bytes == total - sum(sizes[:deleted])
    assert plog.log_start_offset == plog.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(plog.log_start_offset - 1, 100)
    assert offsets_of(plog.read(plog.log_start_offset, 100).records)[0] == plog.log_start_offset
    assert plog.delete_old_segments() == 0


def test_retention_by_time(tmp_path: Path) -> None:
    clock = Clock(100_000)
    plog = open_log(tmp_path, LogConfig(segment_bytes=1024, retention_ms=10_000), now_ms=clock)
    fill(plog, 20, ts=50_000)  # old
    old_segments = len(plog.segments)
    plog.roll()
    fill(plog, 5, ts=95_000)  # recent
    assert plog.delete_old_segments() == old_segments
    assert plog.log_start_offset == 60
    assert [s.base_offset for s in plog.segments] == [60]
    # Once everything has expired the active segment goes too, after a roll.
    clock.now = 200_000
    assert plog.delete_old_segments() == 1
    assert plog.log_start_offset == plog.log_end_offset == 75
    assert len(plog.segments) == 1 and plog.active_segment.size == 0
    assert plog.read(75, 100).records == b""
    assert plog.append_as_leader(batch(), 0).first_offset == 75
    remaining = [p.name for p in plog.dir.iterdir() if p.suffix == ".log"]
    assert remaining == ["00000000000000000075.log"]
    assert not [p for p in plog.dir.iterdir() if p.name.endswith(".deleted")]


def test_retention_never_passes_the_high_watermark(tmp_path: Path) -> None:
    clock = Clock(10**9)
    plog = open_log(tmp_path, LogConfig(segment_bytes=1024, retention_ms=0), now_ms=clock)
    fill(plog, 20, ts=0)
    second = plog.segments[1].base_offset
    assert plog.delete_old_segments(high_watermark=second) == 1
    assert plog.log_start_offset == second


def test_delete_records_then_retention(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig(segment_bytes=1024, cleanup_policy=("compact",)))
    fill(plog, 30)
    third = plog.segments[2].base_offset
    assert plog.maybe_increment_log_start_offset(third + 1)
    assert not plog.maybe_increment_log_start_offset(third)
    assert plog.log_start_offset == third + 1
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(third, 100)
    assert plog.delete_old_segments() == 2
    assert plog.log_start_offset == third + 1
    with pytest.raises(OffsetOutOfRangeError):
        plog.maybe_increment_log_start_offset(plog.log_end_offset + 1)


def test_reopen_after_clean_close(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 40)
    end = plog.log_end_offset
    before = [plog.read(o, 10**6).records for o in range(0, end, 7)]
    plog.flush()
    plog.close()
    for kwargs in ({"recovery_point": end, "clean_shutdown": True}, {"recovery_point": 0}):
        again = open_log(tmp_path, **kwargs)
        assert again.log_end_offset == end
        assert again.recovery_point == (end if kwargs.get("clean_shutdown") else 0)
        assert [again.read(o, 10**6).records for o in range(0, end, 7)] == before
        assert again.offset_for_timestamp(1020) == (60, 1020)
        assert again.append_as_leader(batch(), 0).first_offset == end
        again.truncate_to(end)
        again.close()


def test_flush_moves_the_recovery_point(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 10)
    assert plog.recovery_point == 0
    assert plog.unflushed_messages == 30
    plog.flush(12)
    assert plog.recovery_point == 12
    plog.flush()
    assert plog.recovery_point == plog.log_end_offset == 30
    assert plog.unflushed_messages == 0


def test_truncate_to(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 30)
    plog.flush()
    assert not plog.truncate_to(90)
    assert plog.truncate_to(45)
    assert plog.log_end_offset == 45
    assert plog.recovery_point == 45
    assert all(s.base_offset <= 45 for s in plog.segments)
    assert offsets_of(plog.read(42, 10**6).records) == [42, 43, 44]
    assert plog.append_as_leader(batch(), 0).first_offset == 45
    assert offsets_of(plog.read(45, 10**6).records) == [45, 46, 47]
    plog.truncate_fully_and_start_at(500)
    assert plog.log_start_offset == plog.log_end_offset == 500
    assert [s.base_offset for s in plog.segments] == [500]
    assert plog.append_as_leader(batch(), 0).first_offset == 500


def test_follower_append_keeps_offsets(tmp_path: Path) -> None:
    leader = open_log(tmp_path)
    for epoch in (1, 1, 2, 4):
        leader.append_as_leader(batch(), epoch)
    data = leader.read(0, 10**6).records
    follower = Log.open(tmp_path / "replica" / "my-topic-7", SMALL)
    info = follower.append_as_follower(data + data[:30])  # a partial tail is ignored
    assert (info.first_offset, info.last_offset, info.num_messages) == (0, 11, 12)
    assert follower.log_end_offset == 12
    assert follower.read(0, 10**6).records == data
    assert [tuple(e) for e in follower.leader_epoch_cache.entries] == [(1, 0), (2, 6), (4, 9)]
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data)
    assert follower.append_as_follower(b"").first_offset == -1


def test_leader_epoch_cache_follows_appends(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append_as_leader(batch(), 3)
    plog.append_as_leader(batch(), 3)
    plog.append_as_leader(batch(), 5)
    assert [tuple(e) for e in plog.leader_epoch_cache.entries] == [(3, 0), (5, 6)]
    assert plog.end_offset_for_epoch(3) == (3, 6)
    assert plog.end_offset_for_epoch(5) == (5, 9)
    assert plog.end_offset_for_epoch(4) == (3, 6)
    plog.flush()
    assert (plog.dir / "leader-epoch-checkpoint").read_text() == "0\n2\n3 0\n5 6\n"
    plog.truncate_to(4)
    assert [tuple(e) for e in plog.leader_epoch_cache.entries] == [(3, 0)]


def test_append_listener_sees_final_headers(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    seen = []
    plog.append_listener = lambda info, headers: seen.append(
        (info.first_offset, [h.base_offset for h in headers])
    )
    plog.append_as_leader(batch(2) + batch(3), 0)
    assert seen == [(0, [0, 2])]


def test_update_config(tmp_path: Path) -> None:
    plog = open_log(tmp_path, LogConfig())
    fill(plog, 5)
    plog.update_config(SMALL)
    assert plog.config is SMALL
    fill(plog, 20)
    assert len(plog.segments) > 1


def test_delete(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 5)
    plog.delete()
    assert not (tmp_path / "my-topic-7").exists()


def test_large_batches_are_written_without_copying_and_stay_valid(tmp_path: Path) -> None:
    # Batches over 4 KB go through the vectored write: patched header copies plus the
    # untouched rest of the producer's bytes.
    plog = open_log(tmp_path, LogConfig(segment_bytes=1 << 20))
    values = [bytes([i]) * 6000 for i in range(5)]
    request = b"".join(build_batch([(b"k", v, [])], base_offset=0) for v in values)
    info = plog.append_as_leader(memoryview(request), leader_epoch=7)
    assert (info.first_offset, info.last_offset) == (0, 4)
    data = plog.read(0, 1 << 20).records
    assert isinstance(data, bytes)
    headers = validate_batches(data, 1 << 20)  # every CRC still holds
    assert [h.base_offset for h in headers] == [0, 1, 2, 3, 4]
    assert {h.partition_leader_epoch for h in headers} == {7}
    assert [r.value for r in decode_records(data)] == values
    plog.close()
