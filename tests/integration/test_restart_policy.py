"""A pod's restartPolicy on the node agent, as a kubelet keeps it: a container that exits is
started again (Always; OnFailure when its exit code is not 0) or stays terminated with its
exit code, and a pod none of whose containers runs nor will has Succeeded or Failed. Spark
watches its executor pods and its driver's phase so."""

from __future__ import annotations

import json
from typing import Any

from samsa_dev.kube.harness import KubeNamespace, eventually

IMAGE = "ghcr.io/samsa-dev/samsa:0.1.0"
# Exits 1 the first time (it leaves a file in its working folder), 0 after.
SECOND_TIME_LUCKY = "if [ -e tried ]; then exit 0; fi; touch tried; exit 1"


def pod(name: str, policy: str, script: str) -> dict[str, Any]:
    """A pod the restricted Pod Security level admits."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": policy,
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "command": ["sh", "-c", script],
                    "securityContext": {
                        "runAsUser": 1000,
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


async def test_restart_policy_ends_pods_succeeded_or_failed_with_the_exit_code(
    kube: KubeNamespace,
) -> None:
    pods = [
        pod("never-ok", "Never", "exit 0"),
        pod("never-fails", "Never", "exit 3"),
        pod("on-failure", "OnFailure", SECOND_TIME_LUCKY),
        pod("always", "Always", "exit 0"),
    ]
    # The namespace's default ServiceAccount, which pods are admitted with, comes a moment later.
    await eventually(lambda: kube.maybe_get("serviceaccount", "default"), 60, "default account")
    for p in pods:
        await kube.kubectl("apply", "-f", "-", stdin=json.dumps(p))

    async def settled() -> dict[str, Any] | None:
        found = {p["metadata"]["name"]: p for p in (await kube.get("pods"))["items"]}
        always = found.get("always", {}).get("status", {}).get("containerStatuses") or [{}]
        ends = [found.get(n, {}).get("status", {}).get("phase") for n in pods_that_end]
        ended = all(e in ("Succeeded", "Failed") for e in ends)
        return found if ended and always[0].get("restartCount", 0) >= 2 else None

    pods_that_end = ("never-ok", "never-fails", "on-failure")
    found = await eventually(settled, 120, "the pods ended and `always` restarted")

    def outcome(name: str) -> tuple[str, int, str, int]:
        status = found[name]["status"]
        [container] = status["containerStatuses"]
        ended = container["state"]["terminated"]
        return status["phase"], ended["exitCode"], ended["reason"], container["restartCount"]

    assert outcome("never-ok") == ("Succeeded", 0, "Completed", 0)
    assert outcome("never-fails") == ("Failed", 3, "Error", 0)
    assert outcome("on-failure") == ("Succeeded", 0, "Completed", 1)
    assert found["always"]["status"]["phase"] == "Running"
    for name in pods_that_end:
        [container] = found[name]["status"]["containerStatuses"]
        assert not container["ready"] and not container["started"]
