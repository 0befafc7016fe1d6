"""Replica assignment for new topics and partitions (Kafka's AdminUtils rules), pure logic.

Replicas and preferred leaders are spread evenly over the brokers; when brokers have racks,
the broker list is first interleaved by rack so each partition's replicas land on distinct
racks where there are enough of them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from samsa.metadata.model import BrokerInfo


def rack_alternated(brokers: Sequence[BrokerInfo]) -> list[int]:
    """Broker ids ordered rack by rack, round robin: r1b1, r2b1, r3b1, r1b2, ..."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(brokers, key=lambda b: b.id):
        by_rack.setdefault(broker.rack or "", []).append(broker.id)
    racks = sorted(by_rack)
    out: list[int] = []
    depth = max(len(ids) for ids in by_rack.values())
    for i in range(depth):
        for rack in racks:
            if i < len(by_rack[rack]):
                out.append(by_rack[rack][i])
    return out


def assign_replicas(
    brokers: Sequence[BrokerInfo],
    partitions: int,
    replication_factor: int,
    *,
    first_partition: int = 0,
    start_index: int | None = None,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Partition -> replicas (preferred leader first) for partitions first_partition.."""
    if replication_factor < 1:
        raise ValueError("replication factor must be at least 1")
    if replication_factor > len(brokers):
        raise ValueError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    rng = rng or random.Random()
    racked = any(b.rack for b in brokers)
    if racked and not all(b.rack for b in brokers):
        raise ValueError("Not all brokers have rack information for replica rack aware assignment.")
    ids = rack_alternated(brokers) if racked else sorted(b.id for b in brokers)
    rack_of = {b.id: b.rack for b in brokers}
    n = len(ids)
    start = start_index if start_index is not None else rng.randrange(n)
    shift = start_index if start_index is not None else rng.randrange(n)
    result: dict[int, list[int]] = {}
    for i in range(partitions):
        p = first_partition + i
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        if not racked:
            for j in range(replication_factor - 1):
                replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n] if n > 1 else ids[0])
        else:
            racks_used = {rack_of[ids[first]]}
            k = 0
            num_racks = len(set(rack_of.values()))
            while len(replicas) < replication_factor:
                candidate = ids[(first + 1 + (shift + k) % (n - 1)) % n] if n > 1 else ids[0]
                k += 1
                if candidate in replicas:
                    if k > 4 * n:
                        break
                    continue
                rack = rack_of[candidate]
                if rack in racks_used and len(racks_used) < num_racks and k <= 2 * n:
                    continue
                replicas.append(candidate)
                racks_used.add(rack)
                if len(racks_used) == num_racks:
                    racks_used = set()
        result[p] = replicas
    return result
