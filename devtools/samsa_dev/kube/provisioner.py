"""A local volume provisioner: a claim of a StorageClass whose provisioner is
``samsa.dev/local`` gets a PersistentVolume of its own, a hostPath directory under the
control plane's folder, bound to it through ``claimRef`` (the PV controller then binds the
claim). A claim of a class that waits for the first consumer is provisioned once the
scheduler has picked its pod's node, as external provisioners do. A Released volume of the
Delete policy goes, with its directory, as an external provisioner deletes what it made.

It installs its class, ``samsa-local``, as the cluster's default, as kind installs
``standard``: the documented commands (a KafkaCluster that names no class) work as written.

It also resizes, as a CSI driver's external-resizer and the kubelet do together: a bound
claim of one of its classes that allows volume expansion and asks for more than its volume
holds gets it, the volume's capacity first and then the claim's ``status.capacity``. A
hostPath directory has no size of its own, so nothing else grows."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from samsa_dev.kube.api import Api

PROVISIONER = "samsa.dev/local"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
STORAGE_CLASS = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "samsa-local", "annotations": {DEFAULT_CLASS: "true"}},
    "provisioner": PROVISIONER,
    "reclaimPolicy": "Delete",
    # As kind's and every local-volume class: see class_to_provision.
    "volumeBindingMode": "WaitForFirstConsumer",
    "allowVolumeExpansion": True,
}


def class_to_provision(
    claim: dict[str, Any], classes: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """The StorageClass to provision ``claim`` of now, or None.

    A class with ``volumeBindingMode: WaitForFirstConsumer`` waits for the scheduler to name
    the pod's node on the claim. Provisioned earlier, the claim can be seen by the scheduler
    half bound (its volume named, its phase not yet Bound), which it takes for an unbound
    immediate claim: the pod is marked unschedulable, and its retry hangs on an event that
    can be missed (kubernetes#87145, #125762); a StatefulSet's pod then stayed Pending for
    minutes. Once the node is named, the scheduler waits for the binding itself."""
    meta, spec = claim["metadata"], claim["spec"]
    klass = classes.get(spec.get("storageClassName") or "")
    if klass is None or spec.get("volumeName") or meta.get("deletionTimestamp"):
        return None
    if (claim.get("status") or {}).get("phase") != "Pending":
        return None
    waits = klass.get("volumeBindingMode") == "WaitForFirstConsumer"
    if waits and not (meta.get("annotations") or {}).get(SELECTED_NODE):
        return None
    return klass


def to_resize(claim: dict[str, Any], classes: dict[str, dict[str, Any]]) -> str | None:
    """The size a bound claim of an expandable class of ours asks for and lacks, or None."""
    spec, status = claim["spec"], claim.get("status") or {}
    klass = classes.get(spec.get("storageClassName") or "")
    if klass is None or not klass.get("allowVolumeExpansion") or status.get("phase") != "Bound":
        return None
    wanted = (spec.get("resources") or {}).get("requests", {}).get("storage")
    held = (status.get("capacity") or {}).get("storage")
    if wanted is None or held is None or parse_quantity(wanted) <= parse_quantity(held):
        return None
    return str(wanted)


def volume_for(claim: dict[str, Any], klass: dict[str, Any], root: Path) -> dict[str, Any]:
    meta, spec = claim["metadata"], claim["spec"]
    name = f"pvc-{meta['uid']}"
    size = spec.get("resources", {}).get("requests", {}).get("storage", "1Gi")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
            "persistentVolumeReclaimPolicy": klass.get("reclaimPolicy", "Delete"),
            "storageClassName": klass["metadata"]["name"],
            "volumeMode": spec.get("volumeMode", "Filesystem"),
            "hostPath": {"path": str(root / name), "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
        },
    }


class Provisioner:
    def __init__(self, api: Api, root: Path, every: float = 0.5) -> None:
        self.api = api
        self.root = root
        self.every = every

    async def step(self) -> None:
        classes = {
            c["metadata"]["name"]: c
            for c in await self.api.list(STORAGE_CLASSES)
            if c.get("provisioner") == PROVISIONER
        }
        if not classes:
            return
        for claim in await self.api.list("/api/v1/persistentvolumeclaims"):
            klass = class_to_provision(claim, classes)
            if klass is None:
                continue
            pv = volume_for(claim, klass, self.root)
            folder = self.root / pv["metadata"]["name"]
            folder.mkdir(parents=True, exist_ok=True)
            # Writable by the pod's user whoever it is, as local-path-provisioner makes its
            # folders: a hostPath volume gets no fsGroup, and on the real nodes the brokers
            # and ZooKeeper run as uid 1000 (the node agent's processes run as root).
            folder.chmod(0o777)
            await self.api.ensure("/api/v1/persistentvolumes", pv)
        for claim in await self.api.list("/api/v1/persistentvolumeclaims"):
            size = to_resize(claim, classes)
            if size is None:
                continue
            meta = claim["metadata"]
            grown = {"capacity": {"storage": size}}
            await self.api.patch(
                f"/api/v1/persistentvolumes/{claim['spec']['volumeName']}", {"spec": grown}
            )
            await self.api.patch(
                f"/api/v1/namespaces/{meta['namespace']}/persistentvolumeclaims/"
                f"{meta['name']}/status",
                {"status": grown},
            )
        for pv in await self.api.list("/api/v1/persistentvolumes"):
            mine = (pv["metadata"].get("annotations") or {}).get(PROVISIONED_BY) == PROVISIONER
            released = (pv.get("status") or {}).get("phase") in ("Released", "Failed")
            if mine and released and pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete":
                shutil.rmtree(pv["spec"]["hostPath"]["path"], ignore_errors=True)
                await self.api.delete(f"/api/v1/persistentvolumes/{pv['metadata']['name']}")

    async def run(self) -> None:
        await self.api.ensure(STORAGE_CLASSES, STORAGE_CLASS)
        while True:
            await self.step()
            await asyncio.sleep(self.every)
