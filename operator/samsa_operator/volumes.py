"""Volume expansion: what a larger ``storage.size`` asks of a StatefulSet's claims. Pure
logic; the handlers read the claims and their StorageClasses and patch what this plans.

A StatefulSet's volumeClaimTemplates cannot change, so its claims are grown one by one, as
Kubernetes documents for StatefulSets: each claim's request is raised where its StorageClass
has ``allowVolumeExpansion``; the volume's driver grows the volume and the kubelet the
filesystem, with no restart, and the claim's ``status.capacity`` follows. A claim the spec
would shrink, or whose class cannot expand, is left as it is, and the condition says why.
A claim made later from the template (a broker added) is grown the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.utils.quantity import parse_quantity

Obj = dict[str, Any]

# Conditions that a claim shows while its volume grows (the resizer's and the kubelet's).
_RESIZE_CONDITIONS = ("Resizing", "FileSystemResizePending", "ControllerResizeError")


@dataclass(frozen=True)
class ClaimState:
    """One claim as the status shows it."""

    name: str
    requested: str
    capacity: str | None
    phase: str  # Resized, Resizing, ShrinkRefused, NotExpandable, Pending

    def to_status(self) -> Obj:
        return {
            "claim": self.name,
            "requested": self.requested,
            "capacity": self.capacity,
            "phase": self.phase,
        }


@dataclass
class VolumePlan:
    patches: dict[str, str] = field(default_factory=dict)  # claim name -> new request
    claims: list[ClaimState] = field(default_factory=list)

    def condition(self) -> tuple[bool, str, str]:
        """(ok, reason, message) of the Storage condition."""
        by_phase: dict[str, list[str]] = {}
        for c in self.claims:
            by_phase.setdefault(c.phase, []).append(c.name)
        for phase, reason, why in (
            ("ShrinkRefused", "ShrinkRefused", "a claim cannot shrink; storage.size is smaller"),
            (
                "NotExpandable",
                "ExpansionNotAllowed",
                "their StorageClass does not allow volume expansion (allowVolumeExpansion)",
            ),
            ("Resizing", "Resizing", "volumes growing to storage.size"),
        ):
            if phase in by_phase:
                return False, reason, f"{', '.join(by_phase[phase])}: {why}"
        resized = len(by_phase.get("Resized", []))
        return True, "Resized", f"{resized} bound claims at storage.size or more"


def merged_condition(plans: list[VolumePlan]) -> tuple[bool, str, str]:
    """The Storage condition of several parts (brokers, ZooKeeper): the first problem."""
    return VolumePlan(claims=[c for p in plans for c in p.claims]).condition()


def _size(obj: Mapping[str, Any] | None) -> str | None:
    value = (obj or {}).get("storage")
    return None if value is None else str(value)


def plan(wanted: str, claims: list[Obj], expandable: Mapping[str, bool]) -> VolumePlan:
    """The patches that grow ``claims`` to ``wanted``, and each claim's state.
    ``expandable``: StorageClass name -> its allowVolumeExpansion (unknown classes: False)."""
    want = parse_quantity(wanted)
    out = VolumePlan()
    for claim in claims:
        name = claim["metadata"]["name"]
        spec, status = claim.get("spec") or {}, claim.get("status") or {}
        requested = _size((spec.get("resources") or {}).get("requests")) or "0"
        capacity = _size(status.get("capacity"))
        if status.get("phase") != "Bound" or capacity is None:
            out.claims.append(ClaimState(name, requested, capacity, "Pending"))
            continue
        if parse_quantity(requested) > want:
            out.claims.append(ClaimState(name, requested, capacity, "ShrinkRefused"))
            continue
        if parse_quantity(requested) < want:
            if not expandable.get(spec.get("storageClassName") or "", False):
                out.claims.append(ClaimState(name, requested, capacity, "NotExpandable"))
                continue
            out.patches[name] = wanted
            requested = wanted
        growing = parse_quantity(capacity) < parse_quantity(requested) or any(
            c.get("type") in _RESIZE_CONDITIONS and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        out.claims.append(
            ClaimState(name, requested, capacity, "Resizing" if growing else "Resized")
        )
    return out


def claim_names(template: str, statefulset: str, replicas: int) -> list[str]:
    """The claims a StatefulSet's pods use, by ordinal (Kubernetes names them so)."""
    return [f"{template}-{statefulset}-{i}" for i in range(replicas)]
