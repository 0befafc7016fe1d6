"""The operator's own Prometheus metrics: how often each kind of resource is reconciled, how
long that takes and how often it fails, and when each certificate of a secured cluster ends,
served on a port of their own (/metrics) beside kopf's liveness endpoint, which serves
nothing else."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)

T = TypeVar("T")

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)

RECONCILES = Counter(
    "samsa_operator_reconciles",
    "Reconciliations run, by resource kind",
    ["kind"],
    registry=REGISTRY,
)
RECONCILE_ERRORS = Counter(
    "samsa_operator_reconcile_errors",
    "Reconciliations that raised (kopf retries them), by resource kind",
    ["kind"],
    registry=REGISTRY,
)
RECONCILE_SECONDS = Histogram(
    "samsa_operator_reconcile_duration_seconds",
    "Time one reconciliation takes, by resource kind",
    ["kind"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
    registry=REGISTRY,
)

CERTIFICATE_EXPIRY = Gauge(
    "samsa_operator_certificate_expiry_timestamp_seconds",
    "When each certificate of a secured KafkaCluster ends (Unix time): its CAs, its brokers', "
    "the operator's own and its listeners' own",
    ["kafka_namespace", "kafka_cluster", "certificate"],
    registry=REGISTRY,
)
# (namespace, cluster) -> the certificates last reported, so that gone ones are removed.
_REPORTED: dict[tuple[str, str], set[str]] = {}

# Every kind's series exist from the start, at 0: rate() over them then works from the first
# reconciliation on, and a dashboard shows a kind that never failed as 0, not as no data.
for _kind in ("KafkaCluster", "Topic", "KafkaUser"):
    for _family in (RECONCILES, RECONCILE_ERRORS, RECONCILE_SECONDS):
        _family.labels(_kind)


async def measured(kind: str, step: Callable[[], Awaitable[T]]) -> T:
    """Run one reconciliation of a ``kind`` resource, counted and timed."""
    RECONCILES.labels(kind).inc()
    started = time.perf_counter()
    try:
        return await step()
    except BaseException:
        RECONCILE_ERRORS.labels(kind).inc()
        raise
    finally:
        RECONCILE_SECONDS.labels(kind).observe(time.perf_counter() - started)


def certificates_end(namespace: str, cluster: str, ends: Mapping[str, float]) -> None:
    """Report the ends of a cluster's certificates, by name; the ones it no longer has (a
    broker scaled away, the cluster no longer secured, or gone: `ends` empty) are removed."""
    before = _REPORTED.get((namespace, cluster), set())
    for name in before - ends.keys():
        CERTIFICATE_EXPIRY.remove(namespace, cluster, name)
    for name, end in ends.items():
        CERTIFICATE_EXPIRY.labels(namespace, cluster, name).set(end)
    if ends:
        _REPORTED[namespace, cluster] = set(ends)
    else:
        _REPORTED.pop((namespace, cluster), None)


def serve(host: str, port: int) -> int:
    """Serve /metrics in a thread of its own; the port bound (``port`` 0: a free one)."""
    server, _ = start_http_server(port, addr=host, registry=REGISTRY)
    return int(server.server_port)
