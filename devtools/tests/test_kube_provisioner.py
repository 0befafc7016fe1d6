"""Which claims the local provisioner gives a volume, and when."""

from __future__ import annotations

from typing import Any

from samsa_dev.kube.provisioner import SELECTED_NODE, class_to_provision, to_resize

WAITS = {"metadata": {"name": "local"}, "volumeBindingMode": "WaitForFirstConsumer"}
AT_ONCE = {"metadata": {"name": "now"}, "volumeBindingMode": "Immediate"}
CLASSES = {"local": WAITS, "now": AT_ONCE}


def claim(klass: str, phase: str = "Pending", **meta: Any) -> dict[str, Any]:
    spec = {"storageClassName": klass, **meta.pop("spec", {})}
    return {"metadata": {"name": "data-0", **meta}, "spec": spec, "status": {"phase": phase}}


def test_a_claim_that_waits_for_its_consumer_is_provisioned_on_its_node_once_scheduled() -> None:
    assert class_to_provision(claim("local"), CLASSES) is None
    scheduled = claim("local", annotations={SELECTED_NODE: "node-1"})
    assert class_to_provision(scheduled, CLASSES) is WAITS


def test_an_immediate_claim_is_provisioned_at_once() -> None:
    assert class_to_provision(claim("now"), CLASSES) is AT_ONCE


def test_claims_bound_going_or_of_other_classes_are_left_alone() -> None:
    node = {SELECTED_NODE: "node-1"}
    assert class_to_provision(claim("now", "Bound"), CLASSES) is None
    assert class_to_provision(claim("now", spec={"volumeName": "pv-1"}), CLASSES) is None
    going = claim("local", annotations=node, deletionTimestamp="2026-01-01T00:00:00Z")
    assert class_to_provision(going, CLASSES) is None
    assert class_to_provision(claim("standard", annotations=node), CLASSES) is None


def test_a_bound_claim_of_an_expandable_class_that_asks_for_more_is_resized() -> None:

    classes = {"grows": {**WAITS, "allowVolumeExpansion": True}, "local": WAITS}

    def bound(klass: str, requested: str, capacity: str) -> dict[str, Any]:
        c = claim(klass, "Bound", spec={"resources": {"requests": {"storage": requested}}})
        c["status"]["capacity"] = {"storage": capacity}
        return c

    assert to_resize(bound("grows", "2Gi", "1Gi"), classes) == "2Gi"
    assert to_resize(bound("grows", "1024Mi", "1Gi"), classes) is None  # the same size
    assert to_resize(bound("local", "2Gi", "1Gi"), classes) is None  # cannot expand
    assert to_resize(bound("other", "2Gi", "1Gi"), classes) is None  # not ours
