"""What a fault kind is, and what the campaign's environment offers it.

A kind injects one fault at a time into a running cluster and returns a ``Fault`` that
heals it. Kinds draw every random choice from the ``rng`` they are given, so that a seed
reproduces a campaign."""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol


class Network(Protocol):
    """Brokers and ZooKeeper in network namespaces, one per node ("zk", "b0", "b1", ...);
    clients stay in the root namespace and reach every node at its address."""

    def nodes(self) -> list[str]: ...

    def address(self, node: str) -> str: ...

    def wrap(self, node: str, argv: list[str]) -> list[str]:
        """The command that runs ``argv`` inside the node's namespace."""
        ...

    def partition(self, side_a: list[str], side_b: list[str]) -> None:
        """No packet crosses between the two sides, either way."""
        ...

    def one_way(self, source: str, target: str) -> None:
        """Packets from ``source`` to ``target`` are dropped; the other way still works."""
        ...

    def delay(self, node: str, ms: int, jitter_ms: int = 0) -> None:
        """Every packet leaving ``node`` waits ``ms`` more."""
        ...

    def heal(self) -> None:
        """Every cut, one-way cut and delay removed."""
        ...


class Environment(Protocol):
    """The running cluster as the nemesis sees it."""

    @property
    def brokers(self) -> list[int]: ...

    def broker_pid(self, broker: int) -> int | None:
        """The broker's process id, or None while it is down."""
        ...

    def controller(self) -> int:
        """The active controller's id, read from ZooKeeper (-1 if none)."""
        ...

    def kill_broker(self, broker: int) -> None: ...

    def start_broker(self, broker: int) -> None:
        """Start a broker that is down, with its data directory as it was left."""
        ...

    def data_dir(self, broker: int) -> Path:
        """The broker's data directory: a small tmpfs of its own when the campaign runs
        as root, so that a fault can fill it."""
        ...

    def clock_file(self, broker: int) -> Path:
        """The file whose integer content (milliseconds) the broker adds to its wall clock;
        the broker re-reads it while running (env SAMSA_CLOCK_OFFSET_FILE)."""
        ...

    @property
    def zookeeper_pid(self) -> int: ...

    def restart_zookeeper(self) -> None: ...

    @property
    def network(self) -> Network | None:
        """Set when the brokers run in network namespaces."""
        ...

    @property
    def timeouts(self) -> Mapping[str, int]:
        """The cluster's failure-detection settings in ms: zookeeper.session.timeout.ms,
        replica.lag.time.max.ms, and the liveness probes' detection time."""
        ...


class Fault(Protocol):
    """One injected fault.

    A fault may also carry ``hold_s`` (float): how long the nemesis holds it before healing,
    for kinds whose meaning is their length (a pause shorter or longer than a timeout);
    without it the nemesis draws a hold of 1 to 8 s from the campaign's seed."""

    kind: str

    def describe(self) -> dict[str, Any]:
        """What was done, to whom, for the operation log (JSON-ready)."""
        ...

    def heal(self) -> None:
        """Undo the fault (restart, resume, reconnect, free); safe to call twice."""
        ...


class FaultKind(Protocol):
    name: str

    def applicable(self, env: Environment) -> bool:
        """Whether this kind can run here (namespaces and tmpfs need root)."""
        ...

    def inject(self, env: Environment, rng: random.Random) -> Fault: ...
