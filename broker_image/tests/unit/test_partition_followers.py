"""What a leader knows of its followers: when a follower last caught up, which decides the
ISR shrink (replica.lag.time.max.ms), and the check that lets a fetch session pass over a
partition its follower already has whole."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from cleaner_support import Clock

from samsa.config.topic import LogConfig
from samsa.log import LogManager
from samsa.metadata.model import PartitionState, TopicPartition
from samsa.protocol.record_batch import build_batch, scan_batches
from samsa.replica.partition import Partition

LAG_MS = 30_000
LEADER, F1, F2 = 0, 1, 2


@pytest.fixture
def clock() -> Clock:
    return Clock(1_000_000)


@pytest.fixture
def partition(tmp_path: Path, clock: Clock) -> Partition:
    log = LogManager(tmp_path, LogConfig(), now_ms=clock).get_or_create_log("t", 0)
    p = Partition(
        TopicPartition("t", 0),
        uuid.uuid4(),
        log,
        LEADER,
        on_data=lambda tp, committed: None,
        now_ms=clock,
        alter_isr=lambda partition, isr: None,
    )
    p.make_leader(PartitionState("t", 0, LEADER, 1, (LEADER, F1, F2), (LEADER, F1, F2)))
    return p


def append(p: Partition, n: int = 1) -> None:
    batch = build_batch([(None, b"v", [])] * n)
    p.append_records_to_leader(batch, [h for _, h in scan_batches(batch)], 1, 1)


def test_a_follower_fetching_at_the_end_of_an_idle_log_stays_in_sync(
    partition: Partition, clock: Clock
) -> None:
    append(partition, 3)
    for follower in (F1, F2):
        partition.update_follower_fetch_state(follower, 3)
    # An idle minute in which only F1's session passes over the partition, fetch after fetch.
    for _ in range(60):
        clock.now += 1_000
        assert partition.follower_at_end(F1, 3)
    append(partition)
    # F2 has not fetched for a minute: behind now, and out of sync. F1 fetched a moment ago.
    assert partition.maybe_shrink_isr(LAG_MS) == (F2,)


def test_a_follower_behind_or_out_of_the_isr_is_read_in_full(
    partition: Partition, clock: Clock
) -> None:
    append(partition, 3)
    partition.update_follower_fetch_state(F1, 2)
    assert not partition.follower_at_end(F1, 2)  # behind: the fetch must return records
    partition.update_follower_fetch_state(F1, 3)
    assert not partition.follower_at_end(F1, 2)  # an offset it does not fetch from
    assert partition.follower_at_end(F1, 3)
    partition.make_leader(PartitionState("t", 0, LEADER, 1, (LEADER, F1, F2), (LEADER, F2), 1))
    # Out of the ISR: its fetch goes the full way, where it may be proposed back in.
    assert not partition.follower_at_end(F1, 3)
    assert not partition.follower_at_end(7, 3)  # not a replica at all


class Session:
    """A follower's fetch session as the leader's partition sees it (FetchClock)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.fetch_ms = self.previous_fetch_ms = clock.now

    def fetched(self) -> None:
        self.previous_fetch_ms, self.fetch_ms = self.fetch_ms, self.clock.now


def test_a_follower_whose_session_skips_an_idle_partition_stays_in_sync(
    partition: Partition, clock: Clock
) -> None:
    append(partition, 3)
    for follower in (F1, F2):
        partition.update_follower_fetch_state(follower, 3)
    f1, f2 = Session(clock), Session(clock)
    assert partition.follower_at_end(F1, 3, f1)
    assert partition.follower_at_end(F2, 3, f2)
    version = partition.version
    # An idle minute: F1's session fetches every second and skips the partition, whose
    # version holds; F2's stopped fetching after its first.
    for _ in range(60):
        clock.now += 1_000
        f1.fetched()
    assert partition.version == version
    append(partition)
    assert partition.version != version
    assert partition.maybe_shrink_isr(LAG_MS) == (F2,)


def test_a_skipped_partition_read_again_counts_the_sessions_last_fetch_as_caught_up(
    partition: Partition, clock: Clock
) -> None:
    append(partition, 3)
    partition.update_follower_fetch_state(F1, 3)
    session = Session(clock)
    assert partition.follower_at_end(F1, 3, session)
    for _ in range(40):
        clock.now += 1_000
        session.fetched()
    append(partition)  # the session's next fetch reads the partition: F1 is one behind
    clock.now += 1_000
    session.fetched()
    partition.update_follower_fetch_state(F1, 3)
    # Caught up as of the fetch before this one, as Kafka counts it: not 41 s ago.
    clock.now += LAG_MS - 2_000
    partition.update_follower_fetch_state(F2, 4)  # F2 has it all
    assert partition.maybe_shrink_isr(LAG_MS) == ()
    clock.now += 2_000
    assert partition.maybe_shrink_isr(LAG_MS) == (F1,)
