"""Realistic input for the example jobs: ad impressions and the clicks they lead to.

Deterministic for a seed. Click-through rates differ by campaign; most clicks come within a few
minutes of their impression, some much later (past the ten minutes the join allows), and events
are published keyed by user, so one user's events stay in order in one partition.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Producer

from samsa_spark.client import ProducerErrors

CAMPAIGNS = ("spring-sale", "new-shoes", "travel", "books", "gadgets", "coffee")


@dataclass(frozen=True)
class Impression:
    impression_id: str
    ad_id: str
    campaign_id: str
    user_id: str
    event_time_ms: int


@dataclass(frozen=True)
class Click:
    click_id: str
    impression_id: str
    ad_id: str
    campaign_id: str
    user_id: str
    event_time_ms: int


def generate(
    impressions: int,
    seed: int = 7,
    start_ms: int = 1_767_225_600_000,  # 2026-01-01T00:00:00Z
    span_minutes: int = 60,
    users: int = 500,
) -> tuple[list[Impression], list[Click]]:
    rng = random.Random(seed)
    ctr = {c: 0.04 + 0.03 * i for i, c in enumerate(CAMPAIGNS)}
    span_ms = span_minutes * 60_000
    imps: list[Impression] = []
    clicks: list[Click] = []
    for n in range(impressions):
        campaign = rng.choice(CAMPAIGNS)
        imp = Impression(
            impression_id=f"imp-{n}",
            ad_id=f"{campaign}-ad{rng.randrange(4)}",
            campaign_id=campaign,
            user_id=f"user-{rng.randrange(users)}",
            event_time_ms=start_ms + n * span_ms // impressions + rng.randrange(1000),
        )
        imps.append(imp)
        if rng.random() < ctr[campaign]:
            if rng.random() < 0.85:
                delay = min(int(rng.expovariate(1 / 90_000)), 9 * 60_000)
            else:
                delay = rng.randrange(11 * 60_000, 30 * 60_000)
            clicks.append(
                Click(
                    click_id=f"click-{n}",
                    impression_id=imp.impression_id,
                    ad_id=imp.ad_id,
                    campaign_id=campaign,
                    user_id=imp.user_id,
                    event_time_ms=imp.event_time_ms + 1_000 + delay,
                )
            )
    clicks.sort(key=lambda c: c.event_time_ms)
    return imps, clicks


def closed_window_counts(
    clicks: Iterable[Click], window_ms: int = 5 * 60_000, lateness_ms: int = 10 * 60_000
) -> dict[tuple[str, str], int]:
    """What job (a) appends for these clicks, worked out by hand: clicks per (campaign, window
    start in ISO UTC) for every window the watermark (the latest click less the lateness) has
    closed."""
    clicks = list(clicks)
    watermark = max(c.event_time_ms for c in clicks) - lateness_ms
    counts: Counter[tuple[str, str]] = Counter()
    for c in clicks:
        start = c.event_time_ms // window_ms * window_ms
        if start + window_ms <= watermark:
            iso = datetime.fromtimestamp(start / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            counts[(c.campaign_id, iso)] += 1
    return dict(counts)


def records(events: Iterable[Impression | Click]) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs: the user id, and the event as JSON."""
    return [(e.user_id.encode(), json.dumps(asdict(e)).encode()) for e in events]


def publish(
    bootstrap: str,
    topic: str,
    events: Iterable[Impression | Click],
    kafka: Mapping[str, Any] | None = None,
) -> int:
    """Publish events and wait until every one is acknowledged; returns how many.

    Raises `IdempotenceUnsupportedError` if asked for an idempotent producer (the default in
    `kafka`'s absence is librdkafka's) by brokers that have none.
    """
    errors = ProducerErrors(bootstrap)
    conf: dict[str, Any] = {"linger.ms": 5, "acks": "all", **(kafka or {}), **errors.conf()}
    p = Producer(conf)

    n = 0
    for key, value in records(events):
        errors.produce(p, topic, value, key)
        n += 1
    errors.flush(p, 60)
    return n
