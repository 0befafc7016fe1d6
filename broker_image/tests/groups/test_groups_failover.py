"""A member killed without leaving (kill -9): the group notices within the session timeout,
gives its partitions to the others in one rebalance, and they resume from its last commit."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from groups_support import (
    HEARTBEAT_INTERVAL_MS,
    SESSION_TIMEOUT_MS,
    Member,
    MemberProcess,
    balanced,
    committed,
    end_offsets,
    fill,
    stop_all,
    wait_balanced,
)
from kafka_support import create_topic, wait_until

from samsa.testing import InProcessBroker

# A session timeout waited out: among the slowest group tests.
pytestmark = pytest.mark.slow

PARTITIONS = 6
PER_PARTITION = 2000
RECORDS = PARTITIONS * PER_PARTITION
# Room beyond the session timeout for one rebalance: the survivors hear of it at their next
# heartbeat and rejoin at once; the rest is slack for a loaded machine.
REBALANCE_ALLOWANCE_S = 3 * HEARTBEAT_INTERVAL_MS / 1000 + 4


def test_killed_member_partitions_move_to_the_others(
    broker: InProcessBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, PARTITIONS)
    victim = MemberProcess(bootstrap, group, topic, batch=100, stall_after=200)
    survivors = [Member(bootstrap, group, [topic], batch=100).start() for _ in range(2)]
    try:
        wait_until(lambda: victim.assignment, 30, what="the victim to get partitions")
        wait_until(
            lambda: balanced([victim.assignment, *(m.assignment for m in survivors)], PARTITIONS),
            30,
            what="three members with two partitions each",
        )
        theirs = victim.assignment
        fill(bootstrap, topic, RECORDS, PARTITIONS)
        ends = dict.fromkeys(range(PARTITIONS), PER_PARTITION)
        wait_until(lambda: victim.saw("stalled"), 30, what="the victim to stall")
        last_commit = victim.committed
        killed_at = time.monotonic()
        victim.kill()

        wait_balanced(survivors, PARTITIONS, timeout=SESSION_TIMEOUT_MS / 1000 + 30)
        took = max(m.rebalances_since(killed_at)[-1].at for m in survivors) - killed_at
        assert took < SESSION_TIMEOUT_MS / 1000 + REBALANCE_ALLOWANCE_S, (
            f"reassigned {took:.1f} s after the kill"
        )
        # One rebalance, not a storm: each survivor got its new partitions once.
        assert all(len(m.rebalances_since(killed_at)) == 1 for m in survivors)
        # Done when every partition is handled to its end, or was already committed there.
        wait_until(
            lambda: {**last_commit, **_positions(survivors)} == ends,
            60,
            what="the survivors to reach the end of every partition",
        )
        for m in survivors:
            assert not m.errors, m.errors[:5]
    finally:
        victim.close()
        stop_all(survivors)

    # The victim's partitions resumed exactly at its last commit: nothing skipped, and the
    # only records handled twice are those it handled after that commit.
    for p in theirs:
        first = min(
            (h.offset for m in survivors for h in m.handled if h.partition == p), default=ends[p]
        )
        assert first == last_commit.get(p, 0), (
            f"partition {p}: resumed at {first}, committed {last_commit.get(p, 0)}"
        )
    everything = [*victim.handled, *(h for m in survivors for h in m.handled)]
    assert {h.index for h in everything} == set(range(RECORDS))
    seen = Counter((h.partition, h.offset) for h in everything)
    twice = {pos for pos, n in seen.items() if n > 1}
    uncommitted = {
        (h.partition, h.offset)
        for h in victim.handled
        if h.offset >= last_commit.get(h.partition, 0)
    }
    assert uncommitted, "the victim should have died with handled records not yet committed"
    assert twice == uncommitted
    assert committed(bootstrap, group, topic, PARTITIONS) == end_offsets(
        bootstrap, topic, PARTITIONS
    )


def _positions(members: list[Member]) -> dict[int, int]:
    """The next offset the members will handle, by partition."""
    out: dict[int, int] = {}
    for m in members:
        for h in m.handled:
            out[h.partition] = max(out.get(h.partition, 0), h.offset + 1)
    return out
