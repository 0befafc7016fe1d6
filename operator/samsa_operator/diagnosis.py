"""Why the pods of a KafkaCluster are not Ready: the first cause Kubernetes reports (pure).

Kubernetes knows why a pod is stuck, but says it in several places, each written by the
component that found it:
- a PersistentVolumeClaim's events (the PersistentVolume controller: no storage class is
  set, a class that does not exist, a provisioner that never answers);
- the pod's PodScheduled condition (the scheduler);
- a container's waiting state (the kubelet: an image it cannot pull, a container in
  CrashLoopBackOff, whose last termination message holds the end of its log);
- the StatefulSet's events (its controller, when admission refuses a pod: Pod Security, a
  quota).

`diagnose` reads them in the order a pod meets them, pod by pod in ordinal order, and names
the first cause, with a reason a user can grep for (`REASONS`). It decides nothing else: the
handlers fetch the objects and `status` puts the cause into the conditions.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Obj = Mapping[str, Any]

CLAIM_PENDING = "ClaimPending"
UNSCHEDULABLE = "Unschedulable"
IMAGE_PULL_FAILED = "ImagePullFailed"
CRASH_LOOP = "CrashLoopBackOff"
CONTAINER_FAILED = "ContainerCreateFailed"
POD_SECURITY_REFUSED = "PodSecurityRefused"
POD_CREATE_FAILED = "PodCreateFailed"
REASONS = (
    CLAIM_PENDING,
    UNSCHEDULABLE,
    IMAGE_PULL_FAILED,
    CRASH_LOOP,
    CONTAINER_FAILED,
    POD_SECURITY_REFUSED,
    POD_CREATE_FAILED,
)

# The kubelet's waiting reasons that keep a container from running, by our reason.
_WAITING = {
    "ErrImagePull": IMAGE_PULL_FAILED,
    "ImagePullBackOff": IMAGE_PULL_FAILED,
    "InvalidImageName": IMAGE_PULL_FAILED,
    "ErrImageNeverPull": IMAGE_PULL_FAILED,
    "CrashLoopBackOff": CRASH_LOOP,
    "CreateContainerConfigError": CONTAINER_FAILED,
    "CreateContainerError": CONTAINER_FAILED,
    "RunContainerError": CONTAINER_FAILED,
}
# The PersistentVolume controller's events that mean a claim will not bind by itself.
_CLAIM_STUCK = {"FailedBinding", "ProvisioningFailed"}
# A claim left this long to an external provisioner, with no answer, names it: a slower one
# is not working (a healthy local provisioner answers in about a second).
EXTERNAL_PROVISIONING_GRACE = datetime.timedelta(seconds=60)
# Lines of a crashed container's termination message (the end of its log) in a condition.
LOG_LINES = 5
MESSAGE_LIMIT = 1024


@dataclass(frozen=True)
class Cause:
    reason: str
    message: str


@dataclass(frozen=True)
class Workload:
    """One StatefulSet of a cluster as Kubernetes reports it: the StatefulSet, its pods, the
    claims they mount (by name) and the events of both."""

    statefulset: Obj | None
    pods: Sequence[Obj]
    claims: Mapping[str, Obj] = field(default_factory=dict)
    events: Sequence[Obj] = ()

    @property
    def name(self) -> str:
        return str(((self.statefulset or {}).get("metadata") or {}).get("name", ""))

    def pod_names(self) -> list[str]:
        replicas = int(((self.statefulset or {}).get("spec") or {}).get("replicas") or 0)
        return [f"{self.name}-{i}" for i in range(replicas)]


def parse_time(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def event_time(event: Obj) -> datetime.datetime | None:
    """When an event was last seen: core/v1 events keep it in one of four places, by age of
    the recorder that wrote them."""
    series = event.get("series") or {}
    for text in (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        when = parse_time(text)
        if when is not None:
            return when
    return None


def events_of(events: Iterable[Obj], obj: Obj) -> list[Obj]:
    """The events about `obj` (same kind, name and, where recorded, uid), oldest first."""
    meta = obj.get("metadata") or {}
    kind, name, uid = obj.get("kind"), meta.get("name"), meta.get("uid")
    found = []
    for e in events:
        involved = e.get("involvedObject") or {}
        if involved.get("name") != name or (kind and involved.get("kind") != kind):
            continue
        if uid and involved.get("uid") and involved.get("uid") != uid:
            continue  # about an earlier object of the same name
        found.append(e)
    epoch = datetime.datetime.min.replace(tzinfo=datetime.UTC)
    return sorted(found, key=lambda e: event_time(e) or epoch)


def spec_written_at(obj: Obj) -> datetime.datetime | None:
    """When the object's spec was last written (not its status), from its managedFields: an
    event older than that is about a spec that is gone."""
    times = [
        parse_time(entry.get("time"))
        for entry in (obj.get("metadata") or {}).get("managedFields") or []
        if not entry.get("subresource")
    ]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _clip(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def _last_lines(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-LOG_LINES:])


def claim_cause(claim: Obj, events: Sequence[Obj], now: datetime.datetime) -> Cause | None:
    if (claim.get("status") or {}).get("phase", "Pending") != "Pending":
        return None
    mine = events_of(events, {"kind": "PersistentVolumeClaim", **claim})
    if not mine:
        return None
    last = mine[-1]
    reason = last.get("reason")
    name = (claim.get("metadata") or {}).get("name")
    stuck = reason in _CLAIM_STUCK
    if reason == "ExternalProvisioning":
        created = parse_time((claim.get("metadata") or {}).get("creationTimestamp"))
        stuck = created is not None and now - created > EXTERNAL_PROVISIONING_GRACE
    if not stuck:
        return None
    message = f"PersistentVolumeClaim {name} is Pending: {last.get('message', '')}"
    return Cause(CLAIM_PENDING, _clip(message))


def _scheduling_cause(pod: Obj) -> Cause | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
            name = pod["metadata"]["name"]
            return Cause(UNSCHEDULABLE, _clip(f"pod {name}: {c.get('message', '')}"))
    return None


def _container_cause(pod: Obj) -> Cause | None:
    status = pod.get("status") or {}
    name = pod["metadata"]["name"]
    for container in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = _WAITING.get(waiting.get("reason", ""))
        if reason is None:
            continue
        who = f"pod {name}, container {container.get('name')}"
        if reason == CRASH_LOOP:
            last = (container.get("lastState") or {}).get("terminated") or {}
            said = _last_lines(last.get("message") or "")
            message = (
                f"{who} keeps exiting (exit code {last.get('exitCode', '?')}, "
                f"{container.get('restartCount', 0)} restarts)"
                + (f"; its last words:\n{said}" if said else "")
            )
        elif reason == IMAGE_PULL_FAILED:
            message = (
                f"{who} cannot pull image {container.get('image')}: {waiting.get('message', '')}"
            )
        else:
            message = f"{who}: {waiting.get('reason')}: {waiting.get('message', '')}"
        return Cause(reason, _clip(message))
    return None


def _creation_cause(workload: Workload) -> Cause | None:
    """The StatefulSet controller's last refusal to create a pod, if it is about the
    StatefulSet's current spec."""
    sts = workload.statefulset
    if sts is None:
        return None
    since = spec_written_at(sts)
    for event in reversed(events_of(workload.events, {"kind": "StatefulSet", **sts})):
        if event.get("reason") != "FailedCreate":
            continue
        when = event_time(event)
        if since is not None and when is not None and when < since:
            return None
        text = str(event.get("message", ""))
        reason = POD_SECURITY_REFUSED if "violates PodSecurity" in text else POD_CREATE_FAILED
        return Cause(reason, _clip(f"StatefulSet {workload.name}: {text}"))
    return None


def pod_ready(pod: Obj) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def claims_of(pod: Obj) -> list[str]:
    return [
        v["persistentVolumeClaim"]["claimName"]
        for v in (pod.get("spec") or {}).get("volumes") or []
        if "persistentVolumeClaim" in v
    ]


def diagnose(workload: Workload, now: datetime.datetime) -> Cause | None:
    """The first reason a pod of `workload` is not Ready, in ordinal order: a pod the
    StatefulSet could not create, then for each pod its claims, its scheduling and its
    containers. None when every pod is Ready or is only on its way."""
    pods = {p["metadata"]["name"]: p for p in workload.pods}
    for name in workload.pod_names():
        pod = pods.get(name)
        if pod is None:
            cause = _creation_cause(workload)
            if cause is not None:
                return cause
            continue
        if pod_ready(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        for claim_name in claims_of(pod):
            claim = workload.claims.get(claim_name)
            cause = claim_cause(claim, workload.events, now) if claim else None
            if cause is not None:
                return cause
        cause = _scheduling_cause(pod) or _container_cause(pod)
        if cause is not None:
            return cause
    return None
