"""Fixtures of the cross-component tests: the real control plane (once per run), a namespace
of the test's own with a node agent and the operator's chart installed, and the cluster
tests' load oracle shared from its folder. Helpers are in kube_support and day2_support."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for folder in ("broker_image/tests", "broker_image/tests/cluster"):
    if str(REPO / folder) not in sys.path:
        sys.path.insert(0, str(REPO / folder))

from kube_support import helm, kube, kubectl_bin, zookeeper  # noqa: E402

from samsa_dev.kube.harness import kube_control_plane  # noqa: E402

__all__ = ["helm", "kube", "kube_control_plane", "kubectl_bin", "zookeeper"]
