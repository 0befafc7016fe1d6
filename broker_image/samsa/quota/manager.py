"""ClientQuotaManager: one quota type's sensors (Produce, Fetch or Request), as Kafka's
ClientQuotaManager and ClientRequestQuotaManager keep them: a rate per set of metric tags
(the clients that share one quota), recorded on each request, and the throttle time of a
violation. QuotaManagers holds the three and the quota configs they are built from.

With no quota configured anywhere ``QuotaManagers.active`` is False, and the request path
asks nothing else: that one attribute is all quotas cost a broker that has none.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.quota.entities import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    Tags,
    limits_of,
    metric_tags,
    quota_limit,
)
from samsa.quota.rate import Rate, throttle_time_ms

# Kafka's InactiveSensorExpirationTimeSeconds: a client's sensors go after an idle hour.
INACTIVE_SENSOR_EXPIRY_MS = 3600 * 1000
_PURGE_EVERY_MS = 60 * 1000


class ClientSensor:
    """The rate of one quota's clients, its bound, and the throttle times they were given."""

    __slots__ = ("bound", "last_ms", "rate", "tags", "throttle_ms_total", "throttles")

    def __init__(self, tags: Tags, rate: Rate, bound: float | None, now_ms: int) -> None:
        self.tags = tags
        self.rate = rate
        self.bound = bound
        self.throttle_ms_total = 0
        self.throttles = 0
        self.last_ms = now_ms


class ClientQuotaManager:
    """One quota type: ``key`` is its config key, ``quota_type`` Kafka's metric group name."""

    def __init__(
        self,
        quota_type: str,
        key: str,
        samples: int,
        window_ms: int,
        max_throttle_ms: int | None = None,
    ) -> None:
        self.quota_type = quota_type
        self.key = key
        self.samples = samples
        self.window_ms = window_ms
        # Request quotas throttle at most one window (ClientRequestQuotaManager); byte rates
        # are unbounded.
        self.max_throttle_ms = max_throttle_ms
        self.limits: dict[QuotaEntity, float] = {}
        self.sensors: dict[Tags, ClientSensor] = {}
        # (user, client id) -> its sensor: one dict lookup a request once resolved.
        self._resolved: dict[tuple[str, str], ClientSensor] = {}
        self._purged_ms = 0

    @property
    def enabled(self) -> bool:
        return bool(self.limits)

    def update(self, configs: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """New quota configs: every client is resolved again, and sensors keep their rates
        under their new bounds, as Kafka changes a metric's config in place."""
        self.limits = limits_of(configs, self.key)
        self._resolved.clear()
        for tags, sensor in self.sensors.items():
            sensor.bound = quota_limit(self.limits, tags)

    def sensor(self, user: str, client_id: str, now_ms: int) -> ClientSensor:
        found = self._resolved.get((user, client_id))
        if found is not None:
            return found
        if now_ms - self._purged_ms >= _PURGE_EVERY_MS:
            self._purge(now_ms)
        tags = metric_tags(self.limits, user, client_id)
        sensor = self.sensors.get(tags)
        if sensor is None:
            sensor = self.sensors[tags] = ClientSensor(
                tags, Rate(self.samples, self.window_ms), quota_limit(self.limits, tags), now_ms
            )
        self._resolved[(user, client_id)] = sensor
        return sensor

    def _purge(self, now_ms: int) -> None:
        self._purged_ms = now_ms
        idle = [
            t for t, s in self.sensors.items() if now_ms - s.last_ms >= INACTIVE_SENSOR_EXPIRY_MS
        ]
        if idle:
            for tags in idle:
                del self.sensors[tags]
            self._resolved.clear()

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` for the client; the throttle time in ms its quota now asks, 0
        within it (Kafka's recordAndGetThrottleTimeMs)."""
        sensor = self.sensor(user, client_id, now_ms)
        sensor.last_ms = now_ms
        rate = sensor.rate
        rate.record(value, now_ms)
        bound = sensor.bound
        if bound is None:
            return 0
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        throttle = throttle_time_ms(observed, bound, rate.window_size_ms(now_ms))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return max(throttle, 0)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch is answered empty)."""
        self.sensor(user, client_id, now_ms).rate.record(-value, now_ms)

    def throttled(self, user: str, client_id: str, throttle_ms: int, now_ms: int) -> None:
        sensor = self.sensor(user, client_id, now_ms)
        sensor.throttle_ms_total += throttle_ms
        sensor.throttles += 1


class QuotaManagers:
    """The Produce, Fetch and Request quota managers, fed from the stored quota configs."""

    def __init__(self, samples: int = 11, window_seconds: int = 1) -> None:
        window_ms = window_seconds * 1000
        self.produce = ClientQuotaManager("Produce", PRODUCER_BYTE_RATE, samples, window_ms)
        self.fetch = ClientQuotaManager("Fetch", CONSUMER_BYTE_RATE, samples, window_ms)
        self.request = ClientQuotaManager(
            "Request", REQUEST_PERCENTAGE, samples, window_ms, max_throttle_ms=window_ms
        )
        self.all = (self.produce, self.fetch, self.request)
        self.configs: dict[QuotaEntity, dict[str, float]] = {}
        self.active = False

    def update(self, configs: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self.configs = {e: dict(v) for e, v in configs.items()}
        for manager in self.all:
            manager.update(self.configs)
        self.active = any(m.enabled for m in self.all)
