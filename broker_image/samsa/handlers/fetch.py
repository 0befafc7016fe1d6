"""Fetch (1): read committed batches, long-polling until min_bytes or max_wait.

isolation_level=1 (read_committed) reads below the last stable offset and gets the aborted
transactions overlapping what it reads, from the segments' `.txnindex`.

Fetch sessions (KIP-227, samsa.replica.fetch_session) are kept for followers: a session's
fetch reads all its partitions, and an incremental answer carries only those with news.
Consumers get none: their answers carry session id 0, so they keep sending full fetches, and
an incremental fetch of an unknown session gets FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from samsa.handlers import throttling
from samsa.handlers.authorization import cluster_allowed, topic_allowed
from samsa.handlers.context import BrokerServices, RequestContext
from samsa.metadata import TopicPartition
from samsa.protocol.errors import ErrorCode
from samsa.protocol.fetch_request import parse_fetch_request
from samsa.protocol.messages import ms
from samsa.protocol.produce_fetch_responses import (
    FetchPartitionResult,
    FetchTopicResult,
    encode_fetch_response,
)
from samsa.replica import FetchPartitionRequest, FetchPartitionResponse
from samsa.replica.fetch_session import FINAL_EPOCH, FetchSession, FetchSessionError
from samsa.security.acl import AclOperation
from samsa.wall_clock import monotonic_ms

KEY = 1
MIN_VERSION, MAX_VERSION = 4, 18
decode = parse_fetch_request
ZERO_UUID = uuid.UUID(int=0)


# One partition of the answer, in the request's order: (topic name, topic id, partition,
# the error it is answered with, or None for a partition read).
Entry = tuple[str | None, uuid.UUID, int, int | None]


def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    replica_state = getattr(request, "replica_state", None)
    replica_id = (
        replica_state.replica_id
        if replica_state is not None
        else getattr(request, "replica_id", -1)
    )
    ctx.metric_name = "FetchFollower" if replica_id >= 0 else "FetchConsumer"
    # Followers fetch with CLUSTER_ACTION on the cluster, consumers with READ on each topic.
    follower_allowed = replica_id < 0 or cluster_allowed(services, ctx, AclOperation.CLUSTER_ACTION)
    try:
        session, incremental = _session_context(
            services, request, version, replica_id, follower_allowed
        )
    except FetchSessionError as exc:
        return encode_fetch_response(
            version, ctx.header.correlation_id, [], error_code=exc.code.value
        )
    order, reads = _requested(services, ctx, request, replica_id, follower_allowed)
    if session is not None:
        order, reads, tps = _session_fetch(
            services, request, session, incremental, order, reads, replica_id
        )
    else:
        tps = [r.tp for r in reads]
    max_bytes = request.max_bytes
    isolation = request.isolation_level
    # KIP-392: consumers sending client metadata (v11+) may read from a follower.
    from_follower = replica_id < 0 and version >= 11
    responses, total = services.replica_manager.read(
        reads, max_bytes, isolation, replica_id, from_follower
    )
    max_wait_ms = ms(request.max_wait)
    unknown = len(reads) != len(order)  # partitions answered with an error already
    if total >= request.min_bytes or max_wait_ms <= 0 or unknown or not tps or _failed(responses):
        return _encode(services, ctx, order, responses, session, incremental)
    # Watched as soon as it is read, here as in the long poll: an append handled before the
    # long poll's task first runs (another connection's Produce in the same loop turn) must
    # wake it. Missed, it cost a follower its whole wait (replica.fetch.wait.max.ms) while a
    # producer waited on acks=all.
    watched = services.replica_manager.waiters.watch(tps, replica_id >= 0)
    return _long_poll(
        watched,
        tps,
        services,
        ctx,
        order,
        reads,
        max_bytes,
        isolation,
        replica_id,
        from_follower,
        request.min_bytes,
        max_wait_ms,
        session,
        incremental,
    )


def _session_context(
    services: BrokerServices, request: Any, version: int, replica_id: int, follower_allowed: bool
) -> tuple[FetchSession[FetchPartitionRequest] | None, bool]:
    """(the fetch session this fetch uses, whether it is incremental); sessions are kept for
    followers allowed to fetch (v7+) only. FetchSessionError: the whole answer is that error,
    as for a consumer naming a session (it has none)."""
    session_id = getattr(request, "session_id", 0)
    epoch = getattr(request, "session_epoch", FINAL_EPOCH)
    sessions = services.fetch_sessions
    if replica_id >= 0 and follower_allowed and sessions is not None and version >= 7:
        return sessions.context(session_id, epoch, replica_id)
    if session_id != 0 and epoch != FINAL_EPOCH:
        raise FetchSessionError(ErrorCode.fetch_session_id_not_found)
    return None, False


def _requested(
    services: BrokerServices,
    ctx: RequestContext,
    request: Any,
    replica_id: int,
    follower_allowed: bool,
) -> tuple[list[Entry], list[FetchPartitionRequest]]:
    """The partitions the request names, in its order, and the reads of those it may read;
    the others (unknown, or not authorized) are answered with an error."""
    cache = services.cache
    order: list[Entry] = []
    reads: list[FetchPartitionRequest] = []
    for topic in request.topics:
        topic_id = getattr(topic, "topic_id", None) or ZERO_UUID
        name = getattr(topic, "topic", None)
        if name is None:
            name = cache.topic_name(topic_id)
        meta = cache.topic(name) if name is not None else None
        denied = meta is not None and not (
            follower_allowed
            if replica_id >= 0
            else topic_allowed(services, ctx, AclOperation.READ, meta.name)
        )
        for p in topic.partitions:
            if denied:
                order.append(
                    (name, topic_id, p.partition, ErrorCode.topic_authorization_failed.value)
                )
                continue
            if meta is None:
                code = (
                    ErrorCode.unknown_topic_id
                    if ctx.version >= 13
                    else ErrorCode.unknown_topic_or_partition
                )
                order.append((name, topic_id, p.partition, code.value))
                continue
            order.append((name, meta.topic_id, p.partition, None))
            reads.append(
                FetchPartitionRequest(
                    TopicPartition(meta.name, p.partition),
                    p.fetch_offset,
                    p.partition_max_bytes,
                    getattr(p, "current_leader_epoch", -1),
                    getattr(p, "log_start_offset", -1),
                )
            )
    return order, reads


def _session_fetch(
    services: BrokerServices,
    request: Any,
    session: FetchSession[FetchPartitionRequest],
    incremental: bool,
    order: list[Entry],
    reads: list[FetchPartitionRequest],
    replica_id: int,
) -> tuple[list[Entry], list[FetchPartitionRequest], list[TopicPartition]]:
    """A session's fetch: the session updated with what this fetch names, then (the answer's
    order, the reads, the partitions watched). The session's partitions are what this fetch
    watches, the ones it names included; those it named with an error are answered with it
    and kept out of the session."""
    errors = [entry for entry in order if entry[3] is not None]
    dropped = [TopicPartition(e[0], e[2]) for e in errors if e[0] is not None]
    if incremental:
        dropped += _forgotten(services, request)
    named = {r.tp for r in reads}
    session.update(((r.tp, r) for r in reads), dropped)
    session.fetched(monotonic_ms())
    tps = list(session.fetches)
    reads = _session_reads(services, session, named, replica_id)
    return _in_order(services, errors, reads), reads, tps


async def _long_poll(
    watched: asyncio.Future[float | None],
    tps: list[TopicPartition],
    services: BrokerServices,
    ctx: RequestContext,
    order: list[Entry],
    reads: list[FetchPartitionRequest],
    max_bytes: int,
    isolation: int,
    replica_id: int,
    from_follower: bool,
    min_bytes: int,
    max_wait_ms: int,
    session: FetchSession[FetchPartitionRequest] | None,
    incremental: bool,
) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_ms / 1000
    manager = services.replica_manager
    while True:
        remaining = deadline - loop.time()
        woken = await manager.wait_for_data(tps, remaining, replica_id >= 0, watched)
        if session is not None:
            reads = _session_reads(services, session, set(), replica_id)
            order = _in_order(services, [e for e in order if e[3] is not None], reads)
        responses, total = manager.read(reads, max_bytes, isolation, replica_id, from_follower)
        if woken is None or total >= min_bytes or _failed(responses):
            answer = _encode(services, ctx, order, responses, session, incremental)
            if woken is not None and replica_id < 0:
                manager.stages.since("consumer_wake", woken)
            return answer
        watched = manager.waiters.watch(tps, replica_id >= 0)


def _session_reads(
    services: BrokerServices,
    session: FetchSession[FetchPartitionRequest],
    named: set[TopicPartition],
    replica_id: int,
) -> list[FetchPartitionRequest]:
    """The session's partitions this fetch reads: those it named, and those with something
    to tell. The rest, a follower at the end of the log with the offsets it was told last,
    cost only a check, made once: the partition is skipped until its state's version moves.
    A read of each on every round trip was most of a leader's work for a follower with a few
    busy partitions among many idle ones (``__consumer_offsets``), and then the check of each
    was still a fifth of it."""
    manager = services.replica_manager
    skipped = session.quiet
    if session.log_starts_moved != manager.log_starts_moved:
        skipped.clear()
        session.log_starts_moved = manager.log_starts_moved
    partitions = manager.partitions
    quiet = manager.quiet
    out: list[FetchPartitionRequest] = []
    for tp, req in session.fetches.items():
        if tp in named:
            out.append(req)
            continue
        partition = partitions.get(tp)
        if partition is None:
            out.append(req)
            continue
        version = partition.version
        if skipped.get(tp) == version:
            continue
        offsets = quiet(partition, req, replica_id, session)
        if offsets is not None and session.told_already(tp, *offsets):
            skipped[tp] = version
            continue
        skipped.pop(tp, None)
        out.append(req)
    return out


def _failed(responses: list[FetchPartitionResponse]) -> bool:
    """Worth answering before min_bytes: an error (Kafka's errorReadingData). A high watermark
    that is news to a follower is not: it goes in the answer to the follower's next fetch.
    Kafka 2.4 answered at once for it, and dropped that in KAFKA-9731, unless a replica
    selector sends consumers to followers (Samsa has none): it cost every follower one more
    round trip per step of the high watermark."""
    return any(r.error_code for r in responses)


def _encode(
    services: BrokerServices,
    ctx: RequestContext,
    order: list[Entry],
    responses: list[FetchPartitionResponse],
    session: FetchSession[FetchPartitionRequest] | None = None,
    incremental: bool = False,
) -> list[Any]:
    on_fetch = services.on_fetch
    topics: list[FetchTopicResult] = []
    current: FetchTopicResult | None = None
    size = 0
    it = iter(responses)
    for name, topic_id, partition, error in order:
        r = next(it) if error is None else None
        if r is not None and session is not None:
            # Called for every partition read, so that the session remembers what it tells.
            news = session.must_answer(
                r.tp,
                r.error_code,
                bool(r.records),
                r.high_watermark,
                r.last_stable_offset,
                r.log_start_offset,
            )
            if incremental and not news:
                continue
        if current is None or current.name != name or current.topic_id != topic_id:
            current = FetchTopicResult(name or "", topic_id, [])
            topics.append(current)
        if r is None:
            assert error is not None  # r is None only for a partition refused before the read
            # Empty records, not null, as Kafka (librdkafka rejects a null record set).
            current.partitions.append(FetchPartitionResult(partition, error, -1, -1, -1, b""))
            continue
        if r.records:
            size += len(r.records)
            on_fetch(r.tp.topic, r.messages, len(r.records))
        current.partitions.append(
            FetchPartitionResult(
                partition,
                r.error_code,
                r.high_watermark,
                r.last_stable_offset,
                r.log_start_offset,
                r.records,
                r.aborted_transactions,
            )
        )
    throttle = throttling.fetch(services, ctx, size) if services.quotas.active else 0
    return encode_fetch_response(
        ctx.version,
        ctx.header.correlation_id,
        [] if throttle else topics,  # a throttled fetch is answered empty, as Kafka's
        throttle,
        session_id=session.id if session is not None else 0,
    )


def _in_order(
    services: BrokerServices,
    errors: list[Entry],
    reads: list[FetchPartitionRequest],
) -> list[Entry]:
    """A session fetch's answer order: the partitions named with an error, then those read."""
    return errors + [_entry(services, r.tp) for r in reads]


def _entry(services: BrokerServices, tp: TopicPartition) -> tuple[str, uuid.UUID, int, None]:
    """A session's partition as the answer names it."""
    meta = services.cache.topic(tp.topic)
    return (tp.topic, meta.topic_id if meta is not None else ZERO_UUID, tp.partition, None)


def _forgotten(services: BrokerServices, request: Any) -> list[TopicPartition]:
    """The partitions an incremental fetch drops from its session: by name to v12, by topic
    id from v13."""
    out: list[TopicPartition] = []
    for topic in getattr(request, "forgotten_topics_data", None) or ():
        name = getattr(topic, "topic", None)
        if name is None:
            name = services.cache.topic_name(getattr(topic, "topic_id", ZERO_UUID))
        if name is not None:
            out.extend(TopicPartition(name, p) for p in topic.partitions)
    return out
