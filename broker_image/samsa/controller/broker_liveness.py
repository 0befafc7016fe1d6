"""Broker liveness: which registered brokers the controller counts as live.

A broker is live while its ZooKeeper registration (/brokers/ids/<id>) lasts; a registration
with a new czxid (the broker epoch) is a restarted broker, which is a death and a birth.
"""

from __future__ import annotations

from collections.abc import Mapping

from samsa.metadata.zk_client import RegisteredBroker


def registration_changes(
    known: Mapping[int, RegisteredBroker], current: Mapping[int, RegisteredBroker]
) -> tuple[set[int], set[int]]:
    """(dead, new) between the live brokers the controller knows and the registrations now in
    ZooKeeper: a broker registered anew is in both."""
    dead = {b for b, reg in known.items() if b not in current or current[b].epoch != reg.epoch}
    new = {b for b in current if b not in known or b in dead}
    return dead, new
