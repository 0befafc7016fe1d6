"""Pure decisions of a rolling restart, no I/O: what a broker's running configuration lacks
(and whether that can change live), and the order ZooKeeper servers restart in.

With a StatefulSet the operator cannot know which version of the ConfigMap a pod's init
container copied, so the truth is the broker itself: DescribeConfigs says what it runs, as
Strimzi's configuration diff does. Keys the broker can change live are set through
IncrementalAlterConfigs; any other difference needs a restart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from samsa_operator.models import OPERATOR_OWNED_KEYS, OPERATOR_OWNED_PREFIXES

# The operator sets this one itself while partitions move (see operations), so it is never
# a difference to act on.
THROTTLE_KEY = "follower.replication.throttled.rate"
NOT_COMPARED = frozenset({*OPERATOR_OWNED_KEYS, THROTTLE_KEY})

# Where a broker says a value comes from (DescribeConfigs' config source).
DYNAMIC, STATIC, DEFAULT = "dynamic", "static", "default"


@dataclass(frozen=True)
class ReportedConfig:
    """One broker config as the broker reports it."""

    value: str | None
    source: str  # DYNAMIC, STATIC or DEFAULT
    read_only: bool  # True: it cannot change without a restart


@dataclass(frozen=True)
class ConfigDiff:
    set: Mapping[str, str] = field(default_factory=dict)  # to set live
    delete: tuple[str, ...] = ()  # live overrides to remove
    restart: tuple[str, ...] = ()  # keys that need a restart

    @property
    def empty(self) -> bool:
        return not (self.set or self.delete or self.restart)


def same_value(a: str | None, b: str | None) -> bool:
    """Equal as Kafka would parse them: numbers by value, booleans and lists loosely."""
    if a is None or b is None:
        return a is b
    a, b = a.strip(), b.strip()
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        pass
    if {a.lower(), b.lower()} <= {"true", "false"}:
        return a.lower() == b.lower()
    items_a = [x.strip() for x in a.split(",")]
    items_b = [x.strip() for x in b.split(",")]
    return items_a == items_b


def config_diff(wanted: Mapping[str, str], reported: Mapping[str, ReportedConfig]) -> ConfigDiff:
    """What must change for the broker to run `wanted` (its properties as the operator
    renders them). Keys the broker does not know are skipped: a restart would not apply them
    either. Operator-owned keys are compared by the pod template, not here."""
    to_set: dict[str, str] = {}
    to_delete: list[str] = []
    restart: list[str] = []
    for name in sorted(set(wanted) | set(reported)):
        if name in NOT_COMPARED or name.startswith(OPERATOR_OWNED_PREFIXES) or name not in reported:
            continue
        now = reported[name]
        if name in wanted:
            if same_value(now.value, wanted[name]):
                continue
            if now.read_only:
                restart.append(name)
            else:
                to_set[name] = wanted[name]
        elif now.source == DYNAMIC:
            to_delete.append(name)  # the static value (or the default) shows once it goes
        elif now.source == STATIC:
            restart.append(name)  # set in the file the broker started with, gone from the spec
    return ConfigDiff(to_set, tuple(to_delete), tuple(restart))


def zookeeper_restart_order(modes: Mapping[int, str | None]) -> list[int]:
    """ZooKeeper servers (by ordinal) in the order to restart them: followers (and servers
    not answering) first, by ordinal, the leader last, so the ensemble elects once."""
    return sorted(modes, key=lambda i: (modes[i] == "leader", i))


def zookeeper_may_restart(ordinal: int, ready: Iterable[int], ensemble: int) -> bool:
    """True when the ensemble keeps a quorum without `ordinal`."""
    up = set(ready) - {ordinal}
    return len(up) >= ensemble // 2 + 1
