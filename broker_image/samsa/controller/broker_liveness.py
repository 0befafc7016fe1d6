"""Broker liveness: which registered brokers count as live, sooner than ZooKeeper says.

A broker is live while its ZooKeeper registration (/brokers/ids/<id>) lasts; a registration
with a new czxid (the broker epoch) is a restarted broker, which is a death and a birth.  A
session lasts zookeeper.session.timeout.ms after its process dies, so the controller also
probes each broker: a probe whose connection is refused, reset or closed is evidence that no
process listens any more (a live but busy or paused broker still accepts connections in the
kernel, and its probes only time out).  ``confirm_probes`` such losses in a row within
``confirm_within_s`` make the broker dead: the controller fences it (new leaders, out of every
ISR) though its registration remains.  It is probed on: a fenced broker that answers again
(a network fault, not a crash) is taken back as if it had registered anew, a follower that
must catch up before it rejoins an ISR.  Slowness alone (timeouts) never confirms a death here;
that is left to the session timeout.

The decisions are pure (``ProbeTracker``, ``registration_changes``); ``BrokerProber`` does
the probing.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from samsa.client import BrokerConnection, ClientSecurity
from samsa.metadata.zk_data import RegisteredBroker
from samsa.protocol.messages import build, request_type

log = logging.getLogger(__name__)

_API_VERSIONS = 18
_PROBE = build(request_type(_API_VERSIONS, 0), {})


def registration_changes(
    known: Mapping[int, RegisteredBroker],
    current: Mapping[int, RegisteredBroker],
    fenced: Mapping[int, int] | None = None,
) -> tuple[set[int], set[int]]:
    """(dead, new) between the live brokers the controller knows and the registrations now in
    ZooKeeper: a broker registered anew is in both.  ``fenced`` maps brokers found dead while
    still registered to that registration's epoch: they are not new until it changes."""
    fenced = fenced or {}
    dead = {b for b, reg in known.items() if b not in current or current[b].epoch != reg.epoch}
    new = {
        b
        for b, reg in current.items()
        if (b not in known or b in dead) and fenced.get(b) != reg.epoch
    }
    return dead, new


class Probe(enum.Enum):
    ANSWERED = "answered"
    LOST = "lost"  # connection refused, reset or closed: nothing listens
    SLOW = "slow"  # no answer in time: busy, paused, or unreachable


class Verdict(enum.Enum):
    LIVE = "live"
    SUSPECT = "suspect"
    DEAD = "dead"


@dataclass(frozen=True)
class LivenessPolicy:
    confirm_probes: int = 3
    confirm_within_s: float = 2.0


@dataclass
class ProbeTracker:
    """One broker's probe history, reduced to a verdict: DEAD after enough losses in a row
    within the window, LIVE again on any answer."""

    policy: LivenessPolicy
    verdict: Verdict = Verdict.LIVE
    losses: int = 0
    suspect_since: float = 0.0

    def observe(self, probe: Probe, now: float) -> Verdict:
        if probe == Probe.ANSWERED:
            self.verdict, self.losses = Verdict.LIVE, 0
        elif probe == Probe.LOST:
            if (
                self.verdict == Verdict.LIVE
                or now - self.suspect_since > self.policy.confirm_within_s
            ):
                self.verdict, self.losses, self.suspect_since = Verdict.SUSPECT, 0, now
            self.losses += 1
            if self.losses >= self.policy.confirm_probes:
                self.verdict = Verdict.DEAD
        # SLOW: a process holds the port; it proves neither life nor death.
        return self.verdict


class BrokerProber:
    """Probes brokers with ApiVersions on a connection of its own; calls ``on_dead`` when a
    broker's tracker finds it dead, and ``on_back`` when a dead one answers again."""

    def __init__(
        self,
        address_of: Callable[[int], tuple[str, int] | None],
        on_dead: Callable[[int], None],
        on_back: Callable[[int], None],
        policy: LivenessPolicy,
        interval_s: float,
        timeout_s: float,
        client_id: str,
        security: ClientSecurity | None = None,
    ) -> None:
        self.security = security
        self.address_of = address_of
        self.on_dead = on_dead
        self.on_back = on_back
        self.policy = policy
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.client_id = client_id
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def watch(self, broker_id: int) -> None:
        if broker_id not in self._tasks:
            self._tasks[broker_id] = asyncio.get_running_loop().create_task(
                self._probe_loop(broker_id), name=f"liveness-probe-{broker_id}"
            )

    def unwatch(self, broker_id: int) -> None:
        task = self._tasks.pop(broker_id, None)
        if task is not None:
            task.cancel()

    def watching(self) -> set[int]:
        return set(self._tasks)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _probe_loop(self, broker_id: int) -> None:
        tracker = ProbeTracker(self.policy)
        conn: BrokerConnection | None = None
        try:
            while True:
                probe, conn = await self._probe(broker_id, conn)
                was = tracker.verdict
                verdict = tracker.observe(probe, time.monotonic())
                if verdict == Verdict.DEAD and was != Verdict.DEAD:
                    log.warning(
                        "broker %d: %d probes in a row found nothing listening: dead",
                        broker_id,
                        tracker.losses,
                    )
                    self.on_dead(broker_id)
                elif was == Verdict.DEAD and verdict == Verdict.LIVE:
                    log.warning("broker %d answers again", broker_id)
                    self.on_back(broker_id)
                # A suspect is probed again sooner: a refused connect costs microseconds.
                await asyncio.sleep(
                    self.interval_s if verdict != Verdict.SUSPECT else self.interval_s / 4
                )
        finally:
            if conn is not None:
                conn.close()

    async def _probe(
        self, broker_id: int, conn: BrokerConnection | None
    ) -> tuple[Probe, BrokerConnection | None]:
        address = self.address_of(broker_id)
        if address is None:
            return Probe.SLOW, conn
        try:
            if conn is None or conn.closed or (conn.host, conn.port) != address:
                if conn is not None:
                    conn.close()
                conn = await BrokerConnection(*address, self.client_id, self.security).connect(
                    self.timeout_s
                )
            await conn.request(_API_VERSIONS, 0, _PROBE, self.timeout_s)
            return Probe.ANSWERED, conn
        except TimeoutError:
            return Probe.SLOW, conn
        except OSError:  # refused, reset, closed (ConnectionClosed is a ConnectionError)
            if conn is not None:
                conn.close()
            return Probe.LOST, None
        except Exception as exc:  # an answer not understood: someone listens
            log.info("probe of broker %d: %s", broker_id, exc)
            if conn is not None:
                conn.close()
            return Probe.SLOW, None
        except BaseException:
            # Stopped mid-probe: the caller still holds the connection before this one, so
            # one opened here would be left for the garbage collector to close.
            if conn is not None:
                conn.close()
            raise
