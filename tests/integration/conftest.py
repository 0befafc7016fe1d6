"""Fixtures of the cross-component tests. The operator's API stand-in and its fixtures, and the
cluster tests' load oracle, are shared from their folders; the day-2 fixtures and helpers
are in day2_support."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for folder in ("operator/tests", "broker_image/tests", "broker_image/tests/cluster"):
    if str(REPO / folder) not in sys.path:
        sys.path.insert(0, str(REPO / folder))

from day2_support import kubelet, zookeeper  # noqa: E402
from op_support import helm, kubectl, kubectl_bin, operator, stand  # noqa: E402

__all__ = ["helm", "kubectl", "kubectl_bin", "kubelet", "operator", "stand", "zookeeper"]
