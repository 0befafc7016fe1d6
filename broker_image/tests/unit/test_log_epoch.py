"""LeaderEpochCache semantics and Kafka's checkpoint file formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.log import CorruptCheckpointError, EpochEntry, LeaderEpochCache, OffsetCheckpointFile


def cache(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    c = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, offset in entries:
        c.assign(epoch, offset)
    return c


def test_assign_and_latest(tmp_path: Path) -> None:
    c = cache(tmp_path)
    assert c.latest_epoch is None and c.latest_entry is None
    assert c.assign(1, 0)
    assert not c.assign(1, 5)  # same epoch, later offset: nothing new
    assert c.assign(3, 10)
    assert c.entries == [EpochEntry(1, 0), EpochEntry(3, 10)]
    assert c.latest_epoch == 3
    assert not c.assign(-1, 20)


def test_assign_replaces_conflicting_entries(tmp_path: Path) -> None:
    c = cache(tmp_path, (1, 0), (3, 10), (5, 20))
    c.assign(4, 15)
    assert c.entries == [EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(4, 15)]
    c.assign(6, 12)
    assert c.entries == [EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(6, 12)]


def test_end_offset_for(tmp_path: Path) -> None:
    c = cache(tmp_path, (2, 10), (4, 30), (7, 50))
    assert c.end_offset_for(7, 99) == (7, 99)  # the current epoch ends at the log end
    assert c.end_offset_for(4, 99) == (4, 50)
    assert c.end_offset_for(5, 99) == (4, 50)  # unknown epoch: the one before it
    assert c.end_offset_for(1, 99) == (1, 10)  # older than anything known
    assert c.end_offset_for(8, 99) == (-1, -1)
    assert c.end_offset_for(-1, 99) == (-1, -1)
    assert cache(tmp_path / "x").end_offset_for(3, 9) == (-1, -1)
    assert c.epoch_for_offset(35) == 4
    assert c.epoch_for_offset(5) is None


def test_truncation(tmp_path: Path) -> None:
    c = cache(tmp_path, (2, 10), (4, 30), (7, 50))
    c.truncate_from_end(30)
    assert c.entries == [EpochEntry(2, 10)]
    c = cache(tmp_path, (2, 10), (4, 30), (7, 50))
    c.truncate_from_start(35)
    assert c.entries == [EpochEntry(4, 35), EpochEntry(7, 50)]
    c.truncate_from_start(5)
    assert c.entries == [EpochEntry(4, 35), EpochEntry(7, 50)]
    c.clear()
    assert c.entries == []


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    c = cache(tmp_path, (0, 0), (2, 17), (5, 40))
    assert not path.exists()  # written on flush, not on every change
    c.flush()
    assert path.read_text() == "0\n3\n0 0\n2 17\n5 40\n"
    assert LeaderEpochCache(path).entries == c.entries
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    "text", ["", "1\n0\n", "0\n2\n1 0\n", "0\n1\n1\n", "0\nx\n", "0\n2\n5 10\n3 20\n"]
)
def test_corrupt_epoch_checkpoint_is_ignored(tmp_path: Path, text: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    c = LeaderEpochCache(path)
    assert c.entries == []
    c.flush()  # and replaced by a good one
    assert path.read_text() == "0\n0\n"


def test_offset_checkpoint_file(tmp_path: Path) -> None:
    f = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    assert f.read() is None
    f.write({("b-topic", 1): 7, ("a.topic-x", 0): 12})
    assert f.path.read_text() == "0\n2\na.topic-x 0 12\nb-topic 1 7\n"
    assert f.read() == {("a.topic-x", 0): 12, ("b-topic", 1): 7}
    f.write({})
    assert f.read() == {}


@pytest.mark.parametrize("text", ["0\n1\n", "0\n1\nt 0\n", "0\n1\nt x 3\n", "7\n0\n", "garbage"])
def test_corrupt_offset_checkpoint(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError, match="cp"):
        OffsetCheckpointFile(path).read()
