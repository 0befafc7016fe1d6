"""Client quota enforcement on the request path (Kafka's KafkaApis quota calls, KIP-219): the
value each request records against its client's quota, the throttle time the response
carries at once, and the muting of the connection for that long.

- Produce records the request's size once its batches are appended, and its handling time
  against request_percentage (not for acks=0, as Kafka);
- a consumer's Fetch records its answer's size and its handling time; a throttled fetch is
  answered empty and its bytes taken back, as Kafka answers it;
- every other request records its handling time on the event loop, except those brokers
  send each other (Kafka's cluster actions), which are exempt.

Each entry point first asks ``services.quotas.active``: with no quota configured that is the
whole cost.
"""

from __future__ import annotations

import time

from samsa.handlers.context import BrokerServices, RequestContext
from samsa.quota.manager import ClientQuotaManager
from samsa.wall_clock import monotonic_ms

# Kafka's ApiKeys with clusterAction: LeaderAndIsr, StopReplica, UpdateMetadata,
# ControlledShutdown, WriteTxnMarkers, AlterPartition; and ApiVersions and SASL, which come
# before a client is known.
EXEMPT_APIS = frozenset((4, 5, 6, 7, 17, 18, 27, 36, 56))
PRODUCE, FETCH = 0, 1
# request_percentage counts time in percent of one event loop: seconds * 100.
_PERCENT = 100.0


def _client(ctx: RequestContext) -> tuple[str, str]:
    session = getattr(ctx.conn, "session", None)
    user = session.principal.name if session is not None else "ANONYMOUS"
    return user, ctx.header.client_id or ""


def on_loop(ctx: RequestContext) -> float:
    """The request's handling time on the event loop: all of it for an answer given at once;
    for an awaited one, its part before it first waited (a long poll's wait is no work)."""
    return time.perf_counter() - ctx.started if ctx.on_loop is None else ctx.on_loop


def _throttle(
    services: BrokerServices,
    ctx: RequestContext,
    user: str,
    client_id: str,
    now_ms: int,
    bandwidth: tuple[ClientQuotaManager, int] | None,
    handled_s: float | None,
) -> int:
    """The larger of the bandwidth and request throttle times; the connection is muted for it
    and the manager that asked for it records it, as Kafka's throttle()."""
    quotas = services.quotas
    byte_ms = 0
    if bandwidth is not None:
        manager, byte_ms = bandwidth
    request_ms = 0
    if handled_s is not None and quotas.request.enabled:
        request_ms = quotas.request.record(user, client_id, handled_s * _PERCENT, now_ms)
    throttle = max(byte_ms, request_ms)
    if throttle > 0:
        chosen = manager if bandwidth is not None and byte_ms > request_ms else quotas.request
        chosen.throttled(user, client_id, throttle, now_ms)
        ctx.conn.mute_for(throttle)
    return throttle


def produce(services: BrokerServices, ctx: RequestContext, acks: int) -> int:
    """A Produce's throttle time in ms, once its batches are appended."""
    quotas = services.quotas
    if not quotas.active:
        return 0
    user, client_id = _client(ctx)
    now = monotonic_ms()
    bandwidth = None
    if quotas.produce.enabled:
        bandwidth = (
            quotas.produce,
            quotas.produce.record(user, client_id, ctx.size, now),
        )
    handled = None if acks == 0 else on_loop(ctx)
    return _throttle(services, ctx, user, client_id, now, bandwidth, handled)


def fetch(services: BrokerServices, ctx: RequestContext, size: int) -> int:
    """A consumer Fetch's throttle time in ms for an answer of ``size`` bytes; when it is not
    0 the answer must be empty, and its bytes are not counted."""
    quotas = services.quotas
    if not quotas.active or ctx.metric_name == "FetchFollower":
        return 0
    user, client_id = _client(ctx)
    now = monotonic_ms()
    bandwidth = None
    if quotas.fetch.enabled:
        bandwidth = (quotas.fetch, quotas.fetch.record(user, client_id, size, now))
    throttle = _throttle(services, ctx, user, client_id, now, bandwidth, on_loop(ctx))
    if throttle and bandwidth is not None:
        quotas.fetch.unrecord(user, client_id, size, now)
    return throttle


def request(services: BrokerServices, ctx: RequestContext, api_key: int, handled_s: float) -> int:
    """Any other request's throttle time in ms under request_percentage."""
    if not services.quotas.request.enabled or api_key in EXEMPT_APIS or api_key in (PRODUCE, FETCH):
        return 0
    user, client_id = _client(ctx)
    return _throttle(services, ctx, user, client_id, monotonic_ms(), None, handled_s)
