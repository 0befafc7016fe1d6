"""OffsetIndex and TimeIndex: lookups, ordering, capacity, files on disk, reloading."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from samsa.log import InvalidOffsetError, OffsetIndex, TimeIndex


def offset_index(tmp_path: Path, base: int = 100, max_size: int = 80) -> OffsetIndex:
    index = OffsetIndex(tmp_path / f"{base:020d}.index", base, max_size)
    index.create()
    return index


def time_index(tmp_path: Path, base: int = 100, max_size: int = 60) -> TimeIndex:
    index = TimeIndex(tmp_path / f"{base:020d}.timeindex", base, max_size)
    index.create()
    return index


def test_offset_index_lookup(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    assert index.lookup(150) == (100, 0)
    for offset, position in [(103, 50), (107, 120), (110, 300)]:
        index.append(offset, position)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(102) == (100, 0)
    assert index.lookup(103) == (103, 50)
    assert index.lookup(106) == (103, 50)
    assert index.lookup(107) == (107, 120)
    assert index.lookup(10_000) == (110, 300)
    assert index.lookup_position(0) == (100, 0)
    assert index.lookup_position(119) == (103, 50)
    assert index.lookup_position(120) == (107, 120)
    assert index.lookup_position(5000) == (110, 300)
    assert index.last_offset == 110
    assert index.entry(1) == (107, 120)


def test_offset_index_requires_increasing_offsets(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(105, 10)
    with pytest.raises(InvalidOffsetError):
        index.append(105, 20)
    with pytest.raises(InvalidOffsetError):
        index.append(104, 20)


def test_offset_index_full(tmp_path: Path) -> None:
    index = offset_index(tmp_path, max_size=30)  # rounded down to 3 entries
    assert index.max_entries == 3
    assert (tmp_path / f"{100:020d}.index").stat().st_size == 24
    for i in range(3):
        assert not index.is_full
        index.append(101 + i, i * 10)
    assert index.is_full
    with pytest.raises(InvalidOffsetError, match="full"):
        index.append(200, 100)


def test_offset_index_truncate(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 6):
        index.append(100 + i * 10, i * 100)
    index.truncate_to(130)
    assert index.entries == 2
    assert index.lookup(1000) == (120, 200)
    index.truncate_to(0)
    assert index.entries == 0


def test_offset_index_trim_and_reload(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    path = index.path
    assert path.stat().st_size == 80  # preallocated
    index.append(105, 40)
    index.append(110, 90)
    index.flush(fsync=False)
    assert path.stat().st_size == 80
    index.trim()
    assert path.read_bytes() == struct.pack(">iiii", 5, 40, 10, 90)
    reloaded = OffsetIndex(path, 100, 80)
    assert reloaded.load(mutable=False, log_size=1000, offset_limit=None) is None
    assert reloaded.entries == 2
    assert reloaded.lookup(109) == (105, 40)
    reloaded.make_mutable()
    assert path.stat().st_size == 80  # the active segment's index is preallocated again
    reloaded.append(120, 200)
    reloaded.close()


def test_untrimmed_index_drops_zero_slots(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    index.append(105, 40)
    index.flush(fsync=False)
    for mutable in (True, False):
        reloaded = OffsetIndex(index.path, 100, 80)
        assert reloaded.load(mutable=mutable, log_size=1000, offset_limit=None) is None
        assert reloaded.entries == 1
        reloaded.close()


def test_flush_after_truncate_clears_stale_entries(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 5):
        index.append(100 + i, i * 10)
    index.flush(fsync=False)
    index.truncate_to(102)
    index.flush(fsync=False)
    reloaded = OffsetIndex(index.path, 100, 80)
    assert reloaded.load(mutable=True, log_size=1000, offset_limit=None) is None
    assert reloaded.entries == 1


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (struct.pack(">iiii", 5, 40, 3, 90), "offsets that do not increase"),
        (struct.pack(">iiii", 5, 40, 7, 30), "positions that do not increase"),
        (struct.pack(">ii", 5, 40) + b"\x01\x02", "not a multiple"),
        (struct.pack(">ii", 5, 4000), "beyond the log"),
    ],
)
def test_corrupt_offset_index_detected(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(content)
    index = OffsetIndex(path, 100, 80)
    assert problem in (index.load(mutable=False, log_size=1000, offset_limit=None) or "")
    assert index.entries == 0


def test_missing_index_detected(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "nope.index", 0, 80)
    assert index.quick_check(100, None) == "is missing"
    assert index.load(mutable=True, log_size=100, offset_limit=None) == "is missing"


def test_quick_check(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(struct.pack(">iiii", 1, 0, 5, 500))
    index = OffsetIndex(path, 0, 80)
    assert index.quick_check(1000, None) is None
    assert "beyond the log" in (index.quick_check(400, None) or "")
    assert "beyond the segment" in (index.quick_check(1000, 5) or "")


def test_time_index_appends_only_new_maximum(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    assert index.last_entry == (-1, 100)
    index.maybe_append(1000, 101)
    index.maybe_append(1000, 102)  # same timestamp: nothing new
    index.maybe_append(2000, 105)
    assert index.entries == 2
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(3000, 104)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(1500, 106)
    assert index.lookup(999) == (-1, 100)
    assert index.lookup(1000) == (1000, 101)
    assert index.lookup(1999) == (1000, 101)
    assert index.lookup(5000) == (2000, 105)


def test_time_index_keeps_a_slot_for_the_roll_entry(tmp_path: Path) -> None:
    index = time_index(tmp_path, max_size=40)  # 3 entries
    index.maybe_append(1, 101)
    index.maybe_append(2, 102)
    assert index.is_full
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(3, 103)
    index.maybe_append(3, 103, skip_full_check=True)
    assert index.entries == 3
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(4, 104, skip_full_check=True)


def test_time_index_truncate_trim_reload(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    for i in range(1, 5):
        index.maybe_append(i * 1000, 100 + i * 2)
    index.truncate_to(105)
    assert index.last_entry == (2000, 104)
    index.trim()
    assert index.path.stat().st_size == 24
    reloaded = TimeIndex(index.path, 100, 60)
    assert reloaded.read_last_entry() == (2000, 4)
    assert reloaded.load(mutable=False, log_size=0, offset_limit=105) is None
    assert reloaded.lookup(1500) == (1000, 102)
    bad = TimeIndex(index.path, 100, 60)
    assert "beyond the segment" in (bad.load(mutable=False, log_size=0, offset_limit=104) or "")


def test_corrupt_time_index_detected(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    path.write_bytes(struct.pack(">qiqi", 2000, 1, 1000, 2))
    index = TimeIndex(path, 0, 60)
    assert "timestamps" in (index.load(mutable=False, log_size=0, offset_limit=None) or "")


def test_zero_entry_survives_trim(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    index.maybe_append(0, 100)  # timestamp 0 at the base offset: all-zero bytes
    index.trim()
    reloaded = TimeIndex(index.path, 100, 60)
    assert reloaded.read_last_entry() == (0, 0)
    assert reloaded.load(mutable=False, log_size=0, offset_limit=None) is None
    assert reloaded.last_entry == (0, 100)
