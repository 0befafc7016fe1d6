"""Volume expansion's plan: which claims grow, and what the StorageResized condition says
of those that cannot."""

from __future__ import annotations

from typing import Any

from samsa_operator import volumes


def claim(name: str, requested: str, capacity: str | None, klass: str = "fast", **status: Any):
    return {
        "metadata": {"name": name},
        "spec": {"storageClassName": klass, "resources": {"requests": {"storage": requested}}},
        "status": {
            "phase": "Bound" if capacity else "Pending",
            **({"capacity": {"storage": capacity}} if capacity else {}),
            **status,
        },
    }


def test_bound_claims_of_an_expandable_class_grow_and_show_their_resize() -> None:
    claims = [claim("a", "10Gi", "10Gi"), claim("b", "10Gi", "10Gi"), claim("c", "1Gi", None)]
    planned = volumes.plan("20Gi", claims, {"fast": True})
    assert planned.patches == {"a": "20Gi", "b": "20Gi"}  # a Pending claim waits to bind
    assert [c.phase for c in planned.claims] == ["Resizing", "Resizing", "Pending"]
    assert planned.condition()[:2] == (False, "Resizing")
    # The volumes grew: resized, nothing more to patch.
    grown = [claim("a", "20Gi", "20Gi"), claim("b", "20Gi", "20Gi")]
    planned = volumes.plan("20Gi", grown, {"fast": True})
    assert planned.patches == {}
    assert planned.condition() == (True, "Resized", "2 bound claims at storage.size or more")


def test_a_claim_waiting_on_its_filesystem_is_still_resizing() -> None:
    pending = [{"type": "FileSystemResizePending", "status": "True"}]
    planned = volumes.plan("20Gi", [claim("a", "20Gi", "20Gi", conditions=pending)], {})
    assert [c.phase for c in planned.claims] == ["Resizing"]


def test_a_shrink_or_a_class_that_cannot_expand_changes_nothing_and_says_why() -> None:
    planned = volumes.plan("5Gi", [claim("a", "10Gi", "10Gi")], {"fast": True})
    assert planned.patches == {}
    ok, reason, message = planned.condition()
    assert (ok, reason) == (False, "ShrinkRefused") and message.startswith("a: ")
    planned = volumes.plan("20Gi", [claim("a", "10Gi", "10Gi", klass="slow")], {"slow": False})
    assert planned.patches == {}
    assert planned.condition()[:2] == (False, "ExpansionNotAllowed")
    # Quantities compare by value, not by spelling.
    assert volumes.plan("10240Mi", [claim("a", "10Gi", "10Gi")], {}).patches == {}
