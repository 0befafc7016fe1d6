"""The node agent: it plays the kubelet of every Node, on the real API, for the pods of the
namespaces it is given. There is no container runtime: each container is a local process
(`images` says which), in its own session.

- Pods bound to a ``samsa-node-*`` Node are started: their volumes become folders (emptyDir,
  ConfigMaps, Secrets, the downward API and the ServiceAccount token as files, a claim as
  its PersistentVolume's hostPath), init containers run to completion first, then the
  containers, with the pod's environment (downward API fields included).
- Each pod has its own loopback address, ``127.x.y.z`` from its uid: its processes bind and
  advertise it, as a pod its IP. Names resolve through nss_wrapper (``LD_PRELOAD``) from a
  hosts file kept here: each pod's ``<hostname>.<subdomain>.<namespace>.svc[.cluster.local]``
  (its bare name when it has no subdomain, as its own /etc/hosts would say) and each Service's
  name (to a ready pod of it: Service ports must equal their target
  ports, there is no kube-proxy).
- The pod's status: its IP, phase, conditions and container statuses; readiness from the
  container's readinessProbe (httpGet, tcpSocket, exec), every ``PROBE_SECONDS``.
- A container that exits is started again as the pod's restartPolicy says (Always; OnFailure
  when its exit code is not 0; never with Never). Once every container has exited for good the
  pod is Succeeded (all exit codes 0) or Failed, with each container's terminated state.
- A deleted pod: SIGTERM, SIGKILL once its grace period is over, then the pod is removed
  with grace 0, as a kubelet finishes a deletion.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from samsa_dev.kube import images
from samsa_dev.kube.api import STRATEGIC, Api, ApiError, kubeconfig_path_for_token

Obj = dict[str, Any]
NODE_PREFIX = "samsa-node-"
TICK = 0.3
PROBE_SECONDS = 1.0
NSS_WRAPPER = "libnss_wrapper.so"
# The sitecustomize of the pods' Python processes (see NodeAgent.name_env).
_ONE_LOOKUP_AT_A_TIME = """\
import socket
import threading

_lookup = threading.Lock()
_getaddrinfo = socket.getaddrinfo


def _one_at_a_time(*args, **kwargs):
    with _lookup:
        return _getaddrinfo(*args, **kwargs)


socket.getaddrinfo = _one_at_a_time
"""
log = logging.getLogger("samsa_dev.kube.agent")


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_ip(uid: str) -> str:
    """A loopback address of the pod's own, from its uid (127.0.0.0/16 is left alone)."""
    digest = hashlib.sha256(uid.encode()).digest()
    return f"127.{100 + digest[0] % 150}.{digest[1]}.{1 + digest[2] % 254}"


def ordinal(name: str) -> int:
    tail = name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else 0


@dataclass
class Process:
    name: str
    command: list[str]
    env: dict[str, str]
    log: Path
    cwd: Path
    popen: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    ready: bool = False
    started_at: str = ""
    finished_at: str = ""  # set once it exited for good (restartPolicy Never or OnFailure)

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        self.started_at = now()

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def exit_code(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None

    def signal(self, sig: int) -> None:
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)


@dataclass
class PodRun:
    namespace: str
    name: str
    uid: str
    ip: str
    folder: Path
    spec: Obj
    processes: list[Process] = field(default_factory=list)
    init: Process | None = None  # the init container running now
    phase: str = "Pending"
    reason: str = ""
    reported: str = ""
    starting: asyncio.Task[None] | None = None
    terminating: asyncio.Task[None] | None = None
    downward: dict[Path, Obj] = field(default_factory=dict)  # file: the downwardAPI items


@dataclass
class Event:
    at: float
    kind: str  # start, ready, unready, stop (termination begins), exit, crash
    pod: str
    pid: int


@dataclass
class NodeAgent:
    api: Api
    workdir: Path
    namespaces: set[str] | None = None  # None: every namespace
    pods: dict[str, PodRun] = field(default_factory=dict)  # by uid
    events: list[Event] = field(default_factory=list)
    # Which pods to run (None: all); the others are left Pending, as on a node that is slow.
    runs: Callable[[Obj], bool] | None = None
    # Awaited with a pod's name before its containers are stopped (tests look then).
    before_stop: Callable[[str], Awaitable[None]] | None = None
    errors: list[BaseException] = field(default_factory=list)
    hosts: dict[str, str] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None
    _last_probe: float = 0.0

    @property
    def hosts_file(self) -> Path:
        return self.workdir / "hosts"

    @property
    def lookup_shim(self) -> Path:
        return self.workdir / "lookups"

    def name_env(self) -> dict[str, str]:
        """What makes a process resolve pod and Service names as the pods do.

        nss_wrapper 1.1.12 crashes a process (SIGSEGV in libc) when two of its threads look
        names up while it reloads the hosts file, which this agent replaces as pods come and
        go; asyncio resolves in executor threads, so a controller connecting to a broker that
        has just registered did.  Python processes therefore get a ``sitecustomize`` that
        makes their lookups one at a time."""
        path = [str(self.lookup_shim), *filter(None, [os.environ.get("PYTHONPATH")])]
        return {
            "LD_PRELOAD": NSS_WRAPPER,
            "NSS_WRAPPER_HOSTS": str(self.hosts_file),
            "PYTHONPATH": os.pathsep.join(path),
        }

    def resolve(self, host: str) -> str:
        return self.hosts.get(host, host)

    def pid(self, pod: str, namespace: str | None = None) -> int | None:
        for run in self.pods.values():
            mine = run.name == pod and (namespace is None or run.namespace == namespace)
            if mine and run.terminating is None and run.processes and run.processes[0].running():
                return run.processes[0].pid
        return None

    def starts(self, since: float = 0.0) -> list[str]:
        """The pods whose containers started after `since`, in order."""
        return [e.pod for e in self.events if e.kind == "start" and e.at > since]

    # -- the loop ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """The hosts file and the lookup shim that ``name_env`` points processes at."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.hosts_file.write_text("127.0.0.1 localhost\n")
        self.lookup_shim.mkdir(exist_ok=True)
        (self.lookup_shim / "sitecustomize.py").write_text(_ONE_LOOKUP_AT_A_TIME)

    def start(self) -> NodeAgent:
        self.prepare()
        self._task = asyncio.create_task(self.run())
        return self

    async def run(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except (aiohttp.ClientError, TimeoutError) as exc:
                log.warning("the API server did not answer: %s", exc)  # the next tick asks again
            except ApiError as exc:
                if exc.status < 500 and exc.status != 429:
                    self.errors.append(exc)
                log.warning("node agent tick: %s", exc)
            except Exception as exc:  # reported by check(); keep playing meanwhile
                log.exception("node agent tick failed")
                self.errors.append(exc)
            await asyncio.sleep(TICK)

    def check(self) -> None:
        if self.errors:
            raise AssertionError(f"the node agent failed: {self.errors[:3]!r}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for run in self.pods.values():
            for task in (run.starting, run.terminating):
                if task is not None:
                    task.cancel()
            for p in [*run.processes, *([run.init] if run.init else [])]:
                p.signal(signal.SIGCONT)
                p.signal(signal.SIGKILL)
                if p.popen is not None:
                    p.popen.wait()

    async def _list(self, resource: str) -> list[Obj]:
        if self.namespaces is None:
            return await self.api.list(f"/api/v1/{resource}")
        found: list[Obj] = []
        for ns in sorted(self.namespaces):
            found += await self.api.list(f"/api/v1/namespaces/{ns}/{resource}")
        return found

    async def tick(self) -> None:
        pods = [
            p
            for p in await self._list("pods")
            if (p["spec"].get("nodeName") or "").startswith(NODE_PREFIX)
            and (self.runs is None or self.runs(p))
        ]
        seen = set()
        for pod in pods:
            meta = pod["metadata"]
            uid = meta["uid"]
            seen.add(uid)
            run = self.pods.get(uid)
            if meta.get("deletionTimestamp"):
                if run is None:
                    await self._finish(meta)
                elif run.terminating is None:
                    run.terminating = asyncio.create_task(self._terminate(pod, run))
                continue
            if run is None:
                run = self._admit(pod)
                run.starting = asyncio.create_task(self._start(pod, run))
                continue
            self._refresh_downward(run, pod)
            if run.phase == "Running" and run.terminating is None:
                policy = pod["spec"].get("restartPolicy") or "Always"
                for p in run.processes:
                    if p.running() or p.finished_at:
                        continue
                    p.ready = False
                    if not restarts(policy, p.exit_code):
                        p.finished_at = now()
                        self.events.append(Event(time.monotonic(), "exit", run.name, p.pid or 0))
                        continue
                    self.events.append(Event(time.monotonic(), "crash", run.name, p.pid or 0))
                    p.restarts += 1
                    p.start()
                    self.events.append(Event(time.monotonic(), "start", run.name, p.pid or 0))
                if run.processes and all(p.finished_at for p in run.processes):
                    run.phase = finished_phase([p.exit_code for p in run.processes])
                    await self._report(run, pod)
        for uid, run in list(self.pods.items()):
            if uid not in seen and run.terminating is None:  # removed without us: kill
                if run.starting is not None:
                    run.starting.cancel()
                for p in [*run.processes, *([run.init] if run.init else [])]:
                    p.signal(signal.SIGCONT)
                    p.signal(signal.SIGKILL)
                del self.pods[uid]
        await self._names(pods)
        if time.monotonic() - self._last_probe >= PROBE_SECONDS:
            self._last_probe = time.monotonic()
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            await asyncio.gather(*(self._probe(p) for p in live))

    # -- names ------------------------------------------------------------------------------

    async def _names(self, pods: list[Obj]) -> None:
        hosts: dict[str, str] = {}
        ready_by_ns: dict[str, list[Obj]] = {}
        for pod in pods:
            meta, spec = pod["metadata"], pod["spec"]
            ip, ns = pod_ip(meta["uid"]), meta["namespace"]
            if meta.get("deletionTimestamp"):
                continue
            if spec.get("hostname") and spec.get("subdomain"):
                base = f"{spec['hostname']}.{spec['subdomain']}.{ns}.svc"
                hosts[base] = hosts[base + ".cluster.local"] = ip
            else:
                # A kubelet puts the pod's own name in its /etc/hosts (the JVM looks itself up
                # by it); pods with a subdomain are known by the longer name above.
                hosts.setdefault(spec.get("hostname") or meta["name"], ip)
            if _condition(pod, "Ready"):
                ready_by_ns.setdefault(ns, []).append(pod)
        for svc in await self._list("services"):
            meta, spec = svc["metadata"], svc["spec"]
            selector = spec.get("selector") or {}
            if not selector:
                continue
            ready = sorted(
                (
                    p
                    for p in ready_by_ns.get(meta["namespace"], [])
                    if all(
                        (p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items()
                    )
                ),
                key=lambda p: p["metadata"]["name"],
            )
            if ready:
                base = f"{meta['name']}.{meta['namespace']}.svc"
                hosts[base] = hosts[base + ".cluster.local"] = pod_ip(ready[0]["metadata"]["uid"])
        if hosts != self.hosts:
            self.hosts = hosts
            text = "127.0.0.1 localhost\n" + "".join(f"{ip} {h}\n" for h, ip in hosts.items())
            partial = self.hosts_file.with_suffix(".partial")
            partial.write_text(text)
            partial.replace(self.hosts_file)

    # -- starting ---------------------------------------------------------------------------

    def _admit(self, pod: Obj) -> PodRun:
        meta = pod["metadata"]
        folder = self.workdir / meta["namespace"] / f"{meta['name']}-{meta['uid'][:8]}"
        run = PodRun(
            meta["namespace"], meta["name"], meta["uid"], pod_ip(meta["uid"]), folder, pod["spec"]
        )
        self.pods[meta["uid"]] = run
        return run

    async def _start(self, pod: Obj, run: PodRun) -> None:
        try:
            await self._report(run, pod)
            volumes = await self._volumes(pod, run)
            if volumes is None:  # a claim not bound yet: the next tick tries again
                self.pods.pop(run.uid, None)
                return
            for container in pod["spec"].get("initContainers") or []:
                p = await self._process(pod, run, container, volumes)
                run.init = p
                p.start()
                assert p.popen is not None
                code = await asyncio.to_thread(p.popen.wait)
                run.init = None
                if code != 0:
                    raise OSError(f"init container {container['name']} exited with {code}")
            for container in pod["spec"]["containers"]:
                p = await self._process(pod, run, container, volumes)
                run.processes.append(p)
                p.start()
                self.events.append(Event(time.monotonic(), "start", run.name, p.pid or 0))
            run.phase = "Running"
            await self._report(run, pod)
        except (images.UnknownImage, ApiError, OSError, aiohttp.ClientError) as exc:
            # Reported; the next tick starts the pod again, as a kubelet retries with backoff.
            run.reason = str(exc)
            log.warning("pod %s/%s cannot start: %s", run.namespace, run.name, exc)
            for p in run.processes:
                p.signal(signal.SIGKILL)
            with contextlib.suppress(ApiError, aiohttp.ClientError, OSError):
                await self._report(run, pod)
            await asyncio.sleep(2)
            if run.terminating is None:
                self.pods.pop(run.uid, None)

    async def _volumes(self, pod: Obj, run: PodRun) -> dict[str, Path] | None:
        ns, folder = run.namespace, run.folder / "volumes"
        result: dict[str, Path] = {}
        for volume in pod["spec"].get("volumes") or []:
            name = volume["name"]
            target = folder / name
            if "persistentVolumeClaim" in volume:
                claim_name = volume["persistentVolumeClaim"]["claimName"]
                claim = await self.api.get(
                    f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{claim_name}"
                )
                pv_name = ((claim or {}).get("spec") or {}).get("volumeName")
                pv = await self.api.get(f"/api/v1/persistentvolumes/{pv_name}") if pv_name else None
                path = ((pv or {}).get("spec") or {}).get("hostPath", {}).get("path")
                if not path:
                    return None
                result[name] = Path(path)
                continue
            target.mkdir(parents=True, exist_ok=True)
            result[name] = target
            if "configMap" in volume:
                await self._config_files(target, volume["configMap"], ns, "configmaps")
            elif "secret" in volume:
                source = {**volume["secret"], "name": volume["secret"]["secretName"]}
                await self._config_files(target, source, ns, "secrets")
            elif "downwardAPI" in volume:
                run.downward[target] = volume["downwardAPI"]
                _write_downward(target, volume["downwardAPI"], pod)
            elif "projected" in volume:
                for source in volume["projected"].get("sources") or []:
                    if "serviceAccountToken" in source:
                        token = await self._token(pod, source["serviceAccountToken"])
                        (target / source["serviceAccountToken"]["path"]).write_text(token)
                    elif "configMap" in source:
                        await self._config_files(target, source["configMap"], ns, "configmaps")
                    elif "secret" in source:
                        await self._config_files(target, source["secret"], ns, "secrets")
                    elif "downwardAPI" in source:
                        _write_downward(target, source["downwardAPI"], pod)
        return result

    async def _config_files(self, target: Path, source: Obj, ns: str, kind: str) -> None:
        obj = await self.api.get(f"/api/v1/namespaces/{ns}/{kind}/{source['name']}")
        if obj is None:
            if source.get("optional"):
                return
            raise OSError(f"{kind} {ns}/{source['name']} not found")
        data = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
        if kind == "secrets":
            data = {k: base64.b64decode(v) for k, v in data.items()}
        data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        items = source.get("items") or [{"key": k, "path": k} for k in data]
        for item in items:
            if item["key"] in data:
                path = target / item["path"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data[item["key"]])

    async def _token(self, pod: Obj, source: Obj) -> str:
        """A bound ServiceAccount token, as the kubelet asks for one (TokenRequest)."""
        meta = pod["metadata"]
        account = pod["spec"].get("serviceAccountName") or "default"
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [source["audience"]] if source.get("audience") else [],
                "expirationSeconds": max(int(source.get("expirationSeconds", 3607)), 3600),
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }
        path = f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token"
        answer = await self.api.create(path, request)
        return str((answer or {})["status"]["token"])

    async def _process(
        self, pod: Obj, run: PodRun, container: Obj, volumes: dict[str, Path]
    ) -> Process:
        mounts = {}
        for m in container.get("volumeMounts") or []:
            folder = volumes[m["name"]]
            if m.get("subPath"):
                folder = folder / m["subPath"]
                folder.mkdir(parents=True, exist_ok=True)
            mounts[m["mountPath"]] = folder
        env = await self._env(pod, run, container)
        scratch = run.folder / "containers" / container["name"]
        scratch.mkdir(parents=True, exist_ok=True)
        argv = images.command(
            container["image"],
            container,
            env,
            mounts,
            run.ip,
            ordinal(run.name),
            scratch,
            api_server=self.api.server,
        )
        if images.in_cluster_client(container["image"]):
            # Its ServiceAccount token, as in-cluster config would read it, in a kubeconfig.
            token_dir = mounts.get("/var/run/secrets/kubernetes.io/serviceaccount")
            if token_dir is not None:
                token = (token_dir / "token").read_text()
                env["KUBECONFIG"] = str(
                    kubeconfig_path_for_token(
                        self.api, token, scratch / "kubeconfig", run.namespace
                    )
                )
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
        full_env.update(env)
        full_env.update(self.name_env())
        full_env["NSS_WRAPPER_HOSTNAME"] = env["HOSTNAME"]
        log_file = run.folder / f"{container['name']}.log"
        return Process(container["name"], argv, full_env, log_file, scratch)

    async def _env(self, pod: Obj, run: PodRun, container: Obj) -> dict[str, str]:
        meta, spec = pod["metadata"], pod["spec"]
        env: dict[str, str] = {"HOSTNAME": spec.get("hostname") or meta["name"]}
        ns = run.namespace
        for source in container.get("envFrom") or []:
            for kind, key in (("configmaps", "configMapRef"), ("secrets", "secretRef")):
                if key in source:
                    obj = await self.api.get(
                        f"/api/v1/namespaces/{ns}/{kind}/{source[key]['name']}"
                    )
                    data = (obj or {}).get("data") or {}
                    for k, v in data.items():
                        value = base64.b64decode(v).decode() if kind == "secrets" else v
                        env[source.get("prefix", "") + k] = value
        for item in container.get("env") or []:
            if "value" in item:
                env[item["name"]] = _expand(item["value"], env)
                continue
            ref = item.get("valueFrom") or {}
            if "fieldRef" in ref:
                env[item["name"]] = _field(pod, run, ref["fieldRef"]["fieldPath"])
            for kind, key in (("configmaps", "configMapKeyRef"), ("secrets", "secretKeyRef")):
                if key in ref:
                    obj = await self.api.get(f"/api/v1/namespaces/{ns}/{kind}/{ref[key]['name']}")
                    value = ((obj or {}).get("data") or {}).get(ref[key]["key"])
                    if value is not None:
                        env[item["name"]] = (
                            base64.b64decode(value).decode() if kind == "secrets" else value
                        )
        return env

    def _refresh_downward(self, run: PodRun, pod: Obj) -> None:
        for target, source in run.downward.items():
            _write_downward(target, source, pod)

    # -- status -----------------------------------------------------------------------------

    async def _report(self, run: PodRun, pod: Obj) -> None:
        ready = run.phase == "Running" and all(p.ready for p in run.processes)
        started = run.phase in ("Running", "Succeeded", "Failed")
        statuses = []
        for i, container in enumerate(pod["spec"]["containers"]):
            p = run.processes[i] if i < len(run.processes) else None
            state: Obj
            if p is not None and p.finished_at:
                code = p.exit_code or 0
                state = {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if code == 0 else "Error",
                        "startedAt": p.started_at,
                        "finishedAt": p.finished_at,
                    }
                }
            elif p is not None and p.started_at:
                state = {"running": {"startedAt": p.started_at}}
            else:
                state = {
                    "waiting": {
                        "reason": "PodInitializing" if not run.reason else "CreateContainerError",
                        "message": run.reason,
                    }
                }
            statuses.append(
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": container["image"],
                    "containerID": f"samsa://{p.pid}" if p is not None and p.pid else "",
                    "ready": bool(p and p.ready),
                    "started": bool(p and p.running()),
                    "restartCount": p.restarts if p else 0,
                    "state": state,
                }
            )
        word = lambda b: "True" if b else "False"  # noqa: E731
        stamp = now()
        status: Obj = {
            "phase": run.phase,
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": run.ip,
            "podIPs": [{"ip": run.ip}],
            "startTime": (pod.get("status") or {}).get("startTime") or stamp,
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True"},
                {"type": "Initialized", "status": word(started)},
                {"type": "ContainersReady", "status": word(ready)},
                {"type": "Ready", "status": word(ready)},
            ],
            "containerStatuses": statuses,
        }
        digest = json.dumps(
            [
                status["phase"],
                ready,
                [s["restartCount"] for s in statuses],
                [s["containerID"] for s in statuses],
                run.reason,
            ]
        )
        if digest == run.reported:
            return
        for c in status["conditions"]:
            c["lastTransitionTime"] = stamp
        path = f"/api/v1/namespaces/{run.namespace}/pods/{run.name}/status"
        with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):  # gone meanwhile
            await self.api.patch(path, {"metadata": {"uid": run.uid}, "status": status}, STRATEGIC)
            run.reported = digest

    async def _probe(self, pod: Obj) -> None:
        run = self.pods.get(pod["metadata"]["uid"])
        if run is None or run.phase != "Running" or run.terminating is not None:
            return
        for container, p in zip(pod["spec"]["containers"], run.processes, strict=False):
            ready = p.running() and await self._ready(container, run)
            if ready != p.ready:
                kind = "ready" if ready else "unready"
                self.events.append(Event(time.monotonic(), kind, run.name, p.pid or 0))
            p.ready = ready
        await self._report(run, pod)

    async def _ready(self, container: Obj, run: PodRun) -> bool:
        probe = container.get("readinessProbe")
        if not probe:
            return True
        ports = {p.get("name"): p["containerPort"] for p in container.get("ports") or []}

        def port(value: Any) -> int:
            return int(ports.get(value, value))

        try:
            if "httpGet" in probe:
                get = probe["httpGet"]
                url = f"http://{run.ip}:{port(get['port'])}{get.get('path', '/')}"
                timeout = aiohttp.ClientTimeout(total=float(probe.get("timeoutSeconds", 1)))
                async with aiohttp.ClientSession(timeout=timeout) as s, s.get(url) as r:
                    return 200 <= r.status < 400
            if "tcpSocket" in probe:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(run.ip, port(probe["tcpSocket"]["port"])), 1
                )
                writer.close()
                return True
            if "exec" in probe:
                proc = await asyncio.create_subprocess_exec(
                    *probe["exec"]["command"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=run.processes[0].env,
                )
                return await asyncio.wait_for(proc.wait(), 5) == 0
        except (OSError, aiohttp.ClientError, TimeoutError):
            return False
        return False

    # -- stopping ---------------------------------------------------------------------------

    async def _terminate(self, pod: Obj, run: PodRun) -> None:
        if run.starting is not None and not run.starting.done():
            run.starting.cancel()
        if run.init is not None:
            run.init.signal(signal.SIGKILL)
        for p in run.processes:
            p.ready = False
        if self.before_stop is not None and run.processes:
            try:
                await self.before_stop(run.name)
            except Exception as exc:  # the pod still goes; the test hears of it in check()
                self.errors.append(exc)
        grace = pod["metadata"].get("deletionGracePeriodSeconds")
        if grace is None:
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
        for p in run.processes:
            self.events.append(Event(time.monotonic(), "stop", run.name, p.pid or 0))
            p.signal(signal.SIGCONT)  # a stopped process must see its SIGTERM
            p.signal(signal.SIGTERM)
        deadline = time.monotonic() + float(grace)
        for p in run.processes:
            while p.running() and time.monotonic() < deadline:  # noqa: ASYNC110 (a process)
                await asyncio.sleep(0.1)
            p.signal(signal.SIGKILL)
            if p.popen is not None:
                await asyncio.to_thread(p.popen.wait)
            self.events.append(Event(time.monotonic(), "exit", run.name, p.pid or 0))
        self.pods.pop(run.uid, None)
        await self._finish(pod["metadata"])

    async def _finish(self, meta: Obj) -> None:
        """The deletion's last step, as a kubelet takes it: grace 0 for this very pod."""
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        options = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
        with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):
            await self.api.delete(path, options)

    def remove_files(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


def restarts(policy: str, exit_code: int | None) -> bool:
    """Whether a kubelet starts an exited container again, by the pod's restartPolicy."""
    if policy == "Never":
        return False
    if policy == "OnFailure":
        return exit_code != 0
    return True


def finished_phase(exit_codes: list[int | None]) -> str:
    """The phase of a pod whose containers have all exited for good."""
    return "Succeeded" if all(code == 0 for code in exit_codes) else "Failed"


def _condition(pod: Obj, kind: str) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return bool(c.get("status") == "True")
    return False


def _field(pod: Obj, run: PodRun, path: str) -> str:
    meta, spec = pod["metadata"], pod["spec"]
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"],
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": run.ip,
        "status.podIPs": run.ip,
        "status.hostIP": "127.0.0.1",
        "status.hostIPs": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path])
    if path in ("metadata.labels", "metadata.annotations"):
        return _format_map(meta.get(path.split(".")[1]) or {})
    match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    return ""


def _format_map(values: dict[str, str]) -> str:
    """As the kubelet writes labels and annotations into a downward API file."""
    return "\n".join(f"{k}={json.dumps(v)}" for k, v in sorted(values.items()))


def _write_downward(target: Path, source: Obj, pod: Obj) -> None:
    run = PodRun(
        pod["metadata"]["namespace"],
        pod["metadata"]["name"],
        pod["metadata"]["uid"],
        pod_ip(pod["metadata"]["uid"]),
        target,
        pod["spec"],
    )
    for item in source.get("items") or []:
        if "fieldRef" not in item:
            continue
        path = target / item["path"]
        text = _field(pod, run, item["fieldRef"]["fieldPath"])
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(path.name + ".partial")
            partial.write_text(text)
            partial.replace(path)


def _expand(value: str, env: dict[str, str]) -> str:
    """$(VAR) references to variables defined before, as Kubernetes expands them."""
    return re.sub(
        r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), value
    )
