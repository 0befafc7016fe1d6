"""Process and ZooKeeper faults: kill -9 of a broker or of the controller, SIGSTOP pauses
shorter and longer than failure detection, a broker's ZooKeeper session expired by a pause
longer than its timeout, and ZooKeeper itself killed and restarted.

Each fault says how long the nemesis should hold it (``hold_s``) before healing: the pauses'
meaning is their length measured against the cluster's timeouts."""

from __future__ import annotations

import contextlib
import os
import random
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.faults.base import Environment, Fault


@dataclass
class ProcessFault:
    """One process fault, healed once by ``undo``: a broker restarted on the data it left,
    a paused process sent SIGCONT, ZooKeeper started again on its data."""

    kind: str
    hold_s: float
    undo: Callable[[], None]
    broker: int | None = None
    healed: bool = field(default=False)

    def describe(self) -> dict[str, Any]:
        where = {} if self.broker is None else {"broker": self.broker}
        return {**where, "hold_s": round(self.hold_s, 2)}

    def heal(self) -> None:
        if not self.healed:
            self.healed = True
            self.undo()


def _resume(pid: int) -> Callable[[], None]:
    def resume() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)

    return resume


def _running(env: Environment) -> list[int]:
    return [b for b in env.brokers if env.broker_pid(b) is not None]


class KillBroker:
    name = "kill-broker"

    def applicable(self, env: Environment) -> bool:
        return True

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        broker = rng.choice(_running(env))
        env.kill_broker(broker)
        return ProcessFault(
            self.name, rng.uniform(0.5, 3.0), lambda: env.start_broker(broker), broker
        )


class KillController:
    name = "kill-controller"

    def applicable(self, env: Environment) -> bool:
        return True

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        controller = env.controller()
        if controller < 0 or env.broker_pid(controller) is None:
            controller = rng.choice(_running(env))
        env.kill_broker(controller)
        return ProcessFault(
            self.name, rng.uniform(0.5, 3.0), lambda: env.start_broker(controller), controller
        )


class PauseBroker:
    """A pause whose length is a fraction (low, high) of a timeout of the cluster."""

    def __init__(self, name: str, timeout: str, low: float, high: float) -> None:
        self.name = name
        self.timeout = timeout
        self.low = low
        self.high = high

    def applicable(self, env: Environment) -> bool:
        return True

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        broker = rng.choice(_running(env))
        pid = env.broker_pid(broker)
        assert pid is not None
        hold = env.timeouts[self.timeout] / 1000 * rng.uniform(self.low, self.high)
        os.kill(pid, signal.SIGSTOP)
        return ProcessFault(self.name, hold, _resume(pid), broker)


class RestartZooKeeper:
    name = "zookeeper-restart"

    def applicable(self, env: Environment) -> bool:
        return True

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        with contextlib.suppress(ProcessLookupError):
            os.kill(env.zookeeper_pid, signal.SIGKILL)
        # Short of the session timeout, so the brokers' sessions outlive the restart...
        session = env.timeouts["zookeeper.session.timeout.ms"] / 1000
        return ProcessFault(self.name, rng.uniform(0.1, 0.5) * session, env.restart_zookeeper)


KINDS = [
    KillBroker(),
    KillController(),
    # Shorter than replica.lag.time.max.ms: the ISR should not even shrink.
    PauseBroker("pause-short", "replica.lag.time.max.ms", 0.2, 0.6),
    # Past replica.lag.time.max.ms and the leader's check of it (every half of it), short of
    # the ZooKeeper session: out of the ISR, still registered; a paused leader's followers
    # cannot take over.
    PauseBroker("pause-long", "replica.lag.time.max.ms", 1.6, 1.9),
    # Past the session timeout: ZooKeeper expires the broker's session, the controller moves
    # its leaderships, and the broker wakes up to a session that is gone.
    PauseBroker("zookeeper-session-expiry", "zookeeper.session.timeout.ms", 1.3, 1.6),
    RestartZooKeeper(),
]
