"""Talking to the Kubernetes API: read, create, patch and delete objects by path.

The kubernetes client supplies credentials (in-cluster or kubeconfig) and HTTP; objects
stay plain dicts, as the builders make them. `apply` keeps a child in line with its desired
form: it creates what is missing and merge-patches what drifted, so a user's edit of a child
is reverted at the next reconcile.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Mapping
from typing import Any

import kubernetes

Obj = dict[str, Any]
# A list of objects, named: inside Kube, `list` is its method.
Objs = list[Obj]

PLURALS = {
    "StatefulSet": "statefulsets",
    "Service": "services",
    "ConfigMap": "configmaps",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "Pod": "pods",
    "Secret": "secrets",
    "NetworkPolicy": "networkpolicies",
    "KafkaUser": "kafkausers",
    "Node": "nodes",
    "KafkaCluster": "kafkaclusters",
    "Topic": "topics",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "StorageClass": "storageclasses",
    "Event": "events",
}
CLUSTER_SCOPED = {"Node", "StorageClass"}

# Fields of an existing StatefulSet the API server refuses to change.
_STS_IMMUTABLE = ("selector", "serviceName", "podManagementPolicy", "volumeClaimTemplates")

MERGE_PATCH = "application/merge-patch+json"


class KubeError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


def path(
    api_version: str, kind: str, namespace: str | None, name: str | None = None, sub: str = ""
) -> str:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if namespace is not None and kind not in CLUSTER_SCOPED:
        base += f"/namespaces/{namespace}"
    base += f"/{PLURALS[kind]}"
    if name is not None:
        base += f"/{name}"
    if sub:
        base += f"/{sub}"
    return base


def load_config() -> None:
    """In a pod: the service account; elsewhere: $KUBECONFIG or ~/.kube/config."""
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()


def is_subset(desired: Any, actual: Any) -> bool:
    """True when every field of `desired` is in `actual` with the same value.

    The API server adds defaults (a container's terminationMessagePath, a port's protocol):
    those extra fields are not drift. Lists compare item by item and must have equal length.
    """
    if isinstance(desired, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and is_subset(v, actual[k]) for k, v in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(actual, list)
            and len(desired) == len(actual)
            and all(is_subset(d, a) for d, a in zip(desired, actual, strict=True))
        )
    if isinstance(desired, int | float) and isinstance(actual, str):
        return str(desired) == actual
    return bool(desired == actual)


def drift_patch(desired: Obj, actual: Obj) -> Obj | None:
    """The merge patch that brings `actual` back to `desired`, or None when it already is."""
    patch: Obj = {}
    meta = desired.get("metadata", {})
    for field in ("labels", "annotations", "ownerReferences"):
        if field in meta and not is_subset(meta[field], actual.get("metadata", {}).get(field)):
            patch.setdefault("metadata", {})[field] = meta[field]
    for field, value in desired.items():
        if field in ("apiVersion", "kind", "metadata", "status"):
            continue
        if field == "spec" and desired["kind"] == "StatefulSet":
            value = {k: v for k, v in value.items() if k not in _STS_IMMUTABLE}
        if not is_subset(value, actual.get(field)):
            patch[field] = value
    return patch or None


class Kube:
    """A thin, thread-offloaded client: every call returns plain dicts."""

    def __init__(self, api: kubernetes.client.ApiClient | None = None) -> None:
        self.api = api or kubernetes.client.ApiClient()

    def _call(
        self,
        method: str,
        url_path: str,
        body: Any = None,
        content_type: str | None = None,
        query: Mapping[str, str] | None = None,
    ) -> Obj | None:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        method, url, headers, payload, _ = self.api.param_serialize(
            method=method,
            resource_path=url_path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api.rest_client.request(
            method, url, headers=headers, body=payload, _request_timeout=30
        )
        data = response.read()
        if response.status == 404:
            return None
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            parsed = {"message": data[:200].decode(errors="replace")}
        if response.status >= 400:
            raise KubeError(response.status, parsed.get("message", "") or str(parsed))
        return dict(parsed)

    async def request(self, method: str, url_path: str, **kwargs: Any) -> Obj | None:
        """One API call (body, content_type, query as for _call), off the event loop."""
        return await asyncio.to_thread(functools.partial(self._call, method, url_path, **kwargs))

    async def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> Obj | None:
        return await self.request("GET", path(api_version, kind, namespace, name))

    async def list(
        self, api_version: str, kind: str, namespace: str | None, labels: Mapping[str, str]
    ) -> list[Obj]:
        selector = ",".join(f"{k}={v}" for k, v in labels.items())
        found = await self.request(
            "GET", path(api_version, kind, namespace), query={"labelSelector": selector}
        )
        items = (found or {}).get("items", [])
        # Not every server filters by label (the test stand-in does not): filter here too.
        return [
            i
            for i in items
            if all(i.get("metadata", {}).get("labels", {}).get(k) == v for k, v in labels.items())
        ]

    async def events(self, namespace: str, kind: str, name: str) -> Objs:
        """The core/v1 events about one object (by kind and name), as its controllers wrote
        them."""
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        found = await self.request(
            "GET", path("v1", "Event", namespace), query={"fieldSelector": selector}
        )
        return list((found or {}).get("items", []))

    async def create(self, obj: Obj) -> Obj:
        meta = obj["metadata"]
        created = await self.request(
            "POST", path(obj["apiVersion"], obj["kind"], meta.get("namespace")), body=obj
        )
        return created or {}

    async def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        patch: Obj,
        sub: str = "",
    ) -> Obj | None:
        return await self.request(
            "PATCH",
            path(api_version, kind, namespace, name, sub),
            body=patch,
            content_type=MERGE_PATCH,
        )

    async def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        await self.request("DELETE", path(api_version, kind, namespace, name))

    async def apply(self, obj: Obj) -> str:
        """Create or repair one child: 'created', 'patched' or 'unchanged'."""
        meta = obj["metadata"]
        actual = await self.get(obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"])
        if actual is None:
            try:
                await self.create(obj)
                return "created"
            except KubeError as exc:
                if exc.status != 409:
                    raise
                actual = await self.get(
                    obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"]
                )
                if actual is None:
                    raise
        patch = drift_patch(obj, actual)
        if patch is None:
            return "unchanged"
        await self.patch(obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"], patch)
        return "patched"
