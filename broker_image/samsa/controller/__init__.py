"""Cluster state: who leads which partition.

Standalone, the StandaloneController makes this broker leader of everything from its local store.
In a cluster, the KafkaController elected through ZooKeeper decides for every broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.controller.standalone import StandaloneController

if TYPE_CHECKING:
    from samsa.controller.event_manager import NotController
    from samsa.controller.kafka_controller import KafkaController

__all__ = ["KafkaController", "NotController", "StandaloneController"]


def __getattr__(name: str) -> Any:
    # The ZooKeeper controller (kazoo, the inter-broker channel) loads when a cluster asks
    # for it: a standalone broker starts without it.
    if name == "KafkaController":
        from samsa.controller.kafka_controller import KafkaController

        return KafkaController
    if name == "NotController":
        from samsa.controller.event_manager import NotController

        return NotController
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
