"""Where a follower truncates its log before fetching from a new leader (KIP-101, KIP-279).

Pure logic: given what the leader answered to OffsetForLeaderEpoch for the follower's latest
epoch, and what the follower knows of its own epochs, decide the offset to truncate to and
whether another round is needed.  This is Kafka's AbstractFetcherThread
getOffsetTruncationState.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True)
class TruncationState:
    offset: int
    # False: truncate to ``offset``, then ask the leader again about an older epoch.
    completed: bool


def offset_truncation_state(
    leader_epoch: int,
    leader_end_offset: int,
    replica_end_offset: int,
    high_watermark: int,
    follower_end_offset_for: Callable[[int], tuple[int, int] | None],
) -> TruncationState:
    """``leader_epoch``/``leader_end_offset``: the leader's answer. ``follower_end_offset_for``
    gives the follower's (largest epoch <= e, its end offset), or None with no epochs."""
    if leader_end_offset == UNDEFINED_OFFSET:
        # The leader knows nothing of our epoch (its own log is empty or older): fall back to
        # the high watermark, the pre-KIP-101 rule.
        return TruncationState(min(high_watermark, replica_end_offset), True)
    if leader_epoch == UNDEFINED_EPOCH:
        return TruncationState(min(leader_end_offset, replica_end_offset), True)
    found = follower_end_offset_for(leader_epoch)
    if found is None or found[0] == UNDEFINED_EPOCH:
        return TruncationState(min(leader_end_offset, replica_end_offset), True)
    follower_epoch, follower_end = found
    if follower_epoch != leader_epoch:
        # We never had the leader's epoch: cut back to the end of our largest earlier epoch and
        # ask again about that one.
        return TruncationState(min(follower_end, replica_end_offset), False)
    return TruncationState(min(follower_end, leader_end_offset, replica_end_offset), True)
