"""Opening a partition after a crash: torn tails, corrupt batches, broken indexes, leftovers."""

from __future__ import annotations

import logging
import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from samsa.config.topic import LogConfig
from samsa.log import Log
from samsa.protocol.record_batch import build_batch, decode_records, scan_batches

CONFIG = LogConfig(
    segment_bytes=1500, index_interval_bytes=100, segment_index_bytes=4096, retention_ms=-1
)


def batch(i: int) -> bytes:
    return build_batch([(b"k%d" % i, b"v" * (20 + i % 7), [("h", b"x")])] * 3, timestamp_ms=i)


def crash(plog: Log) -> None:
    """Drop the log without writing anything more, as a killed broker would."""
    for segment in plog.segments:
        segment.close_handles()


def make_log(dir: Path, batches: int = 40) -> Log:
    plog = Log.open(dir, CONFIG)
    for i in range(batches):
        plog.append_as_leader(batch(i), leader_epoch=i // 10)
    return plog


def all_offsets(plog: Log) -> list[int]:
    out: list[int] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        got = [r.offset for r in decode_records(plog.read(offset, 10**6).records)]
        out += [o for o in got if o >= offset]
        offset = got[-1] + 1
    return out


def test_recovery_from_every_cut_of_the_last_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    original = tmp_path / "orig" / "t-0"
    plog = make_log(original, batches=12)
    active = plog.active_segment
    last_pos, last = list(scan_batches(active.log_path.read_bytes()))[-1]
    end = plog.log_end_offset
    crash(plog)
    assert last.next_offset == end
    for keep in range(last.size):
        dir = tmp_path / f"cut{keep}" / "t-0"
        shutil.copytree(original, dir)
        log_file = dir / active.log_path.name
        os.truncate(log_file, last_pos + keep)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            again = Log.open(dir, CONFIG, recovery_point=0)
        assert again.log_end_offset == last.base_offset, keep
        assert log_file.stat().st_size == last_pos
        assert all_offsets(again) == list(range(last.base_offset))
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        if keep:
            assert any(str(log_file) in m and f"truncated {keep} bytes" in m for m in warned)
        else:
            assert not warned
        assert again.append_as_leader(batch(0), 9).first_offset == last.base_offset
        again.close()
        shutil.rmtree(dir.parent)


def test_garbage_after_the_last_batch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plog = make_log(tmp_path / "t-0")
    end = plog.log_end_offset
    path = plog.active_segment.log_path
    crash(plog)
    with open(path, "ab") as f:
        f.write(b"\x00" * 100 + os.urandom(500))
    with caplog.at_level(logging.WARNING):
        again = Log.open(tmp_path / "t-0", CONFIG, recovery_point=0)
    assert again.log_end_offset == end
    assert all_offsets(again) == list(range(end))
    assert "truncated 600 bytes" in caplog.text and str(path) in caplog.text


def test_corrupt_batch_in_the_middle_of_the_active_segment(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plog = make_log(tmp_path / "t-0")
    path = plog.active_segment.log_path
    batches = list(scan_batches(path.read_bytes()))
    assert len(batches) >= 4
    pos, victim = batches[2]
    crash(plog)
    data = bytearray(path.read_bytes())
    data[pos + 70] ^= 0x01  # inside the records: only the CRC can tell
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        again = Log.open(tmp_path / "t-0", CONFIG, recovery_point=0)
    assert again.log_end_offset == victim.base_offset
    assert all_offsets(again) == list(range(victim.base_offset))
    assert "CRC" in caplog.text and f"at byte {pos}" in caplog.text


def test_corruption_in_an_older_unflushed_segment_drops_later_segments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plog = make_log(tmp_path / "t-0")
    plog.flush(plog.segments[1].base_offset)
    victim_segment = plog.segments[2]
    later = [s.log_path for s in plog.segments[3:]]
    assert later
    pos, victim = list(scan_batches(victim_segment.log_path.read_bytes()))[1]
    crash(plog)
    with open(victim_segment.log_path, "r+b") as f:
        f.seek(pos + 16)
        f.write(b"\x01")  # magic v1
    with caplog.at_level(logging.WARNING):
        again = Log.open(tmp_path / "t-0", CONFIG, recovery_point=plog.recovery_point)
    assert again.log_end_offset == victim.base_offset
    assert again.active_segment.base_offset == victim_segment.base_offset
    assert not any(p.exists() for p in later)
    assert "magic v1" in caplog.text
    assert all(str(p) in caplog.text for p in later)
    assert all_offsets(again) == list(range(victim.base_offset))


def test_overwritten_base_offset_is_caught(tmp_path: Path) -> None:
    plog = make_log(tmp_path / "t-0")
    path = plog.active_segment.log_path
    pos, victim = list(scan_batches(path.read_bytes()))[2]
    crash(plog)
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write((0).to_bytes(8, "big"))  # baseOffset is outside the CRC
    again = Log.open(tmp_path / "t-0", CONFIG, recovery_point=0)
    assert again.log_end_offset == victim.base_offset


def test_random_damage_never_stops_the_log_from_opening(tmp_path: Path) -> None:
    rng = random.Random(7)
    original = tmp_path / "orig" / "t-0"
    crash(make_log(original))
    files = sorted(p.name for p in original.iterdir())
    for trial in range(30):
        dir = tmp_path / f"trial{trial}" / "t-0"
        shutil.copytree(original, dir)
        for name in rng.sample(files, 3):
            path = dir / name
            data = bytearray(path.read_bytes())
            if data and rng.random() < 0.7:
                for _ in range(rng.randint(1, 5)):
                    data[rng.randrange(len(data))] = rng.randrange(256)
                path.write_bytes(bytes(data))
            else:
                os.truncate(path, rng.randrange(len(data) + 1))
        recovery_point = rng.choice([0, 30, 10**6])
        again = Log.open(dir, CONFIG, recovery_point=recovery_point)
        if recovery_point == 0:
            # Everything was checked: what is left reads back whole.
            offsets = all_offsets(again)
            assert offsets == sorted(set(offsets))
        else:
            # Trusted segments are not CRC-checked (as in Kafka), but reading them is safe.
            for offset in range(again.log_start_offset, again.log_end_offset):
                again.read(offset, 10**6)
        again.append_as_leader(batch(1), 99)
        again.close()
        shutil.rmtree(dir.parent)


def test_trusted_segments_with_broken_indexes_are_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plog = make_log(tmp_path / "t-0", batches=60)
    expected = all_offsets(plog)
    end = plog.log_end_offset
    plog.flush()
    plog.close()
    segments = plog.segments
    assert len(segments) >= 5
    missing = segments[0].offset_index.path
    missing.unlink()
    odd = segments[1].time_index.path
    os.truncate(odd, odd.stat().st_size - 5)
    unordered = segments[2].offset_index.path
    data = unordered.read_bytes()
    unordered.write_bytes(data[8:16] + data[:8] + data[16:])
    short = segments[3].offset_index.path
    os.truncate(short, 8)  # valid, just sparse: nothing to complain about
    with caplog.at_level(logging.WARNING):
        again = Log.open(tmp_path / "t-0", CONFIG, recovery_point=end, clean_shutdown=True)
        assert all_offsets(again) == expected
        for offset in range(0, end, 5):
            got = [r.offset for r in decode_records(again.read(offset, 10**6).records)]
            assert got[0] <= offset <= got[-1]
    warned = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert str(missing) in warned and "missing" in warned
    assert str(odd) in warned and "multiple" in warned
    assert str(unordered) in warned and "do not increase" in warned
    assert str(short) not in warned
    assert missing.exists()
    again.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        third = Log.open(tmp_path / "t-0", CONFIG, recovery_point=end, clean_shutdown=True)
        assert all_offsets(third) == expected
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize("timestamp", ["newer", "negative"])
def test_active_segment_time_index_naming_offsets_past_its_data_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, timestamp: str
) -> None:
    """A trusted active segment whose time index ends with an entry for an offset its .log
    never reached (found by fuzz/recovery.py: a damaged .timeindex after a clean shutdown) is
    rebuilt on opening.  It used to be kept: with a negative timestamp the next append that
    indexed a time failed (InvalidOffsetError: below the last time-indexed offset), and with
    a newer one a time lookup answered an offset past the log's end."""
    plog = make_log(tmp_path / "t-0")
    expected = all_offsets(plog)
    end = plog.log_end_offset
    plog.flush()
    plog.close()
    path = plog.segments[-1].time_index.path
    last_ts, _ = struct.unpack(">qi", path.read_bytes()[-12:])
    if timestamp == "newer":
        path.write_bytes(path.read_bytes() + struct.pack(">qi", last_ts + 1, 926_359_166))
    else:  # the whole file one entry, as the fuzzer wrote it
        path.write_bytes(struct.pack(">qi", -200, 926_359_166))
    with caplog.at_level(logging.WARNING):
        again = Log.open(tmp_path / "t-0", CONFIG, recovery_point=end, clean_shutdown=True)
    warned = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert str(path) in warned and "beyond" in warned
    assert again.log_end_offset == end
    assert all_offsets(again) == expected
    found = again.offset_for_timestamp(last_ts + 1)
    assert found is None or found[1] < end
    for i in range(30):  # enough to index times and roll the active segment
        again.append_as_leader(batch(1000 + i), leader_epoch=9)
    again.roll()
    again.close()
    third = Log.open(tmp_path / "t-0", CONFIG, clean_shutdown=True)
    assert all_offsets(third) == [*expected, *range(end, third.log_end_offset)]
    third.close()


def test_a_trusted_active_segment_ending_with_offsets_it_cannot_hold_is_recovered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by fuzz/recovery.py: after a clean shutdown, the active segment's .log ended
    with a whole, CRC-valid batch whose offsets lie more than 2^31 past the segment's base.
    Trusted as it was, the next time index entry could not be written (struct.error on
    close, or on the append that indexed it).  Such a batch now ends the trusted part, and
    the segment is recovered: cut before it."""
    plog = make_log(tmp_path / "t-0")
    expected = all_offsets(plog)
    end = plog.log_end_offset
    plog.flush()
    plog.close()
    active = plog.segments[-1]
    far = build_batch([(b"k", b"far", [])], base_offset=active.base_offset + 2**31 + 5)
    with open(active.log_path, "ab") as f:
        f.write(far)
    with caplog.at_level(logging.WARNING):
        again = Log.open(tmp_path / "t-0", CONFIG, recovery_point=end, clean_shutdown=True)
    warned = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert str(active.log_path) in warned and "too far" in warned
    assert again.log_end_offset == end
    assert all_offsets(again) == expected
    for i in range(30):
        again.append_as_leader(batch(1000 + i), leader_epoch=9)
    again.close()
    third = Log.open(tmp_path / "t-0", CONFIG, clean_shutdown=True)
    assert all_offsets(third) == [*expected, *range(end, third.log_end_offset)]
    third.close()


def test_active_segment_index_lost_in_a_crash(tmp_path: Path) -> None:
    plog = make_log(tmp_path / "t-0")
    end = plog.log_end_offset
    index = plog.active_segment.offset_index.path
    crash(plog)
    index.unlink()
    again = Log.open(tmp_path / "t-0", CONFIG, recovery_point=0)
    assert again.log_end_offset == end
    assert again.active_segment.offset_index.entries > 0
    assert index.exists()


def test_leftover_files(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dir = tmp_path / "t-0"
    plog = make_log(dir)
    end = plog.log_end_offset
    expected = all_offsets(plog)
    plog.flush()
    plog.close()
    first = plog.segments[0].log_path
    (dir / "00000000000000000003.log.deleted").write_bytes(b"old")
    (dir / "00000000000000000099.log.cleaned").write_bytes(b"half")
    (dir / "00000000000000000999.index").write_bytes(b"")  # no .log: an orphan
    # A crash in the middle of swapping segment 0 for its rewritten copy.
    os.replace(first, str(first) + ".swap")
    with caplog.at_level(logging.WARNING):
        again = Log.open(dir, CONFIG, recovery_point=end, clean_shutdown=True)
    names = {p.name for p in dir.iterdir()}
    assert not any(n.endswith((".deleted", ".cleaned", ".swap")) for n in names)
    assert "00000000000000000999.index" not in names
    assert again.log_end_offset == end
    assert all_offsets(again) == expected
    assert "swap" in caplog.text


def test_missing_epoch_checkpoint_is_rebuilt_from_batches(tmp_path: Path) -> None:
    plog = make_log(tmp_path / "t-0")
    crash(plog)
    (tmp_path / "t-0" / "leader-epoch-checkpoint").unlink(missing_ok=True)
    again = Log.open(tmp_path / "t-0", CONFIG, recovery_point=0)
    assert [tuple(e) for e in again.leader_epoch_cache.entries] == [
        (0, 0),
        (1, 30),
        (2, 60),
        (3, 90),
    ]


def test_corrupt_epoch_checkpoint(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plog = make_log(tmp_path / "t-0")
    crash(plog)
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text("0\n5\n1 2\n")
    with caplog.at_level(logging.WARNING):
        again = Log.open(tmp_path / "t-0", CONFIG, recovery_point=0)
    assert "leader-epoch-checkpoint" in caplog.text
    assert again.latest_epoch == 3


def test_log_start_offset_beyond_the_data(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plog = make_log(tmp_path / "t-0")
    crash(plog)
    with caplog.at_level(logging.WARNING):
        again = Log.open(tmp_path / "t-0", CONFIG, recovery_point=0, log_start_offset=5000)
    assert again.log_start_offset == again.log_end_offset == 5000
    assert [s.base_offset for s in again.segments] == [5000]
    assert "below its log start offset" in caplog.text


def test_new_log_starts_at_the_log_start_offset(tmp_path: Path) -> None:
    plog = Log.open(tmp_path / "t-0", CONFIG, log_start_offset=42)
    assert plog.log_start_offset == plog.log_end_offset == 42
    assert plog.append_as_leader(batch(0), 0).first_offset == 42


def test_swap_replaces_the_segments_it_covers(tmp_path: Path) -> None:
    dir = tmp_path / "t-0"
    plog = make_log(dir)
    expected = all_offsets(plog)
    plog.flush()
    plog.close()
    first, second = plog.segments[0], plog.segments[1]
    merged = first.log_path.read_bytes() + second.log_path.read_bytes()
    Path(str(first.log_path) + ".swap").write_bytes(merged)
    again = Log.open(dir, CONFIG, recovery_point=0)
    assert not second.log_path.exists()
    assert again.segments[0].base_offset == 0
    assert again.segments[1].base_offset == plog.segments[2].base_offset
    assert again.segments[0].log_path.read_bytes() == merged
    assert all_offsets(again) == expected
