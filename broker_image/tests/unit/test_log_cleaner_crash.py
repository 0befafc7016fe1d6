"""A kill -9 at any point of a clean loses nothing and duplicates nothing.

The partition directory is copied at every step of a clean and before every rename and
unlink it makes (what a process killed at that instant leaves on disk); each copy is then
opened by the real loader, as a broker restarting after the crash would.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from cleaner_support import Clock, assert_subset_of, compacted_log, read_all, view, with_config

from samsa.log import Log, LogManager
from samsa.log.cleaner import CleanerConfig, LogCleaner
from samsa.log.cleaner.cleaner import Offload, OnLoop
from samsa.protocol.record_batch import COMPRESSION_LZ4, COMPRESSION_NONE, build_batch

CONFIG = with_config(segment_bytes=900, delete_retention_ms=0)


def history(plog: Log, clock: Clock) -> None:
    for i in range(90):
        key = b"k%d" % (i % 11)
        value = None if i % 13 == 5 else b"value-%d-" % i + b"x" * (i % 17)
        kw: dict[str, Any] = {}
        if i % 7 == 0:
            # Two records a batch: the sequence goes up by two (a valid idempotent producer).
            kw = {"producer_id": 3, "producer_epoch": 0, "base_sequence": 2 * (i // 7)}
        records = [(key, value, []), (b"k%d" % ((i + 5) % 11), b"v%d" % i, [])]
        codec = COMPRESSION_LZ4 if i % 4 == 0 else COMPRESSION_NONE
        plog.append_as_leader(
            build_batch(records, timestamp_ms=clock.now, compression=codec, **kw), 0
        )
        clock.now += 10
    plog.roll()


def test_a_crash_anywhere_in_a_clean_recovers_to_the_same_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    _, plog, cleaner = compacted_log(tmp_path / "live", clock, CONFIG)
    history(plog, clock)
    # A first clean stamps the tombstones; the crashes happen in the second, which drops them.
    assert cleaner.clean_filthiest_log_now()
    clock.now += 1
    plog.append_as_leader(build_batch([(b"k1", b"new", [])], timestamp_ms=clock.now), 0)
    plog.roll()
    original = read_all(plog)
    snapshots: list[tuple[str, Path]] = []

    def snapshot(why: str) -> None:
        dest = tmp_path / "crash" / f"{len(snapshots):04d}" / plog.dir.name
        shutil.copytree(plog.dir, dest)
        snapshots.append((why, dest))

    real_replace, real_unlink = os.replace, Path.unlink

    def replace(src: Any, dst: Any) -> None:
        snapshot(f"before renaming {Path(src).name} to {Path(dst).name}")
        real_replace(src, dst)

    def unlink(self: Path, missing_ok: bool = False) -> None:
        snapshot(f"before deleting {self.name}")
        real_unlink(self, missing_ok=missing_ok)

    cleaner.cleaner.crash_hook = lambda point: snapshot(f"at {point}")
    steps = cleaner.clean_filthiest_log_steps()
    reply: Any = None
    with monkeypatch.context() as m:
        m.setattr(os, "replace", replace)
        m.setattr(Path, "unlink", unlink)
        while True:
            try:
                step = steps.send(reply)
            except StopIteration as done:
                assert done.value is True
                break
            snapshot("between steps")
            reply = step.fn() if isinstance(step, (Offload, OnLoop)) else True
    snapshot("after the clean")
    final = read_all(plog)
    assert len(final) < len(original)
    assert len(snapshots) > 100
    reasons = {why.split(" ")[0] + " " + why.split(" ")[1] for why, _ in snapshots}
    assert {"at swap", "at deleting", "before renaming", "before deleting"} <= reasons

    for n, (why, dir) in enumerate(snapshots):
        recovered = Log.open(dir, CONFIG, recovery_point=0)
        try:
            records = read_all(recovered)  # offsets strictly increase: nothing duplicated
            assert_subset_of(records, original)
            assert view(records) == view(original), f"crash {why} changed the table"
            assert set(r.offset for r in final) <= set(r.offset for r in records), why
            leftovers = [p.name for p in dir.iterdir() if p.suffix in (".cleaned", ".swap")]
            assert not leftovers, f"crash {why} left {leftovers}"
        finally:
            recovered.close()
        if n % 25 == 0:
            # Cleaning again after the restart gets to the same table.
            manager = LogManager(dir.parent, CONFIG, now_ms=clock)
            manager.load_logs({"t": CONFIG})
            again = LogCleaner(manager, CleanerConfig(dedupe_buffer_size=1 << 20), now_ms=clock)
            while again.clean_filthiest_log_now():
                pass
            assert view(read_all(manager.logs[("t", 0)])) == view(original)
            manager.shutdown()
