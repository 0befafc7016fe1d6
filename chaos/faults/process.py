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
from dataclasses import dataclass, field
from typing import Any

from chaos.faults.base import Environment, Fault


@dataclass
class BrokerKill:
    """kill -9; healed by starting the broker on the data it left."""

    kind: str
    env: Environment
    broker: int
    hold_s: float
    healed: bool = field(default=False)

    def describe(self) -> dict[str, Any]:
        return {"broker": self.broker, "hold_s": round(self.hold_s, 2)}

    def heal(self) -> None:
        if not self.healed:
            self.healed = True
            self.env.start_broker(self.broker)


@dataclass
class Pause:
    """SIGSTOP; healed by SIGCONT."""

    kind: str
    env: Environment
    broker: int
    pid: int
    hold_s: float
    healed: bool = field(default=False)

    def describe(self) -> dict[str, Any]:
        return {"broker": self.broker, "hold_s": round(self.hold_s, 2)}

    def heal(self) -> None:
        if not self.healed:
            self.healed = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)


@dataclass
class ZooKeeperDown:
    """ZooKeeper killed -9; healed by starting it again on its data."""

    kind: str
    env: Environment
    hold_s: float
    healed: bool = field(default=False)

    def describe(self) -> dict[str, Any]:
        return {"hold_s": round(self.hold_s, 2)}

    def heal(self) -> None:
        if not self.healed:
            self.healed = True
            self.env.restart_zookeeper()


def _running(env: Environment) -> list[int]:
    return [b for b in env.brokers if env.broker_pid(b) is not None]


class KillBroker:
    name = "kill-broker"

    def applicable(self, env: Environment) -> bool:
        return True

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        broker = rng.choice(_running(env))
        env.kill_broker(broker)
        return BrokerKill(self.name, env, broker, rng.uniform(0.5, 3.0))


class KillController:
    name = "kill-controller"

    def applicable(self, env: Environment) -> bool:
        return True

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        controller = env.controller()
        if controller < 0 or env.broker_pid(controller) is None:
            controller = rng.choice(_running(env))
        env.kill_broker(controller)
        return BrokerKill(self.name, env, controller, rng.uniform(0.5, 3.0))


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
        return Pause(self.name, env, broker, pid, hold)


class RestartZooKeeper:
    name = "zookeeper-restart"

    def applicable(self, env: Environment) -> bool:
        return True

    def inject(self, env: Environment, rng: random.Random) -> Fault:
        with contextlib.suppress(ProcessLookupError):
            os.kill(env.zookeeper_pid, signal.SIGKILL)
        # Short of the session timeout, so the brokers' sessions outlive the restart...
        session = env.timeouts["zookeeper.session.timeout.ms"] / 1000
        return ZooKeeperDown(self.name, env, rng.uniform(0.1, 0.5) * session)


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
