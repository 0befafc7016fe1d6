"""Cluster state: who leads which partition.  Standalone: this broker, from its local store."""

from samsa.controller.local import LocalController

__all__ = ["LocalController"]
