"""What the client matrix's tests share beside their fixtures: the record batches as the
brokers stored them on disk, to check what a client's producer really sent."""

from __future__ import annotations

from typing import Any

from samsa.local.cluster import LocalCluster
from samsa.protocol.records import scan_batches


def stored_batches(cluster: LocalCluster, topic: str) -> list[Any]:
    """The headers of every batch of the topic in every broker's log, as stored on disk."""
    headers = []
    for broker in range(3):
        for log in sorted((cluster.broker_dir(broker)).glob(f"{topic}-*/*.log")):
            headers += [h for _, h in scan_batches(log.read_bytes())]
    return headers
