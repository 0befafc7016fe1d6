"""Fixtures of the cross-component tests: the real control plane (once per run), a namespace
of the test's own with a node agent and the operator's chart installed, and the cluster
tests' load oracle shared from its folder. Helpers are in kube_support and day2_support."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for folder in ("broker_image/tests", "broker_image/tests/cluster"):
    if str(REPO / folder) not in sys.path:
        sys.path.insert(0, str(REPO / folder))

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402
from kube_support import helm, kube, kubectl_bin, zookeeper  # noqa: E402

from samsa_dev.kube.harness import kube_control_plane, release_when_done  # noqa: E402

__all__ = ["helm", "kube", "kube_control_plane", "kubectl_bin", "zookeeper"]


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Once the run's last test on the control plane is torn down, the plane stops."""
    plane = getattr(item, "funcargs", {}).get("kube_control_plane")
    yield
    release_when_done(item, nextitem, plane)
