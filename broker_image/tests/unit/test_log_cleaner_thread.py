"""The log cleaner in its thread: the same clean as on the loop, the swap done on the loop, and
a log changed under the thread (truncated, as a follower's is) costs a clean, never data."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from cleaner_support import Clock, compacted_log, read_all, view, with_config

from samsa.log import Log
from samsa.protocol.record_batch import build_batch


def put(plog: Log, key: bytes, value: bytes) -> None:
    plog.append_as_leader(build_batch([(key, value, [])], timestamp_ms=1000), 0)


def fill(plog: Log, n: int, prefix: bytes = b"v") -> None:
    for i in range(n):
        put(plog, b"k%d" % (i % 7), prefix + b"-%d-" % i + b"x" * 50)
    plog.roll()


async def test_the_thread_cleans_as_the_loop_does(tmp_path: Path) -> None:
    config = with_config(segment_bytes=16 * 1024)
    _, threaded, cleaner = compacted_log(tmp_path / "a", Clock(), config)
    _, on_loop, baseline = compacted_log(tmp_path / "b", Clock(), config, threaded=False)
    for plog in (threaded, on_loop):
        fill(plog, 2000)
    loop_thread = threading.get_ident()
    swapped_on: list[int] = []
    real_commit_hook = cleaner.cleaner.crash_hook

    def hook(point: str) -> None:
        if point == "swap":
            swapped_on.append(threading.get_ident())
        real_commit_hook(point)

    cleaner.cleaner.crash_hook = hook
    assert await cleaner.clean_filthiest_log()
    assert await baseline.clean_filthiest_log()
    assert read_all(threaded) == read_all(on_loop)
    assert len(read_all(threaded)) < 2000
    # Cleaning ran off the loop; the swap into the live log on it.
    assert swapped_on and set(swapped_on) == {loop_thread}
    await cleaner.shutdown()
    await baseline.shutdown()


async def test_a_truncation_under_the_thread_aborts_the_clean(tmp_path: Path) -> None:
    _, plog, cleaner = compacted_log(tmp_path, Clock(), with_config(segment_bytes=16 * 1024))
    fill(plog, 2000)
    reached, go_on = threading.Event(), threading.Event()

    def hook(point: str) -> None:
        if point == "cleaning" and not reached.is_set():
            reached.set()  # the thread is writing a cleaned segment: hold it there
            go_on.wait(30)

    cleaner.cleaner.crash_hook = hook
    clean = asyncio.create_task(cleaner.clean_filthiest_log())
    assert await asyncio.to_thread(reached.wait, 30)
    # A follower cuts the log back into the cleanable range and takes new records.
    plog.truncate_to(plog.segments[-3].base_offset + 5)
    fill(plog, 300, b"new")
    expected = read_all(plog)
    go_on.set()
    assert await clean is False
    assert cleaner.totals.aborted == 1 and cleaner.totals.failed == 0
    assert read_all(plog) == expected
    assert not list(plog.dir.glob("*.cleaned"))
    assert await cleaner.clean_filthiest_log()  # the next round cleans what is there now
    assert view(read_all(plog)) == view(expected)
    await cleaner.shutdown()


async def test_shutdown_stops_a_clean_in_the_thread(tmp_path: Path) -> None:
    _, plog, cleaner = compacted_log(tmp_path, Clock(), with_config(segment_bytes=16 * 1024))
    fill(plog, 2000)
    expected = read_all(plog)
    reached = threading.Event()

    def hook(point: str) -> None:
        reached.set()

    cleaner.cleaner.crash_hook = hook
    cleaner.start()
    cleaner.wake()
    assert await asyncio.to_thread(reached.wait, 30)
    await asyncio.wait_for(cleaner.shutdown(), 30)
    assert not list(plog.dir.glob("*.cleaned"))
    assert view(read_all(plog)) == view(expected)
