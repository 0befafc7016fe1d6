"""The stand-in for the Kubernetes API server in the operator's tests: kmock, with the fixes
that kopf 1.45 and a real kubectl need from kmock 0.8 (each is checked in test_kube_stand.py):

1. discovery of the built-in resources is loaded (`load_bundled`);
2. objects get uid, resourceVersion, generation and creationTimestamp;
3. a failed JSON-patch `test` answers 422, as kopf expects for its optimistic writes;
4. a watch honours resourceVersion: it replays what happened after it, not every object;
5. lists carry kind and apiVersion (and the current resourceVersion);
6. the core group's version document says groupVersion `v1`, not `/v1`;
7. subresources do not inherit their resource's short names;
8. a created CRD registers its resource and is marked Established.

Also, as a real API server does: PATCH on `/status` changes only the status and PATCH on the
object leaves the status alone when the status subresource is on; an unchanged object gets no
new resourceVersion and no watch event; deleting an object with finalizers sets
deletionTimestamp, and it goes once they are removed. It reports version 1.34.
It has no controllers, garbage collection, admission, RBAC or server-side apply, and it
speaks JSON only (kubectl's typed `create` commands send protobuf: use `kubectl apply`).
"""

from __future__ import annotations

import copy
import datetime
import secrets
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import jsonpatch
import jsonpointer
import kmock
from kmock._internal import apps, enums, references, rendering

Obj = dict[str, Any]
CRDS = references.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
CRD_VERBS = {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (strategic-merge directives, `$...` keys, are dropped)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _selector_matches(obj: Obj, params: Mapping[str, str]) -> bool:
    meta = obj.get("metadata", {})
    for term in filter(None, params.get("fieldSelector", "").split(",")):
        field, _, value = term.partition("=")
        if field == "metadata.name" and meta.get("name") != value.lstrip("="):
            return False
        if field == "metadata.namespace" and meta.get("namespace") != value.lstrip("="):
            return False
    labels = meta.get("labels") or {}
    for term in filter(None, params.get("labelSelector", "").split(",")):
        key, eq, value = term.partition("=")
        if eq and labels.get(key.rstrip("!")) != value.lstrip("="):
            return False
        if not eq and key not in labels:
            return False
    return True


@attrs.define(kw_only=True)
class KubeStand(kmock.KubernetesEmulator):
    kubeconfig: Path | None = None
    _rv: int = attrs.field(default=0, init=False)
    _log: list[tuple[int, references.resource, Obj]] = attrs.field(factory=list, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.resources.load_bundled()  # 1
        # Watch streams say they are JSON (kmock's say octet-stream, which client-go refuses);
        # this reaction ranks above the emulator's own fallback for watches.
        json_stream = kmock.headers({"Content-Type": "application/json"})
        (self.fallback**1)[enums.action.WATCH] << json_stream << self._serve_watch

    # -- mutations -------------------------------------------------------------------------

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    async def _emit(self, resource: references.resource, type_: str, obj: Obj) -> None:
        event = {"type": type_, "object": copy.deepcopy(obj)}
        self._log.append((self._rv, resource, event))
        await self._buses[resource].put(event)

    def _info(self, resource: references.resource) -> references.ResourceInfo | None:
        return self.resources.get(resource)  # type: ignore[return-value]

    async def _handle(self, request: rendering.Request) -> Any:
        mutating = (enums.action.CREATE, enums.action.UPDATE, enums.action.DELETE)
        if request.resource is None or request.action not in mutating:
            return await super()._handle(request)
        if "protobuf" in request.headers.get("Content-Type", ""):
            # kubectl's typed commands (create configmap...) send protobuf; apply sends JSON.
            raise kmock.KubernetesError(
                status=415, reason="UnsupportedMediaType", message="the stand speaks JSON only"
            )
        async with self._lock:
            if request.action == enums.action.CREATE:
                await self._create(request)
            elif request.name is not None and request.action == enums.action.UPDATE:
                await self._update(request)
            elif request.name is not None:
                await self._delete(request)
        # Skip the emulator's own bookkeeping (done above): serve from the stored state.
        return await apps.RawHandler._handle(self, request)

    async def _create(self, request: rendering.Request) -> None:
        resource = request.resource
        assert resource is not None
        obj = copy.deepcopy(request.data or {})
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        if request.namespace is not None:
            meta["namespace"] = request.namespace
        key = (resource, request.namespace, meta.get("name"))
        if key in self.objects and not self.objects[key].deleted:
            raise kmock.KubernetesError(
                status=409, reason="AlreadyExists", message=f"{meta.get('name')} already exists"
            )
        meta.update(
            uid=str(uuid.uuid4()),
            creationTimestamp=_now(),
            generation=1,
            resourceVersion=self._next_rv(),
        )  # 2
        if resource == CRDS:
            self._register_crd(obj)  # 8
        if key in self.objects:
            self.objects[key].create(obj)
        else:
            self.objects[key] = obj
        await self._emit(resource, "ADDED", obj)

    def _register_crd(self, crd: Obj) -> None:
        spec = crd.get("spec", {})
        names = spec.get("names", {})
        for version in spec.get("versions", []):
            subresources = set((version.get("subresources") or {}).keys())
            self.resources[f"{spec['group']}/{version['name']}/{names['plural']}"] = (
                references.ResourceInfo(
                    kind=names.get("kind"),
                    singular=names.get("singular"),
                    namespaced=spec.get("scope") == "Namespaced",
                    verbs=CRD_VERBS,
                    shortnames=set(names.get("shortNames", [])),
                    categories=set(names.get("categories", [])),
                    subresources=subresources,
                )
            )
        crd["status"] = {
            "acceptedNames": names,
            "storedVersions": [v["name"] for v in spec.get("versions", []) if v.get("storage")],
            "conditions": [
                {"type": t, "status": "True", "reason": t, "lastTransitionTime": _now()}
                for t in ("NamesAccepted", "Established")
            ],
        }

    def _current(self, request: rendering.Request) -> tuple[Any, Obj]:
        key = (request.resource, request.namespace, request.name)
        if key not in self.objects or self.objects[key].deleted:
            raise kmock.KubernetesObjectNotFoundError()
        return key, copy.deepcopy(self.objects[key].raw)

    async def _update(self, request: rendering.Request) -> None:
        resource = request.resource
        assert resource is not None
        key, current = self._current(request)
        if isinstance(request.data, list):
            try:
                patched = jsonpatch.apply_patch(current, request.data, in_place=False)
            except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
                raise kmock.KubernetesError(
                    status=422, reason="Invalid", message=str(exc)
                ) from None  # 3
        else:
            patch = request.data or {}
            wanted_rv = (patch.get("metadata") or {}).get("resourceVersion")
            if wanted_rv and wanted_rv != current["metadata"].get("resourceVersion"):
                raise kmock.KubernetesError(
                    status=409, reason="Conflict", message="the object has been modified"
                )
            patched = merge_patch(current, patch)
        info = self._info(resource)
        if request.subresource == "status":
            patched = {**current, "status": patched.get("status")}
        elif info is not None and "status" in info.subresources:
            patched["status"] = current.get("status")
        if patched.get("status") is None:
            patched.pop("status", None)
        for field in ("uid", "creationTimestamp", "name", "namespace", "resourceVersion"):
            if field in current["metadata"]:
                patched.setdefault("metadata", {})[field] = current["metadata"][field]
        if patched == current:
            return
        meta = patched["metadata"]
        spec_fields = set(current) | set(patched)
        if any(patched.get(f) != current.get(f) for f in spec_fields - {"metadata", "status"}):
            meta["generation"] = int(current["metadata"].get("generation", 1)) + 1
        meta["resourceVersion"] = self._next_rv()
        self.objects[key].history.append(patched)
        await self._emit(resource, "MODIFIED", patched)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.objects[key].delete()
            await self._emit(resource, "DELETED", patched)

    async def _delete(self, request: rendering.Request) -> None:
        resource = request.resource
        assert resource is not None
        key, current = self._current(request)
        meta = current["metadata"]
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return
            meta["deletionTimestamp"] = _now()
            meta["deletionGracePeriodSeconds"] = 0
            meta["resourceVersion"] = self._next_rv()
            self.objects[key].history.append(current)
            await self._emit(resource, "MODIFIED", current)
            return
        meta["resourceVersion"] = self._next_rv()
        self.objects[key].history.append(current)
        self.objects[key].delete()
        await self._emit(resource, "DELETED", current)

    # -- reads -----------------------------------------------------------------------------

    def _matching(self, request: rendering.Request) -> list[Obj]:
        found = []
        for (resource, namespace, name), obj in self.objects.items():
            if resource != request.resource or obj.deleted:
                continue
            if request.namespace is not None and namespace != request.namespace:
                continue
            if request.name is not None and name != request.name:
                continue
            raw = obj.raw
            if _selector_matches(raw, request.params):
                found.append(copy.deepcopy(raw))
        return found

    def _event_matches(self, request: rendering.Request, event: Obj) -> bool:
        meta = event.get("object", {}).get("metadata", {})
        if request.namespace is not None and meta.get("namespace") != request.namespace:
            return False
        if request.name is not None and meta.get("name") != request.name:
            return False
        return _selector_matches(event.get("object", {}), request.params)

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        resource = request.resource
        assert resource is not None
        if resource not in self._get_resources():
            raise kmock.KubernetesResourceNotFoundError()
        async with self._lock:
            items = self._matching(request)
            rv = str(self._rv)
        info = self._info(resource)
        kind = (info.kind if info and info.kind else resource.plural or "").removesuffix("s")
        api_version = f"{resource.group}/{resource.version}" if resource.group else "v1"
        return {
            "apiVersion": api_version,
            "kind": f"{kind}List",
            "metadata": {"resourceVersion": rv},
            "items": items,
        }  # 5

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b""
        resource = request.resource
        assert resource is not None
        bus = self._buses[resource]
        since = request.params.get("resourceVersion", "")
        async with self._lock:
            mark = await bus.mark()
            if since.isdigit() and int(since) > 0:  # 4
                backlog = [
                    e
                    for rv, r, e in self._log
                    if rv > int(since) and r == resource and self._event_matches(request, e)
                ]
            else:
                backlog = [{"type": "ADDED", "object": o} for o in self._matching(request)]
        try:
            for event in backlog:
                yield event
            async for event in bus.stream(since=mark):
                if self._event_matches(request, event):
                    yield event
        finally:
            await bus.unmark(mark)

    async def _serve_server_version(self, request: rendering.Request) -> rendering.Payload:
        # kmock says 1.26, older than the chart's kubeVersion; be the version our tools are.
        doc = dict(await super()._serve_server_version(request))
        return {**doc, "minor": "34", "gitVersion": "v1.34.0"}

    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        doc = dict(await super()._serve_version(request))
        assert request.resource is not None
        if request.resource.group == "":
            doc["groupVersion"] = request.resource.version  # 6
        for entry in doc["resources"]:
            if "/" in entry["name"]:
                entry["shortNames"] = []  # 7
                entry["categories"] = []
        return doc
