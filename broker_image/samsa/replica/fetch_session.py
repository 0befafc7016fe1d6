"""Fetch sessions (KIP-227) between followers and their leader: pure logic, no I/O.

A follower's full Fetch names every partition it follows on the leader, and the answer
carries every one of them, records or not: with the partitions of ``__consumer_offsets``
and a few topics, each round trip of replication read, encoded, decoded and handled dozens
of partitions to move one. In a session the leader keeps the partitions and what it last
told the follower of each; the follower then sends only the partitions whose fetch changed
(and those it no longer fetches), and the leader answers only the partitions with records,
an error, or a high watermark, last stable offset or log start offset the follower has not
been told.

``FetchSessionCache`` is the leader's side (Kafka's FetchSessionCache and FetchContext),
``FetchSessionHandler`` the follower's (Kafka's FetchSessionHandler). Consumers get no
session: their answers carry session id 0, which Kafka's clients take as sessionless.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from samsa.metadata.model import TopicPartition
from samsa.protocol.errors import ErrorCode

INITIAL_EPOCH = 0  # a full fetch that asks for a new session
FINAL_EPOCH = -1  # a full fetch without a session (closing the one named, if any)
INVALID_SESSION_ID = 0

# What a fetch asks of one partition (FetchPartitionRequest, or a follower's request tuple).
F = TypeVar("F")


class FetchSessionError(Exception):
    """A request that names a session it cannot use; the whole answer is this error."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


@dataclass(slots=True)
class _Told:
    """What the follower was last told of a partition; -2: nothing yet."""

    high_watermark: int = -2
    last_stable_offset: int = -2
    log_start_offset: int = -2


class FetchSession(Generic[F]):
    """One follower's session: its partitions in order, each with its fetch and what the
    follower was last told of it."""

    def __init__(self, session_id: int, replica_id: int) -> None:
        self.id = session_id
        self.replica_id = replica_id
        self.epoch = 1  # the epoch the next incremental fetch must carry
        self.fetches: dict[TopicPartition, F] = {}
        self.told: dict[TopicPartition, _Told] = {}
        # Partitions a fetch found with nothing to tell the follower, at which version of the
        # partition's state: skipped while the version holds, so that a round trip of
        # replication costs the partitions that moved, not all the session holds.
        self.quiet: dict[TopicPartition, int] = {}
        # The leader's count of log start offsets moved by retention when ``quiet`` was
        # last valid: a move empties it.
        self.log_starts_moved = 0
        # When the follower fetched through the session last, and the time before (monotonic
        # ms): how long a skipped partition's follower has been caught up.
        self.fetch_ms = 0
        self.previous_fetch_ms = 0

    def fetched(self, now_ms: int) -> None:
        """A fetch through the session arrived."""
        self.previous_fetch_ms = self.fetch_ms
        self.fetch_ms = now_ms

    def update(
        self, changed: Iterable[tuple[TopicPartition, F]], forgotten: Iterable[TopicPartition]
    ) -> None:
        """An incremental fetch: its partitions added or changed, its forgotten ones gone."""
        quiet = self.quiet
        for tp in forgotten:
            self.fetches.pop(tp, None)
            self.told.pop(tp, None)
            quiet.pop(tp, None)
        for tp, fetch in changed:
            self.fetches[tp] = fetch
            quiet.pop(tp, None)

    def told_already(self, tp: TopicPartition, hw: int, lso: int, start: int) -> bool:
        """Whether the follower was told these offsets of ``tp`` last."""
        told = self.told.get(tp)
        return (
            told is not None
            and told.high_watermark == hw
            and told.last_stable_offset == lso
            and told.log_start_offset == start
        )

    def must_answer(
        self, tp: TopicPartition, error: int, has_records: bool, hw: int, lso: int, start: int
    ) -> bool:
        """Whether an incremental answer carries the partition, and remember what it tells."""
        told = self.told.get(tp)
        if told is None:
            told = self.told[tp] = _Told()
        news = bool(error) or has_records
        if told.high_watermark != hw:
            told.high_watermark = hw
            news = True
        if told.last_stable_offset != lso:
            told.last_stable_offset = lso
            news = True
        if told.log_start_offset != start:
            told.log_start_offset = start
            news = True
        return news


class FetchSessionCache(Generic[F]):
    """The leader's sessions, the least recently used evicted first when the slots
    (max.incremental.fetch.session.cache.slots) are full."""

    def __init__(self, slots: int, ids: Callable[[], int] | None = None) -> None:
        self.slots = slots
        self._sessions: OrderedDict[int, FetchSession[F]] = OrderedDict()
        self._ids = ids or (lambda: random.randint(1, 2**31 - 1))

    def __len__(self) -> int:
        return len(self._sessions)

    def context(
        self, session_id: int, epoch: int, replica_id: int
    ) -> tuple[FetchSession[F] | None, bool]:
        """(the session a fetch uses, whether it is incremental), as Kafka's
        FetchManager.newContext: epoch 0 opens a session, -1 fetches without one (closing
        the one named); any other epoch is the next of an open session's.
        Raises FetchSessionError for a session unknown or out of step."""
        if epoch == FINAL_EPOCH:
            self._sessions.pop(session_id, None)
            return None, False
        if epoch == INITIAL_EPOCH:
            self._sessions.pop(session_id, None)
            return self._open(replica_id), False
        session = self._sessions.get(session_id)
        if session is None or session.replica_id != replica_id:
            raise FetchSessionError(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            raise FetchSessionError(ErrorCode.invalid_fetch_session_epoch)
        session.epoch += 1
        self._sessions.move_to_end(session_id)
        return session, True

    def _open(self, replica_id: int) -> FetchSession[F] | None:
        if self.slots <= 0:
            return None
        while len(self._sessions) >= self.slots:
            self._sessions.popitem(last=False)
        session_id = self._ids()
        while session_id in self._sessions or session_id == INVALID_SESSION_ID:
            session_id = self._ids()
        session: FetchSession[F] = FetchSession(session_id, replica_id)
        self._sessions[session_id] = session
        return session


@dataclass(frozen=True)
class FetchPlan(Generic[F]):
    """One fetch request of a follower: the session fields and what it names."""

    session_id: int
    epoch: int
    send: list[tuple[TopicPartition, F]]
    forgotten: list[TopicPartition]


# Held for a partition the leader may or may not hold: equal to no fetch, so it is named again
# when wanted, and forgotten when not.
_NAME_AGAIN: Any = object()


class FetchSessionHandler(Generic[F]):
    """The follower's side of a session with one leader.

    ``plan`` turns the fetches wanted now into a request: the full set when there is no
    session, else only what changed since the last answered request and what is no longer
    wanted. ``answered`` takes the answer's session id, or ``failed`` a lost request, after
    which the next request is full again."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._held: dict[TopicPartition, F] = {}  # what the leader's session holds
        self._pending: dict[TopicPartition, F] | None = None

    def plan(self, wanted: Sequence[tuple[TopicPartition, F]]) -> FetchPlan[F]:
        self._pending = dict(wanted)
        if self.session_id == INVALID_SESSION_ID:
            return FetchPlan(INVALID_SESSION_ID, INITIAL_EPOCH, list(wanted), [])
        held = self._held
        send = [(tp, f) for tp, f in wanted if held.get(tp) != f]
        forgotten = [tp for tp in held if tp not in self._pending]
        return FetchPlan(self.session_id, self.epoch, send, forgotten)

    def answered(self, session_id: int) -> None:
        """The answer to the planned request came back without a session error."""
        pending = self._pending or {}
        self._pending = None
        if self.session_id == INVALID_SESSION_ID:
            if session_id == INVALID_SESSION_ID:
                return  # the leader declined a session: full fetches go on
            self.session_id = session_id
            self.epoch = 1
        else:
            self.epoch += 1
        self._held = pending

    def resend(self, tp: TopicPartition) -> None:
        """``tp`` was answered with an error, or answered though this follower no longer
        fetches it: name it in full in the next request that wants it, and forget it in the
        next that does not. The leader keeps a partition it could not place out of the
        session, but keeps one whose read failed (not leader, a fenced epoch): a partition
        merely dropped from what is held would stay in the leader's session unnamed, be read
        and answered with its error on every fetch, at once, and spin the follower."""
        self._held[tp] = _NAME_AGAIN

    def failed(self) -> None:
        """A session error, or a request lost on the way: start again with a full fetch."""
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._held = {}
        self._pending = None
