"""The StatefulSet controller and the kubelet that the API stand-in lacks, played for the
broker StatefulSets the operator writes into it, with real broker processes on 127.0.0.1.

StatefulSet controller, as Kubernetes does it for `podManagementPolicy: Parallel`:
- a pod for each ordinal below `spec.replicas`, made from the template and labelled with the
  template's revision (`controller-revision-hash`); `status.updateRevision` is the current
  template's (with `updateStrategy: OnDelete` a pod keeps its revision until it is deleted);
- a claim `data-<pod>` per pod, kept across restarts; pods above the size are deleted, and
  their claims too after them when `persistentVolumeClaimRetentionPolicy.whenScaled` says so;
- `status.replicas`, `readyReplicas`, `updatedReplicas`.

Kubelet:
- a pod runs as `samsa broker` with the pod's own arguments, its volumes mapped to
  directories (the claim's survives the pod); its init container's work is done here: the
  pod's `broker-<ordinal>.properties` copied from the ConfigMap, with the listeners rewritten
  to 127.0.0.1 ports kept per ordinal (as a pod keeps its DNS name);
- readiness: `/readyz` every tick, written to the pod's Ready condition;
- deletion: pods carry this kubelet's finalizer, so a deleted pod stays while it terminates,
  as graceful termination does: SIGTERM (the broker's controlled shutdown, as the preStop
  hook sends it), SIGKILL after `terminationGracePeriodSeconds`, then the finalizer goes;
- a container that dies is started again (restartPolicy Always).

ZooKeeper is not played: the tests' KafkaClusters use one real local ZooKeeper as their
external `zookeeper.connect`; it stands in for the ensemble.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from samsa.local.zookeeper import free_port

Obj = dict[str, Any]
FINALIZER = "kubelet.test.samsa.dev/running"
USER_AGENT = "samsa-test-kubelet"
REVISION = "controller-revision-hash"
TICK = 0.25  # seconds between two looks at the API
OWNED_ADDRESS_KEYS = ("listener.security.protocol.map", "inter.broker.listener.name")


class Api:
    """Just enough of an API client: JSON over HTTP, merge patches."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=30), headers={"User-Agent": USER_AGENT}
        )

    async def _call(self, method: str, path: str, body: Any = None) -> Obj | None:
        headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
        async with self.session.request(
            method, self.url + path, json=body, headers=headers
        ) as response:
            if response.status == 404:
                return None
            data = await response.json(content_type=None)
            if response.status >= 400:
                raise RuntimeError(f"{method} {path}: {response.status} {data}")
            return dict(data or {})

    async def get(self, path: str) -> Obj | None:
        return await self._call("GET", path)

    async def list(self, path: str, labels: dict[str, str]) -> list[Obj]:
        selector = ",".join(f"{k}={v}" for k, v in labels.items())
        found = await self._call("GET", f"{path}?labelSelector={selector}")
        return list((found or {}).get("items", []))

    async def create(self, path: str, obj: Obj) -> None:
        await self._call("POST", path, obj)

    async def patch(self, path: str, patch: Obj) -> None:
        await self._call("PATCH", path, patch)

    async def delete(self, path: str) -> None:
        await self._call("DELETE", path)

    async def close(self) -> None:
        await self.session.close()


@dataclass
class Container:
    """One pod's broker process."""

    pod: str
    uid: str
    ordinal: int
    proc: subprocess.Popen[bytes]
    command: list[str]
    log: Path
    http_port: int
    ready: bool = False
    restarts: int = 0
    terminating: asyncio.Task[None] | None = None


@dataclass
class Event:
    at: float
    kind: str  # "start", "ready", "unready", "stop" (termination begins), "exit", "crash"
    ordinal: int
    pid: int


@dataclass
class Kubelet:
    api: Api
    workdir: Path
    namespace: str = "default"
    containers: dict[str, Container] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    ports: dict[int, tuple[int, int]] = field(default_factory=dict)  # ordinal: kafka, http
    # Awaited with a pod's ordinal before its broker is stopped (tests look at it then).
    before_stop: Callable[[int], Awaitable[None]] | None = None
    tick_seconds: list[float] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _errors: list[BaseException] = field(default_factory=list)

    # -- addresses --------------------------------------------------------------------------

    def address(self, ordinal: int) -> str:
        if ordinal not in self.ports:
            self.ports[ordinal] = (free_port(), free_port())
        return f"127.0.0.1:{self.ports[ordinal][0]}"

    def bootstrap(self, brokers: int) -> str:
        return ",".join(self.address(i) for i in range(brokers))

    def pid(self, ordinal: int) -> int | None:
        for c in self.containers.values():
            if c.ordinal == ordinal and c.terminating is None and c.proc.poll() is None:
                return c.proc.pid
        return None

    def starts(self, since: float = 0.0) -> list[int]:
        """Ordinals of the brokers started after `since`, in order."""
        return [e.ordinal for e in self.events if e.kind == "start" and e.at > since]

    # -- the loop ---------------------------------------------------------------------------

    def start(self) -> Kubelet:
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            try:
                began = time.monotonic()
                await self._tick()
                self.tick_seconds.append(time.monotonic() - began)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # reported by check(); keep playing meanwhile
                self._errors.append(exc)
            await asyncio.sleep(TICK)

    def check(self) -> None:
        """Fail the test if the harness itself went wrong."""
        if self._errors:
            raise AssertionError(f"the kubelet failed: {self._errors[:3]!r}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for c in self.containers.values():
            if c.terminating is not None:
                c.terminating.cancel()
            with contextlib.suppress(ProcessLookupError):
                os.kill(c.proc.pid, signal.SIGCONT)
                c.proc.kill()
            c.proc.wait()
        await self.api.close()

    async def _tick(self) -> None:
        ns = f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets"
        for sts in await self.api.list(ns, {"app.kubernetes.io/component": "kafka"}):
            await self._statefulset(sts)
        await self._kubelet()

    # -- StatefulSet controller -------------------------------------------------------------

    def _pods_path(self, name: str = "", sub: str = "") -> str:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        return path + (f"/{name}" if name else "") + (f"/{sub}" if sub else "")

    def _claims_path(self, name: str = "") -> str:
        path = f"/api/v1/namespaces/{self.namespace}/persistentvolumeclaims"
        return path + (f"/{name}" if name else "")

    async def _statefulset(self, sts: Obj) -> None:
        meta, spec = sts["metadata"], sts["spec"]
        name, replicas, template = meta["name"], int(spec.get("replicas", 1)), spec["template"]
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
        revision = f"{name}-{digest[:10]}"
        pods = {
            int(p["metadata"]["name"].rpartition("-")[2]): p
            for p in await self.api.list(self._pods_path(), spec["selector"]["matchLabels"])
        }
        for ordinal in range(replicas):
            if ordinal not in pods:
                await self._create_pod(sts, ordinal, revision)
        for ordinal, pod in pods.items():
            if ordinal >= replicas and not pod["metadata"].get("deletionTimestamp"):
                await self.api.delete(self._pods_path(pod["metadata"]["name"]))
        policy = spec.get("persistentVolumeClaimRetentionPolicy") or {}
        if policy.get("whenScaled") == "Delete":
            for claim in await self.api.list(self._claims_path(), spec["selector"]["matchLabels"]):
                ordinal = int(claim["metadata"]["name"].rpartition("-")[2])
                if ordinal >= replicas and ordinal not in pods:
                    await self.api.delete(self._claims_path(claim["metadata"]["name"]))
                    shutil.rmtree(self._claim_dir(claim["metadata"]["name"]), ignore_errors=True)
        current = [p for p in pods.values() if not p["metadata"].get("deletionTimestamp")]
        new_status = {
            "observedGeneration": meta.get("generation"),
            "replicas": len(current),
            "readyReplicas": sum(_ready(p) for p in current),
            "updatedReplicas": sum(
                p["metadata"]["labels"].get(REVISION) == revision for p in current
            ),
            "updateRevision": revision,
        }
        if {k: (sts.get("status") or {}).get(k) for k in new_status} != new_status:
            path = f"/apis/apps/v1/namespaces/{self.namespace}/statefulsets/{name}/status"
            await self.api.patch(path, {"status": new_status})

    async def _create_pod(self, sts: Obj, ordinal: int, revision: str) -> None:
        meta, spec = sts["metadata"], sts["spec"]
        name = f"{meta['name']}-{ordinal}"
        template = spec["template"]
        labels = {
            **(template["metadata"].get("labels") or {}),
            REVISION: revision,
            "statefulset.kubernetes.io/pod-name": name,
            "apps.kubernetes.io/pod-index": str(ordinal),
        }
        volumes = list(template["spec"].get("volumes", []))
        for claim_template in spec.get("volumeClaimTemplates", []):
            claim = f"{claim_template['metadata']['name']}-{name}"
            volumes.append(
                {
                    "name": claim_template["metadata"]["name"],
                    "persistentVolumeClaim": {"claimName": claim},
                }
            )
            if await self.api.get(self._claims_path(claim)) is None:
                await self.api.create(
                    self._claims_path(),
                    {
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "metadata": {"name": claim, "labels": spec["selector"]["matchLabels"]},
                        "spec": claim_template["spec"],
                    },
                )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": dict(template["metadata"].get("annotations") or {}),
                "finalizers": [FINALIZER],
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "StatefulSet",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                **template["spec"],
                "volumes": volumes,
                "hostname": name,
                "subdomain": spec["serviceName"],
            },
        }
        await self.api.create(self._pods_path(), pod)

    # -- kubelet ----------------------------------------------------------------------------

    def _claim_dir(self, claim: str) -> Path:
        return self.workdir / "claims" / claim

    async def _kubelet(self) -> None:
        pods = await self.api.list(self._pods_path(), {"app.kubernetes.io/component": "kafka"})
        seen = set()
        for pod in pods:
            meta = pod["metadata"]
            name, uid = meta["name"], meta["uid"]
            seen.add(name)
            c = self.containers.get(name)
            if meta.get("deletionTimestamp"):
                if c is None:
                    await self._release(name)
                elif c.terminating is None:
                    c.terminating = asyncio.create_task(self._terminate(pod, c))
                continue
            if c is not None and c.uid != uid:
                continue  # the old pod's broker is still stopping
            if c is None:
                await self._start(pod)
            elif c.proc.poll() is not None:
                self.events.append(Event(time.monotonic(), "crash", c.ordinal, c.proc.pid))
                await self._restart(c)
        for name, c in list(self.containers.items()):
            if name not in seen and c.terminating is None:  # gone without us: kill it
                c.proc.kill()
                c.proc.wait()
                del self.containers[name]
        await asyncio.gather(
            *(self._probe(pod) for pod in pods if not pod["metadata"].get("deletionTimestamp"))
        )

    async def _start(self, pod: Obj) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        ordinal = int(meta["name"].rpartition("-")[2])
        pod_dir = self.workdir / "pods" / meta["uid"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        [container] = spec["containers"]
        mounts = {}  # mount path in the container -> directory here
        for m in container.get("volumeMounts", []):
            claim = volumes.get(m["name"], {}).get("persistentVolumeClaim")
            mounts[m["mountPath"]] = (
                self._claim_dir(claim["claimName"]) if claim else pod_dir / m["name"]
            )
        for directory in mounts.values():
            directory.mkdir(parents=True, exist_ok=True)
        properties = await self._init_config(spec, ordinal, mounts)
        if properties is None:
            return  # no properties yet for this broker: try again next tick
        run_dir = _mapped("/var/run/samsa", mounts)
        (run_dir / "server.properties").write_text(properties)
        args = [_mapped_arg(a, mounts) for a in container.get("args", [])]
        command = [sys.executable, "-m", "samsa.cli", *container["command"][1:], *args]
        log = self.workdir / "logs" / f"{meta['name']}-{meta['uid'][:8]}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        c = Container(
            meta["name"],
            meta["uid"],
            ordinal,
            _spawn(command, log),
            command,
            log,
            self.ports[ordinal][1],
        )
        self.containers[meta["name"]] = c
        self.events.append(Event(time.monotonic(), "start", ordinal, c.proc.pid))

    async def _init_config(self, spec: Obj, ordinal: int, mounts: dict[str, Path]) -> str | None:
        """What the init container does: this broker's properties, from the ConfigMap."""
        [config_map] = [v["configMap"]["name"] for v in spec["volumes"] if "configMap" in v]
        cm = await self.api.get(f"/api/v1/namespaces/{self.namespace}/configmaps/{config_map}")
        text = ((cm or {}).get("data") or {}).get(f"broker-{ordinal}.properties")
        if text is None:
            return None
        self.address(ordinal)
        port, http_port = self.ports[ordinal]
        lines = []
        for line in text.splitlines():
            key = line.partition("=")[0]
            if key in ("listeners", "advertised.listeners"):
                line = f"{key}=PLAINTEXT://127.0.0.1:{port}"
            elif key == "http.listener":
                line = f"{key}=127.0.0.1:{http_port}"
            elif key in ("log.dirs", "log.dir"):
                line = f"{key}={_mapped_arg(line.partition('=')[2], mounts)}"
            elif key in OWNED_ADDRESS_KEYS:
                continue
            lines.append(line)
        return "\n".join(lines) + "\n"

    async def _restart(self, c: Container) -> None:
        c.restarts += 1
        c.ready = False
        c.proc = _spawn(c.command, c.log)
        self.events.append(Event(time.monotonic(), "start", c.ordinal, c.proc.pid))

    async def _probe(self, pod: Obj) -> None:
        meta = pod["metadata"]
        c = self.containers.get(meta["name"])
        if c is None or c.uid != meta["uid"]:
            return
        ready = False
        if c.proc.poll() is None:
            try:
                url = f"http://127.0.0.1:{c.http_port}/readyz"
                async with self.api.session.get(url, timeout=aiohttp.ClientTimeout(total=1)) as r:
                    ready = r.status == 200
            except (aiohttp.ClientError, TimeoutError):
                ready = False
        if c.ready != ready:
            self.events.append(
                Event(time.monotonic(), "ready" if ready else "unready", c.ordinal, c.proc.pid)
            )
        c.ready = ready
        if _ready(pod) != ready or not pod.get("status", {}).get("containerStatuses"):
            await self._report(meta["name"], ready, c.restarts)

    async def _report(self, name: str, ready: bool, restarts: int) -> None:
        state = "True" if ready else "False"
        patch = {
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": state}],
                "containerStatuses": [
                    {"name": "broker", "ready": ready, "restartCount": restarts, "started": True}
                ],
            }
        }
        with contextlib.suppress(RuntimeError):  # the pod may be gone meanwhile
            await self.api.patch(self._pods_path(name, "status"), patch)

    async def _terminate(self, pod: Obj, c: Container) -> None:
        await self._report(c.pod, False, c.restarts)
        if self.before_stop is not None:
            await self.before_stop(c.ordinal)
        self.events.append(Event(time.monotonic(), "stop", c.ordinal, c.proc.pid))
        grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
        with contextlib.suppress(ProcessLookupError):
            os.kill(c.proc.pid, signal.SIGCONT)  # a stopped process must see its SIGTERM
            os.kill(c.proc.pid, signal.SIGTERM)
        try:
            await asyncio.to_thread(c.proc.wait, grace)
        except subprocess.TimeoutExpired:
            c.proc.kill()
            c.proc.wait()
        self.events.append(Event(time.monotonic(), "exit", c.ordinal, c.proc.pid))
        del self.containers[c.pod]
        await self._release(c.pod)

    async def _release(self, name: str) -> None:
        with contextlib.suppress(RuntimeError):
            await self.api.patch(self._pods_path(name), {"metadata": {"finalizers": []}})


def _ready(pod: Obj) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _mapped(path: str, mounts: dict[str, Path]) -> Path:
    return Path(_mapped_arg(path, mounts))


def _mapped_arg(arg: str, mounts: dict[str, Path]) -> str:
    """A path in the container, as the directory it is here."""
    for mount, directory in sorted(mounts.items(), key=lambda m: -len(m[0])):
        if arg == mount or arg.startswith(mount + "/"):
            return str(directory) + arg[len(mount) :]
    return arg


def _spawn(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
