"""Idempotent producers through a real Log on disk: retries answered and not written,
snapshots with segments, state rebuilt after clean and unclean restarts and truncation."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.config.topic import LogConfig
from samsa.log import Log
from samsa.log.producer_snapshot import (
    encode_snapshot,
    read_snapshot,
    snapshot_path,
)
from samsa.log.producer_state import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    ProducerStateEntry,
)
from samsa.log.producer_state_manager import ProducerStateManager
from samsa.protocol.record_batch import build_batch, decode_records

CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=100, retention_ms=-1)

State = dict[int, tuple[int, list[tuple[int, int, int, int]], int]]


def idem(seq: int, n: int = 2, pid: int = 7, epoch: int = 0, ts: int = 1000) -> bytes:
    return build_batch(
        [(b"k", b"%d-%d-%d" % (pid, epoch, seq + i), []) for i in range(n)],
        timestamp_ms=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def plain(n: int = 1) -> bytes:
    return build_batch([(None, b"plain", [])] * n, timestamp_ms=5)


def state_of(plog: Log) -> State:
    return {
        pid: (e.producer_epoch, [tuple(b) for b in e.batches], e.last_timestamp)  # type: ignore[misc]
        for pid, e in plog.producer_state.producers.items()
    }


def crash(plog: Log) -> None:
    """Drop the log without writing anything more, as a killed broker would."""
    for segment in plog.segments:
        segment.close_handles()


def values(plog: Log) -> list[bytes]:
    out: list[bytes] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        records = decode_records(plog.read(offset, 10**6).records)
        out += [r.value or b"" for r in records if r.offset >= offset]
        offset = records[-1].offset + 1
    return out


def open_log(dir: Path, **kwargs: object) -> Log:
    return Log.open(dir / "t-0", CONFIG, **kwargs)  # type: ignore[arg-type]


def test_a_retry_is_answered_with_its_offset_and_not_written(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    assert plog.append_as_leader(idem(0, n=3), 0).first_offset == 0
    plog.append_as_leader(plain(), 0)
    assert plog.append_as_leader(idem(3), 0).first_offset == 4
    size, end = plog.size_in_bytes, plog.log_end_offset
    again = plog.append_as_leader(idem(0, n=3), 0)
    assert (again.first_offset, again.last_offset, again.num_messages) == (0, 2, 0)
    assert again.log_append_time == -1
    assert plog.append_as_leader(idem(3), 0).first_offset == 4
    assert (plog.size_in_bytes, plog.log_end_offset) == (size, end)
    assert values(plog) == [b"7-0-0", b"7-0-1", b"7-0-2", b"plain", b"7-0-3", b"7-0-4"]


def test_a_refused_append_writes_nothing(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append_as_leader(idem(0, epoch=2), 0)
    size, end = plog.size_in_bytes, plog.log_end_offset
    with pytest.raises(OutOfOrderSequenceError):
        plog.append_as_leader(idem(5, epoch=2), 0)
    with pytest.raises(InvalidProducerEpochError):
        plog.append_as_leader(idem(2, epoch=1), 0)
    # A request is refused whole: the good batch in front of the bad one is not written.
    with pytest.raises(OutOfOrderSequenceError):
        plog.append_as_leader(idem(2, epoch=2) + idem(9, epoch=2), 0)
    assert (plog.size_in_bytes, plog.log_end_offset) == (size, end)
    assert plog.append_as_leader(idem(2, epoch=2), 0).first_offset == 2


def test_a_retry_on_a_log_append_time_topic_gets_the_original_append_time(
    tmp_path: Path,
) -> None:
    clock = [50_000]
    plog = Log.open(
        tmp_path / "t-0",
        LogConfig(message_timestamp_type="LogAppendTime"),
        now_ms=lambda: clock[0],
    )
    first = plog.append_as_leader(idem(0), 0)
    clock[0] += 1000
    again = plog.append_as_leader(idem(0), 0)
    assert first.log_append_time == again.log_append_time == 50_000
    assert again.first_offset == 0 and plog.log_end_offset == 2


def fill(plog: Log, batches: int, producers: tuple[int, ...] = (7, 8)) -> dict[int, int]:
    """Appends `batches` two-record batches, producers taking turns; their next sequences."""
    seqs = dict.fromkeys(producers, 0)
    for i in range(batches):
        pid = producers[i % len(producers)]
        plog.append_as_leader(idem(seqs[pid], pid=pid, ts=1000 + i), 0)
        seqs[pid] += 2
    return seqs


def replayed(plog: Log, upto: int) -> list[ProducerStateEntry]:
    fresh = ProducerStateManager(plog.dir, "t-0")
    fresh.append_replicated(plog.batch_headers(0, upto), upto)
    return sorted(fresh.producers.values(), key=lambda e: e.producer_id)


def test_each_roll_snapshots_the_state_below_the_new_segment(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 40)
    bases = [s.base_offset for s in plog.segments]
    assert len(bases) > 3
    assert plog.producer_state.snapshot_offsets == bases[1:]
    for base in bases[1:]:
        stored = sorted(read_snapshot(snapshot_path(plog.dir, base)), key=lambda e: e.producer_id)
        assert stored == replayed(plog, base)


def test_clean_restart_loads_the_snapshot_at_the_log_end(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    seqs = fill(plog, 23)
    before = state_of(plog)
    end = plog.log_end_offset
    plog.flush()
    plog.close()
    assert snapshot_path(plog.dir, end).exists()
    again = open_log(tmp_path, recovery_point=end, clean_shutdown=True)
    assert state_of(again) == before
    # Every one of the last five batches of each producer is still recognised.
    for pid in (7, 8):
        for back in range(1, 6):
            seq = seqs[pid] - 2 * back
            assert again.append_as_leader(idem(seq, pid=pid), 0).num_messages == 0
    assert again.log_end_offset == end
    assert again.append_as_leader(idem(seqs[7], pid=7), 0).first_offset == end


def test_unclean_restart_rebuilds_from_the_recovery_point(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 60)
    before = state_of(plog)
    snapshots = plog.producer_state.snapshot_offsets
    assert len(snapshots) >= 3
    recovery_point = snapshots[1]
    # A snapshot above the recovery point is not trusted after a crash: make one that lies.
    lie = snapshots[-1]
    snapshot_path(plog.dir, lie).write_bytes(encode_snapshot([ProducerStateEntry(7, 9)]))
    crash(plog)
    again = open_log(tmp_path, recovery_point=recovery_point)
    assert state_of(again) == before


def test_a_corrupt_snapshot_falls_back_to_an_older_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plog = open_log(tmp_path)
    fill(plog, 30)
    before = state_of(plog)
    end = plog.log_end_offset
    plog.flush()
    plog.close()
    path = snapshot_path(plog.dir, end)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        again = open_log(tmp_path, recovery_point=end, clean_shutdown=True)
    assert f"{path}: CRC mismatch" in caplog.text
    assert not path.exists()
    assert state_of(again) == before


def test_no_snapshot_at_all_rebuilds_from_the_whole_log(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 30)
    before = state_of(plog)
    crash(plog)
    for offset in plog.producer_state.snapshot_offsets:
        snapshot_path(plog.dir, offset).unlink()
    (plog.dir / "00000000000000000012.snapshot.tmp").write_bytes(b"half")
    again = open_log(tmp_path, recovery_point=0)
    assert state_of(again) == before
    assert not (plog.dir / "00000000000000000012.snapshot.tmp").exists()


def test_snapshots_beyond_a_cut_tail_are_deleted(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 30)
    end = plog.log_end_offset
    crash(plog)
    # The newest segment lost its tail in the crash.
    newest = max(plog.producer_state.snapshot_offsets)
    active = plog.dir / f"{newest:020d}.log"
    os.truncate(active, 0)
    stale = snapshot_path(plog.dir, end)
    stale.write_bytes(encode_snapshot([]))
    again = open_log(tmp_path, recovery_point=0)
    assert again.log_end_offset == newest
    assert not stale.exists()
    assert state_of(again) == {
        e.producer_id: (e.producer_epoch, [tuple(b) for b in e.batches], e.last_timestamp)
        for e in replayed(again, newest)
    }


def test_truncation_rebuilds_the_state_as_it_was_at_that_offset(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    history: dict[int, State] = {0: {}}
    rng = random.Random(3)
    seqs = {7: 0, 8: 0}
    epoch = 0
    for i in range(40):
        pid = rng.choice((7, 8))
        if i == 25:
            epoch, seqs[7] = 1, 0
        plog.append_as_leader(idem(seqs[pid], pid=pid, epoch=epoch if pid == 7 else 0), 0)
        seqs[pid] += 2
        history[plog.log_end_offset] = state_of(plog)
    for target in sorted(history, reverse=True)[::7]:
        plog.truncate_to(target)
        assert plog.log_end_offset == target
        assert state_of(plog) == history[target], target
        assert all(s <= target for s in plog.producer_state.snapshot_offsets)
    # After the truncation the producer continues from where the state says it was.
    entry = plog.producer_state.last_entry(7)
    next_seq = entry.last_seq + 1 if entry else 0
    epoch7 = entry.producer_epoch if entry else 0
    assert plog.append_as_leader(idem(next_seq, epoch=epoch7), 0).num_messages == 2


def test_truncating_everything_forgets_every_producer(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 30)
    plog.truncate_to(0)
    assert plog.producer_state.is_empty
    assert plog.producer_state.snapshot_offsets == []
    plog.truncate_fully_and_start_at(100)
    assert plog.producer_state.map_end_offset == 100
    assert plog.append_as_leader(idem(40), 0).first_offset == 100


def test_retention_deletes_snapshots_with_their_segments_but_keeps_the_state(
    tmp_path: Path,
) -> None:
    config = LogConfig(segment_bytes=1200, retention_bytes=2000, retention_ms=-1)
    plog = Log.open(tmp_path / "t-0", config)
    fill(plog, 10, producers=(7,))
    fill_other = {9: 0}
    for i in range(40):
        plog.append_as_leader(idem(fill_other[9], pid=9, ts=5000 + i), 0)
        fill_other[9] += 2
    before = state_of(plog)
    assert plog.delete_old_segments() > 0
    first = plog.segments[0].base_offset
    assert min(plog.producer_state.snapshot_offsets) >= first
    # Producer 7's batches are all gone from the log; its state stays (KIP-360), so its
    # retries are still recognised.
    assert plog.producer_state.last_entry(7) is not None
    assert state_of(plog) == before
    assert plog.append_as_leader(idem(18), 0).num_messages == 0


def test_a_follower_takes_on_the_leaders_state(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    fill(leader, 30)
    follower = open_log(tmp_path / "follower")
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, 700, min_one_message=True).records
        assert isinstance(data, bytes)
        offset = follower.append_as_follower(data).last_offset + 1
    assert state_of(follower) == state_of(leader)
    # A follower checks nothing: a batch out of sequence is the leader's business.
    follower.append_as_follower(
        build_batch(
            [(None, b"x", [])],
            base_offset=offset,
            producer_id=7,
            producer_epoch=0,
            base_sequence=999,
        )
    )
    entry = follower.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 999


# -- property: retries, lost answers and restarts of the broker ----------------------------


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 25),
    st.lists(
        st.tuples(
            st.integers(0, 4),
            st.booleans(),
            st.sampled_from(["", "", "", "", "flush", "clean", "crash"]),
        ),
        min_size=1,
        max_size=60,
    ),
)
def test_retries_across_restarts_leave_each_batch_once_in_order(
    tmp_path_factory: pytest.TempPathFactory,
    batches: int,
    steps: list[tuple[int, bool, str]],
) -> None:
    """The producer of test_producer_state's property, against a Log that the schedule also
    restarts, cleanly or after a crash, in between."""
    base = tmp_path_factory.mktemp("restarts")
    box = [open_log(base)]
    acked: dict[int, int] = {}

    def send(i: int, lost: bool) -> None:
        try:
            info = box[0].append_as_leader(idem(2 * i, ts=1000 + i), 0)
        except OutOfOrderSequenceError:
            return
        if not lost:
            assert acked.setdefault(i, info.first_offset) == info.first_offset

    def restart(how: str) -> None:
        plog = box[0]
        end = plog.log_end_offset
        if how == "flush":
            plog.flush()
        elif how == "clean":
            plog.flush()
            plog.close()
            box[0] = open_log(base, recovery_point=end, clean_shutdown=True)
        else:
            point = plog.recovery_point
            crash(plog)
            box[0] = open_log(base, recovery_point=point)

    oldest = 0
    send(0, steps[0][1])
    for pick, lost, event in steps[1:]:
        if event:
            restart(event)
        while oldest in acked:
            oldest += 1
        window = list(range(oldest, min(oldest + 5, batches)))
        if window:
            send(window[pick % len(window)], lost)
    for i in range(batches):
        send(i, False)
        assert i in acked, f"batch {i} is refused when retried in order"
    expected = [b"7-0-%d" % seq for seq in range(2 * batches)]
    assert values(box[0]) == expected
    assert [acked[i] for i in range(batches)] == [2 * i for i in range(batches)]
    box[0].close()
