"""Cluster state: who leads which partition.

Standalone, the LocalController makes this broker leader of everything from its local store.
In a cluster, the KafkaController elected through ZooKeeper decides for every broker.
"""

from samsa.controller.kafka_controller import KafkaController, NotController
from samsa.controller.local import LocalController

__all__ = ["KafkaController", "LocalController", "NotController"]
