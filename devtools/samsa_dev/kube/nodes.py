"""Nodes for the scheduler: registered as a kubelet registers its node, and kept Ready as a
kubelet keeps it, by renewing its Lease in kube-node-lease every few seconds and posting
its status (the Ready condition's heartbeat) now and then. Nobody runs pods here: that is
the node agent's part."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from samsa_dev.kube import build
from samsa_dev.kube.api import STRATEGIC, Api

LEASE_SECONDS = 40
RENEW_EVERY = 10.0
STATUS_EVERY = 60.0
CAPACITY = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}


def node_name(i: int) -> str:
    return f"samsa-node-{i}"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node(i: int) -> dict[str, Any]:
    name = node_name(i)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                # One zone a node, so rack-aware placement has racks to spread over.
                "topology.kubernetes.io/zone": f"zone-{i}",
            },
        },
    }


def node_status() -> dict[str, Any]:
    stamp = now()
    conditions = [
        {
            "type": kind,
            "status": "False",
            "reason": f"KubeletHas{reason}",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        for kind, reason in (
            ("MemoryPressure", "SufficientMemory"),
            ("DiskPressure", "NoDiskPressure"),
            ("PIDPressure", "SufficientPID"),
        )
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "the samsa node agent runs this node's pods as local processes",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
    )
    return {
        "status": {
            "capacity": CAPACITY,
            "allocatable": CAPACITY,
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "nodeInfo": {
                "kubeletVersion": f"v{build.KUBERNETES_VERSION}",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "containerRuntimeVersion": "samsa-process://0.1",
                "kernelVersion": "",
                "osImage": "",
                "kubeProxyVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        }
    }


class NodeKeeper:
    def __init__(self, api: Api, count: int = 3) -> None:
        self.api = api
        self.count = count

    async def register(self) -> None:
        for i in range(self.count):
            await self.api.ensure("/api/v1/nodes", node(i))
            await self.post_status(i)

    async def post_status(self, i: int) -> None:
        await self.api.patch(f"/api/v1/nodes/{node_name(i)}/status", node_status(), STRATEGIC)

    async def renew(self, i: int) -> None:
        name = node_name(i)
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
        spec = {
            "holderIdentity": name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": micro_now(),
        }
        if await self.api.patch(path, {"spec": spec}) is None:
            owner = await self.api.get(f"/api/v1/nodes/{name}")
            meta: dict[str, Any] = {"name": name}
            if owner is not None:
                meta["ownerReferences"] = [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "name": name,
                        "uid": owner["metadata"]["uid"],
                    }
                ]
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": meta,
                "spec": spec,
            }
            await self.api.ensure(path.rsplit("/", 1)[0], lease)

    async def run(self) -> None:
        await self.register()
        since_status = 0.0
        while True:
            for i in range(self.count):
                await self.renew(i)
            since_status += RENEW_EVERY
            if since_status >= STATUS_EVERY:
                since_status = 0.0
                for i in range(self.count):
                    await self.post_status(i)
            await asyncio.sleep(RENEW_EVERY)
