"""A local volume provisioner: a claim of a StorageClass whose provisioner is
``samsa.dev/local`` gets a PersistentVolume of its own, a hostPath directory under the
control plane's folder, bound to it through ``claimRef`` (the PV controller then binds the
claim). A Released volume of the Delete policy goes, with its directory, as an external
provisioner deletes what it made."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from samsa.dev.kube.api import Api

PROVISIONER = "samsa.dev/local"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"


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
            for c in await self.api.list("/apis/storage.k8s.io/v1/storageclasses")
            if c.get("provisioner") == PROVISIONER
        }
        if not classes:
            return
        for claim in await self.api.list("/api/v1/persistentvolumeclaims"):
            klass = classes.get(claim["spec"].get("storageClassName") or "")
            pending = (claim.get("status") or {}).get("phase") == "Pending"
            if klass is None or not pending or claim["spec"].get("volumeName"):
                continue
            if claim["metadata"].get("deletionTimestamp"):
                continue
            pv = volume_for(claim, klass, self.root)
            (self.root / pv["metadata"]["name"]).mkdir(parents=True, exist_ok=True)
            await self.api.ensure("/api/v1/persistentvolumes", pv)
        for pv in await self.api.list("/api/v1/persistentvolumes"):
            mine = (pv["metadata"].get("annotations") or {}).get(PROVISIONED_BY) == PROVISIONER
            released = (pv.get("status") or {}).get("phase") in ("Released", "Failed")
            if mine and released and pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete":
                shutil.rmtree(pv["spec"]["hostPath"]["path"], ignore_errors=True)
                await self.api.delete(f"/api/v1/persistentvolumes/{pv['metadata']['name']}")

    async def run(self) -> None:
        while True:
            await self.step()
            await asyncio.sleep(self.every)
